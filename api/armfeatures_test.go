package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// catalogue is a bandit whose arms are described by one numeric arm
// feature, slant; its reward (catalogueReward) is u * slant, so that the
// best arm depends on the context and arms are related by their
// features only.
const catalogue = `{"name": "catalogue", "arms": ["lo", "midlo", "midhi", "hi"],
	"features": [{"name": "u", "type": "numeric"}],
	"arm_features": [{"name": "slant", "type": "numeric"}, {"name": "shelf", "type": "categorical", "values": ["top", "bottom"]}],
	"arm_values": {"lo": {"slant": -1, "shelf": "bottom"}, "midlo": {"slant": -0.5, "shelf": "bottom"}, "midhi": {"slant": 0.5, "shelf": "top"}, "hi": {"slant": 1, "shelf": "top"}},
	"policy": {"kind": "eps-greedy", "max_versions_behind": 0}, "model": {"hidden": [8]}, "training": {"iterations": 10000, "iterations_per_reward": 50, "min_interval": "0s"}}`

var catalogueSlant = map[string]float64{"lo": -1, "midlo": -0.5, "midhi": 0.5, "hi": 1, "new": 0.9}

// catalogueView is what the tests read of the catalogue.
type catalogueView struct {
	Arms        []string                   `json:"arms"`
	ArmFeatures []json.RawMessage          `json:"arm_features"`
	ArmValues   map[string]json.RawMessage `json:"arm_values"`
	Retired     []string                   `json:"retired"`
	Status      struct {
		TrainedRows int `json:"trained_rows"`
	} `json:"status"`
	Effects []string `json:"effects"`
}

func (f *fixture) catalogue(t *testing.T, method, path, body string) catalogueView {
	t.Helper()
	var v catalogueView
	if err := json.Unmarshal(f.must(t, http.StatusOK, method, path, body), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// decideScores makes a decision on the catalogue at u, with the event ID
// id ("" for one the service makes), and returns its arm and scores
// by arm name.
func (f *fixture) decideScores(t *testing.T, id string, u float64) (string, map[string]float64) {
	t.Helper()
	var d struct {
		Arm    string             `json:"arm"`
		Scores map[string]float64 `json:"scores"`
	}
	body := fmt.Sprintf(`{"context": {"u": %g}}`, u)
	if id != "" {
		body = fmt.Sprintf(`{"event_id": %q, "context": {"u": %g}}`, id, u)
	}
	if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/catalogue/decisions", body), &d); err != nil {
		t.Fatal(err)
	}
	return d.Arm, d.Scores
}

// meanScores returns the mean scores by arm name of n decisions on the
// catalogue at u.
func (f *fixture) meanScores(t *testing.T, u float64, n int) map[string]float64 {
	t.Helper()
	mean := map[string]float64{}
	for range n {
		_, s := f.decideScores(t, "", u)
		for k, v := range s {
			mean[k] += v / float64(n)
		}
	}
	return mean
}

// TestArmFeatures: through the HTTP API, a bandit with arm features
// (eps-greedy, refined-ts, mf-ts and linear-ts) is created, decides and
// takes rewards, learns the catalogue (after 200 rewards the mean score
// of 20 decisions puts "hi" above "lo" at u = 1 and below at u = -1),
// takes a new arm by PATCH whose first scores are near those of the arm
// like it (slant 0.9 next to hi's 1, far from lo's -1), retires an arm
// that is then never chosen, and keeps all of it across a restart. On
// both stores.
func TestArmFeatures(t *testing.T) {
	for _, kind := range []string{"eps-greedy", "refined-ts", "mf-ts", "linear-ts"} {
		t.Run(kind, func(t *testing.T) {
			onBothStores(t, func(t *testing.T, st bandit.Store) { testArmFeatures(t, st, kind) })
		})
	}
}

func testArmFeatures(t *testing.T, st bandit.Store, kind string) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(catalogue, `"kind": "eps-greedy"`, `"kind": "`+kind+`"`, 1))
	env := rand.New(rand.NewPCG(1, 2))
	const rewards = 200
	for i := range rewards {
		u := float64(2*env.IntN(2) - 1)
		id := fmt.Sprint("e", i)
		arm, _ := f.decideScores(t, id, u)
		r := u*catalogueSlant[arm] + 0.1*env.NormFloat64()
		f.must(t, http.StatusNoContent, "POST", "/v1/bandits/catalogue/events/"+id+"/reward", fmt.Sprintf(`{"value": %g}`, r))
	}
	deadline := time.Now().Add(60 * time.Second)
	for v := f.catalogue(t, "GET", "/v1/bandits/catalogue", ""); v.Status.TrainedRows < rewards; v = f.catalogue(t, "GET", "/v1/bandits/catalogue", "") {
		if time.Now().After(deadline) {
			t.Fatalf("trained on %d of %d rewards after 60s", v.Status.TrainedRows, rewards)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The order of the extreme arms turns with the context; tolerance:
	// an eighth of their true gap of 2. The policies rarely play the
	// worse of the two at either context, whose score stays uncertain
	// (a Thompson sampler's draws of it are wide) or loosely fitted (the
	// greedy kind's point estimate): over 64 runs (the four kinds, both
	// stores, 8 times) the smaller of the two differences was 0.49 at its
	// least. A model blind to the arms'
	// features scores hi and lo alike; one blind to the context orders
	// them alike at both.
	up, down := f.meanScores(t, 1, 20), f.meanScores(t, -1, 20)
	t.Logf("mean scores at u = 1: %v, at u = -1: %v; hi - lo %.3f, lo - hi %.3f", up, down, up["hi"]-up["lo"], down["lo"]-down["hi"])
	if up["hi"]-up["lo"] < 0.25 || down["lo"]-down["hi"] < 0.25 {
		t.Errorf("mean scores hi - lo %.3f at u = 1 and lo - hi %.3f at u = -1, want at least 0.25 each", up["hi"]-up["lo"], down["lo"]-down["hi"])
	}

	v := f.catalogue(t, "PATCH", "/v1/bandits/catalogue", `{"add_arms": ["new"], "arm_values": {"new": {"slant": 0.9, "shelf": "top"}}}`)
	if !slices.Equal(v.Arms, []string{"lo", "midlo", "midhi", "hi", "new"}) || v.ArmValues["new"] == nil {
		t.Fatalf("after adding an arm: arms %q, arm values %s", v.Arms, v.ArmValues)
	}
	s := f.meanScores(t, 1, 10)
	t.Logf("first mean scores at u = 1 with the new arm: %v", s)
	// Tolerance: the new arm's reward is 0.1 below hi's and 1.9 above
	// lo's; its first score must be within 0.4 of hi's and nearer hi's.
	if len(s) != 5 || math.Abs(s["new"]-s["hi"]) > 0.4 || math.Abs(s["new"]-s["hi"]) >= math.Abs(s["new"]-s["lo"]) {
		t.Errorf("scores at u = 1 %v: want the new arm's (slant 0.9) within 0.4 of hi's and nearer hi's than lo's", s)
	}

	v = f.catalogue(t, "PATCH", "/v1/bandits/catalogue", `{"retire_arms": ["hi"]}`)
	if !slices.Equal(v.Retired, []string{"hi"}) || !strings.Contains(strings.Join(v.Effects, "\n"), "retire_arms") {
		t.Fatalf("after retiring hi: retired %q, effects %q", v.Retired, v.Effects)
	}
	g := newFixture(t, st) // a restart
	if v := g.catalogue(t, "GET", "/v1/bandits/catalogue", ""); !slices.Equal(v.Retired, []string{"hi"}) || len(v.ArmFeatures) != 2 || len(v.ArmValues) != 5 {
		t.Fatalf("after a restart: retired %q, %d arm features, %d arm values", v.Retired, len(v.ArmFeatures), len(v.ArmValues))
	}
	for range 20 {
		if arm, _ := g.decideScores(t, "", 1); arm == "hi" {
			t.Fatal("the retired arm hi was chosen")
		}
	}
}

// TestArmFeaturesBadInput: bad arm features at creation or by PATCH are
// a 400 naming the field, and nothing is stored. On both stores.
func TestArmFeaturesBadInput(t *testing.T) { onBothStores(t, testArmFeaturesBadInput) }

func testArmFeaturesBadInput(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", catalogue)
	bad := func(old, new string) string {
		return strings.Replace(strings.Replace(catalogue, `"name": "catalogue"`, `"name": "bad"`, 1), old, new, 1)
	}
	for _, tc := range []struct {
		name, method, body, field string
	}{
		{"an arm without its features", "POST", bad(`"hi": {"slant": 1, "shelf": "top"}`, `"hx": {"slant": 1, "shelf": "top"}`), "arm_values.hi"},
		{"an arm feature of the wrong type", "POST", bad(`"hi": {"slant": 1,`, `"hi": {"slant": "steep",`), "arm_values.hi.slant"},
		{"an undeclared category", "POST", bad(`"shelf": "top"}}`, `"shelf": "middle"}}`), "arm_values.hi.shelf"},
		{"an unknown arm feature", "POST", bad(`"hi": {"slant": 1,`, `"hi": {"slant": 1, "weight": 3,`), "arm_values.hi.weight"},
		{"a missing arm feature", "POST", bad(`"hi": {"slant": 1,`, `"hi": {`), "arm_values.hi.slant"},
		{"arm values that are not an object", "POST", bad(`"hi": {"slant": 1, "shelf": "top"}`, `"hi": 3`), "arm_values.hi"},
		{"an arm feature with an unknown type", "POST", bad(`"type": "numeric"}, {"name": "shelf"`, `"type": "real"}, {"name": "shelf"`), "arm_features[0].type"},
		{"a new arm without features", "PATCH", `{"add_arms": ["new"]}`, "arm_values.new"},
		{"a new arm with a feature of the wrong type", "PATCH", `{"add_arms": ["new"], "arm_values": {"new": {"slant": true, "shelf": "top"}}}`, "arm_values.new.slant"},
		{"new features for an existing arm", "PATCH", `{"arm_values": {"hi": {"slant": 0, "shelf": "top"}}}`, "arm_values.hi"},
		{"retiring an unknown arm", "PATCH", `{"retire_arms": ["ghost"]}`, "retire_arms[0]"},
		{"retiring every arm", "PATCH", `{"retire_arms": ["lo", "midlo", "midhi", "hi"]}`, "retired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/bandits"
			if tc.method == "PATCH" {
				path += "/catalogue"
			}
			resp, body := f.call(t, tc.method, path, "application/json", tc.body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") || !strings.Contains(string(body), `"`+tc.field+`"`) {
				t.Errorf("%s %s = %d %s, want 400 problem+json naming %s", tc.method, path, resp.StatusCode, body, tc.field)
			}
			f.must(t, http.StatusNotFound, "GET", "/v1/bandits/bad", "")
			if v := f.catalogue(t, "GET", "/v1/bandits/catalogue", ""); len(v.Arms) != 4 || len(v.Retired) != 0 || len(v.ArmValues) != 4 {
				t.Errorf("after the refused request: arms %q, retired %q, %d arm values", v.Arms, v.Retired, len(v.ArmValues))
			}
		})
	}
}
