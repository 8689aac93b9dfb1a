package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// A bandit moves between two services: the Go client creates a greedy
// and a mean-field TS bandit on service A (in memory), decides and
// rewards until each has trained, reads their status, and `refinery
// snapshot export` and `import` move them to service B (PostgreSQL).
// On B each has the same configuration and posterior version, and on
// the same contexts the greedy bandit makes the same decisions with the
// same scores as on A, and the Thompson sampler the same propensities
// within Monte Carlo error (1,000 groups per estimate: standard error
// at most 0.016, tolerance 0.1). A snapshot of another model layout,
// or an altered one, is refused in one line.
func TestSnapshotMovesABanditBetweenServices(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	a, b := startServe(t, ""), startServe(t, url)
	ctx := context.Background()
	ca, err := apiclient.New(a.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := apiclient.New(b.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	features := []bandit.Feature{{Name: "color", Type: bandit.Categorical, Values: []string{"red", "blue"}}, {Name: "size", Type: bandit.Numeric}}
	training := bandit.TrainingConfig{Iterations: 60, IterationsPerReward: 60, CPUShare: 1, SnapshotEvery: 1, MinInterval: new(bandit.Duration)}
	for _, cfg := range []*bandit.Config{
		{Name: "greedy", Arms: []string{"a", "b"}, Features: features, Policy: bandit.PolicyConfig{Kind: bandit.Greedy}, Model: bandit.ModelConfig{Hidden: []int{8}}, Training: training},
		{Name: "mf", Arms: []string{"a", "b"}, Features: features, Policy: bandit.PolicyConfig{Kind: bandit.MeanFieldTS, PropensitySamples: 1000}, Model: bandit.ModelConfig{Hidden: []int{8}}, Training: training},
	} {
		if _, err := ca.CreateBandit(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		for i := range 60 {
			color := []string{"red", "blue"}[i%2]
			d, err := ca.Decide(ctx, cfg.Name, apiclient.DecisionRequest{Context: map[string]any{"color": color, "size": float64(i%5) - 2}})
			if err != nil {
				t.Fatal(err)
			}
			if err := ca.Reward(ctx, cfg.Name, d.EventID, toyReward(color, d.Arm)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Wait for each trainer to have trained on every reward.
	deadline := time.Now().Add(60 * time.Second)
	for _, name := range []string{"greedy", "mf"} {
		for {
			st, err := ca.Bandit(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if st.Status.ModelVersion > 0 && st.Status.TrainerLag == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: version %d, trainer lag %d after 60s", name, st.Status.ModelVersion, st.Status.TrainerLag)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	dir := t.TempDir()
	for _, name := range []string{"greedy", "mf"} {
		file := filepath.Join(dir, name+".json")
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"snapshot", "export", "--url", a.URL(), "--bandit", name, "--out", file}, &stdout, &stderr); code != 0 {
			t.Fatalf("snapshot export %s: exit %d: %s", name, code, stderr.String())
		}
		stdout.Reset()
		if code := run(ctx, []string{"snapshot", "import", "--url", b.URL(), file}, &stdout, &stderr); code != 0 {
			t.Fatalf("snapshot import %s: exit %d: %s", name, code, stderr.String())
		}
		t.Logf("%s%s", stderr.String(), stdout.String())
	}

	rng := 0
	for _, name := range []string{"greedy", "mf"} {
		sa, err := ca.Bandit(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := cb.Bandit(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		ja, _ := json.Marshal(sa.Config)
		jb, _ := json.Marshal(sb.Config)
		if !bytes.Equal(ja, jb) {
			t.Errorf("%s: configuration on B %s, on A %s", name, jb, ja)
		}
		if sa.Status.ModelVersion != sb.Status.ModelVersion || sa.Status.ELBO == nil || sb.Status.ELBO == nil || *sa.Status.ELBO != *sb.Status.ELBO {
			t.Errorf("%s: B has version %d (ELBO %v), A %d (ELBO %v)", name, sb.Status.ModelVersion, sb.Status.ELBO, sa.Status.ModelVersion, sa.Status.ELBO)
		}
		for i := range 10 {
			rng++
			c := map[string]any{"color": []string{"red", "blue"}[i%2], "size": float64(i%7)/2 - 1.5}
			da, err := ca.Decide(ctx, name, apiclient.DecisionRequest{EventID: fmt.Sprint("same", rng), Context: c})
			if err != nil {
				t.Fatal(err)
			}
			db, err := cb.Decide(ctx, name, apiclient.DecisionRequest{EventID: fmt.Sprint("same", rng), Context: c})
			if err != nil {
				t.Fatal(err)
			}
			if da.ModelVersion != sa.Status.ModelVersion || db.ModelVersion != da.ModelVersion {
				t.Errorf("%s %v: decided on versions %d (A) and %d (B), want %d", name, c, da.ModelVersion, db.ModelVersion, sa.Status.ModelVersion)
			}
			for _, arm := range []string{"a", "b"} {
				pa, pb := da.Probabilities[arm], db.Probabilities[arm]
				switch name {
				case "greedy":
					if da.Arm != db.Arm || da.Scores[arm] != db.Scores[arm] || pa != pb {
						t.Errorf("greedy %v: A chose %s (scores %v), B %s (scores %v)", c, da.Arm, da.Scores, db.Arm, db.Scores)
					}
				case "mf":
					if math.Abs(pa-pb) > 0.1 {
						t.Errorf("mf %v: propensity of %s %.3f on A, %.3f on B", c, arm, pa, pb)
					}
				}
			}
		}
	}

	// Another model layout, with a valid checksum, and an altered file.
	raw, err := os.ReadFile(filepath.Join(dir, "greedy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f bandit.SnapshotFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	f.ModelLayout = bandit.ModelLayout + 1
	f.SHA256 = f.Sum()
	other, _ := json.Marshal(f)
	otherFile := filepath.Join(dir, "other-layout.json")
	os.WriteFile(otherFile, other, 0o644)
	altered := filepath.Join(dir, "altered.json")
	alteredRaw := bytes.Replace(raw, []byte(`"model_version": `), []byte(`"model_version": 1`), 1)
	os.WriteFile(altered, alteredRaw, 0o644)
	var af bandit.SnapshotFile
	if err := json.Unmarshal(alteredRaw, &af); err != nil {
		t.Fatal(err)
	}
	runCases(t, []runCase{
		{"a snapshot of another model layout is a one-line error", []string{"snapshot", "import", "--url", b.URL(), otherFile}, 1, "",
			fmt.Sprintf("refinery snapshot: %s: bandit: invalid: model_layout: the snapshot's model is of layout %d; this service reads layout %d only: export the bandit again from a service of this version\n", otherFile, bandit.ModelLayout+1, bandit.ModelLayout)},
		{"an altered snapshot is a one-line error", []string{"snapshot", "import", "--url", b.URL(), altered}, 1, "", "refinery snapshot: " + altered + ": bandit: invalid: sha256: checksum mismatch: the snapshot was altered or truncated (computed " + af.Sum() + ")\n"},
		{"a bandit the service has is a conflict", []string{"snapshot", "import", "--url", b.URL(), filepath.Join(dir, "greedy.json")}, 1, "",
			"refinery snapshot: POST /v1/snapshots: 409 Conflict: a bandit named \"greedy\" already exists\n"},
		{"an unknown bandit is a one-line error", []string{"snapshot", "export", "--url", a.URL(), "--bandit", "nope"}, 1, "",
			"refinery snapshot: GET /v1/bandits/nope/snapshot: 404 Not Found: no bandit named \"nope\"\n"},
		{"an action is required", []string{"snapshot"}, 2, "", "refinery snapshot: want export or import (refinery snapshot --help)\n"},
	})
	// The server refuses another layout as well, naming the member.
	_, err = cb.ImportSnapshot(ctx, json.RawMessage(other))
	var e *apiclient.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Problem.Field != "model_layout" {
		t.Errorf("POST /v1/snapshots of another layout: %v, want a 400 naming model_layout", err)
	}
	if !strings.Contains(fmt.Sprint(err), "layout") {
		t.Errorf("error %v does not say layout", err)
	}
}

// toyReward: arm a pays 1 on red, arm b pays 1 on blue.
func toyReward(color, arm string) float64 {
	if (color == "red") == (arm == "a") {
		return 1
	}
	return 0
}

// Every command that talks to a service sends --api-key, or else
// $REFINERY_API_KEY, as the service expects it (issue 30, finding 3):
// against a server that requires keys, snapshot export and import fail
// with the 401 without one and succeed with either; the flag wins over
// the variable.
func TestServiceCommandsSendTheAPIKeyFromTheFlagOrTheEnvironment(t *testing.T) {
	a := startMain(t, func(m *Main) { m.RequireKeys = true })
	b := startMain(t, func(m *Main) { m.RequireKeys = true })
	ctx := context.Background()
	ca, err := apiclient.New(a.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &bandit.Config{Name: "keyed", Arms: []string{"a", "b"}, Features: []bandit.Feature{{Name: "size", Type: bandit.Numeric}}, Policy: bandit.PolicyConfig{Kind: bandit.Greedy}}
	if _, err := ca.WithAPIKey(a.AdminKey).CreateBandit(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "keyed.json")
	refinery := func(env string, args ...string) (int, string) {
		t.Helper()
		t.Setenv("REFINERY_API_KEY", env)
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		return code, stderr.String()
	}
	export := []string{"snapshot", "export", "--url", a.URL(), "--bandit", "keyed", "--out", file}
	if code, stderr := refinery("", export...); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("export without a key = exit %d, %q; want 1 and the 401", code, stderr)
	}
	if code, stderr := refinery("", append(export, "--api-key", a.AdminKey)...); code != 0 {
		t.Errorf("export --api-key = exit %d, %q; want 0", code, stderr)
	}
	if code, stderr := refinery(a.AdminKey, export...); code != 0 {
		t.Errorf("export with $REFINERY_API_KEY = exit %d, %q; want 0", code, stderr)
	}
	if code, stderr := refinery(a.AdminKey, append(export, "--api-key", "rfk_wrong")...); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("export with a wrong --api-key over a right $REFINERY_API_KEY = exit %d, %q; want 1, the flag winning", code, stderr)
	}
	imp := []string{"snapshot", "import", "--url", b.URL(), file}
	if code, stderr := refinery("", imp...); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("import without a key = exit %d, %q; want 1 and the 401", code, stderr)
	}
	if code, stderr := refinery(b.AdminKey, imp...); code != 0 {
		t.Errorf("import with $REFINERY_API_KEY = exit %d, %q; want 0", code, stderr)
	}
	cb, err := apiclient.New(b.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cb.WithAPIKey(b.AdminKey).Bandit(ctx, "keyed"); err != nil {
		t.Errorf("the imported bandit on B: %v", err)
	}
	// loadgen takes the key the same way (one level, briefly).
	code, stderr := refinery(a.AdminKey, "loadgen", "--url", a.URL(), "--policy", "eps-greedy", "--concurrency", "1", "--duration", "200ms", "--train", "20", "--data", sharedMushroomDir(t))
	if code != 0 {
		t.Errorf("loadgen with $REFINERY_API_KEY = exit %d, %q; want 0", code, stderr)
	}
}
