package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// exported runs refinery export with args and returns its stdout.
func exported(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"export"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("export %q: exit %d: %s", args, code, stderr.String())
	}
	return stdout.String()
}

// refinery export writes what the service stored: 30 decisions of an
// eps-greedy bandit through the API, 20 of them rewarded, come back as
// DSJSON (chosen action first, its propensity, the negated reward as
// cost, the context as sent) and as Open Bandit Pipeline CSV (action
// index, reward, pscore, the encoded context), in order, with the
// unrewarded ones only on request, and a time range selects exactly the
// decisions made in it.
func TestExport(t *testing.T) {
	url, cl := servedShop(t)
	ctx := context.Background()
	type sent struct {
		d       *apiclient.Decision
		context map[string]any
		reward  *float64
	}
	var all []sent
	byID := map[string]sent{}
	for i := range 30 {
		c := map[string]any{"color": []string{"red", "green", "blue"}[i%3], "size": float64(i) / 4}
		d, err := cl.Decide(ctx, "shop", apiclient.DecisionRequest{EventID: fmt.Sprintf("e%02d", i), Context: c})
		if err != nil {
			t.Fatal(err)
		}
		s := sent{d: d, context: c}
		if i%3 != 2 {
			v := float64(i) - 10.5
			if err := cl.Reward(ctx, "shop", d.EventID, v); err != nil {
				t.Fatal(err)
			}
			s.reward = &v
		}
		all = append(all, s)
		byID[d.EventID] = s
		time.Sleep(2 * time.Millisecond) // distinct creation times for the range
	}
	arms := []string{"x", "y", "z"}

	t.Run("dsjson", func(t *testing.T) {
		lines := strings.Split(strings.TrimSpace(exported(t, "--database-url", url, "--bandit", "shop")), "\n")
		if len(lines) != 20 {
			t.Fatalf("%d lines, want the 20 rewarded decisions", len(lines))
		}
		last := ""
		for _, line := range lines {
			var l struct {
				Cost        float64   `json:"_label_cost"`
				Probability float64   `json:"_label_probability"`
				Action      int       `json:"_label_Action"`
				Index       int       `json:"_labelIndex"`
				EventID     string    `json:"EventId"`
				Version     string    `json:"Version"`
				Timestamp   time.Time `json:"Timestamp"`
				A           []int     `json:"a"`
				P           []float64 `json:"p"`
				C           struct {
					Context map[string]any `json:"Context"`
					Multi   []struct {
						Arm struct {
							Name string `json:"name"`
						} `json:"Arm"`
					} `json:"_multi"`
				} `json:"c"`
				VWState struct {
					M string `json:"m"`
				} `json:"VWState"`
			}
			if !strings.HasPrefix(line, `{"_label_cost":`) {
				t.Errorf("line %q does not start with _label_cost (DSJSON readers look for it)", line)
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			s, ok := byID[l.EventID]
			if !ok || s.reward == nil {
				t.Fatalf("line of event %q, which was not a rewarded decision", l.EventID)
			}
			if l.EventID <= last {
				t.Errorf("event %s after %s: not oldest first", l.EventID, last)
			}
			last = l.EventID
			chosen := indexOf(arms, s.d.Arm)
			var sum float64
			for _, p := range l.P {
				sum += p
			}
			switch {
			case l.Cost != -*s.reward:
				t.Errorf("%s: cost %g, want -reward = %g", l.EventID, l.Cost, -*s.reward)
			case l.Action != chosen+1 || l.Index != chosen || l.A[0] != chosen+1 || len(l.A) != 3:
				t.Errorf("%s: action %d, index %d, a %v; want chosen arm %d first", l.EventID, l.Action, l.Index, l.A, chosen)
			case l.Probability != s.d.Probabilities[s.d.Arm] || l.P[0] != l.Probability || math.Abs(sum-1) > 1e-9:
				t.Errorf("%s: probability %g, p %v; want %g first, summing to 1", l.EventID, l.Probability, l.P, s.d.Probabilities[s.d.Arm])
			case l.C.Context["color"] != s.context["color"] || l.C.Context["size"] != s.context["size"]:
				t.Errorf("%s: context %v, sent %v", l.EventID, l.C.Context, s.context)
			case len(l.C.Multi) != 3 || l.C.Multi[2].Arm.Name != "z" || l.Version != "1" || l.VWState.M != strconv.FormatInt(s.d.ModelVersion, 10):
				t.Errorf("%s: _multi %v, Version %q, VWState %v", l.EventID, l.C.Multi, l.Version, l.VWState)
			case !l.Timestamp.Equal(s.d.CreatedAt.Truncate(time.Microsecond)):
				t.Errorf("%s: timestamp %v, decided at %v", l.EventID, l.Timestamp, s.d.CreatedAt)
			}
		}
		withUnrewarded := strings.Split(strings.TrimSpace(exported(t, "--database-url", url, "--bandit", "shop", "--unrewarded")), "\n")
		if n := strings.Count(strings.Join(withUnrewarded, "\n"), `"_skipLearn":true`); len(withUnrewarded) != 30 || n != 10 {
			t.Errorf("--unrewarded: %d lines, %d skipLearn; want 30 and 10", len(withUnrewarded), n)
		}
	})

	t.Run("obp-csv", func(t *testing.T) {
		rows, err := csv.NewReader(strings.NewReader(exported(t, "--database-url", url, "--bandit", "shop", "--format", "obp-csv", "--unrewarded"))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Join(rows[0], ","), "event_id,timestamp,action,reward,pscore,context_0,context_1,context_2,context_3"; got != want {
			t.Errorf("header %q, want %q (3 one-hot colors and the size)", got, want)
		}
		if len(rows) != 31 {
			t.Fatalf("%d rows, want a header and 30 decisions", len(rows))
		}
		for i, r := range rows[1:] {
			s := all[i]
			reward := ""
			if s.reward != nil {
				reward = strconv.FormatFloat(*s.reward, 'g', -1, 64)
			}
			color := i % 3
			wantCtx := []string{"0", "0", "0", strconv.FormatFloat((float64(i)/4-1)/2, 'g', -1, 64)}
			wantCtx[color] = "1"
			want := append([]string{s.d.EventID, r[1], strconv.Itoa(indexOf(arms, s.d.Arm)), reward, strconv.FormatFloat(s.d.Probabilities[s.d.Arm], 'g', -1, 64)}, wantCtx...)
			if strings.Join(r, ",") != strings.Join(want, ",") {
				t.Errorf("row %d = %q, want %q", i, r, want)
			}
		}
	})

	t.Run("obp-csv says what each context column is", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "shop.csv")
		var stdout, stderr bytes.Buffer
		if code := run(ctx, []string{"export", "--database-url", url, "--bandit", "shop", "--format", "obp-csv", "--out", out}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		b, err := os.ReadFile(out + ".columns.json")
		if err != nil {
			t.Fatalf("%v (stderr %q)", err, stderr.String())
		}
		var cols []struct{ Column, Feature, Describe string }
		if err := json.Unmarshal(b, &cols); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range cols {
			got = append(got, c.Column+" "+c.Describe)
		}
		want := []string{"context_0 color=red", "context_1 color=green", "context_2 color=blue", "context_3 (size - 1) / 2"}
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", out+".columns.json", got, want)
		}
		if !strings.Contains(stderr.String(), "context columns described in "+out+".columns.json") {
			t.Errorf("stderr %q does not name the columns file", stderr.String())
		}
		// To stdout, the mapping goes to stderr.
		stderr.Reset()
		if code := run(ctx, []string{"export", "--database-url", url, "--bandit", "shop", "--format", "obp-csv"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		if want := "context columns: " + strings.Join(want, "; ") + "\n"; !strings.HasSuffix(stderr.String(), want) {
			t.Errorf("stderr %q, want it to end with %q", stderr.String(), want)
		}
	})

	t.Run("a time range selects the decisions made in it", func(t *testing.T) {
		from := all[10].d.CreatedAt.Format(time.RFC3339Nano)
		to := all[20].d.CreatedAt.Format(time.RFC3339Nano)
		rows, err := csv.NewReader(strings.NewReader(exported(t, "--database-url", url, "--bandit", "shop", "--format", "obp-csv", "--unrewarded", "--from", from, "--to", to))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows[1:] {
			ids = append(ids, r[0])
		}
		if got, want := strings.Join(ids, ","), "e10,e11,e12,e13,e14,e15,e16,e17,e18,e19"; got != want {
			t.Errorf("[%s, %s): %s, want %s", from, to, got, want)
		}
		if out := exported(t, "--database-url", url, "--bandit", "shop", "--from", "2000-01-01", "--to", "2000-01-02"); out != "" {
			t.Errorf("an empty range wrote %q", out)
		}
	})

	t.Run("a grown and then deleted bandit exports its whole log", func(t *testing.T) {
		if _, err := cl.UpdateBandit(ctx, "shop", []byte(`{"add_arms": ["w"], "add_values": {"color": ["black"]}}`)); err != nil {
			t.Fatal(err)
		}
		d, err := cl.Decide(ctx, "shop", apiclient.DecisionRequest{EventID: "g1", Context: map[string]any{"color": "black", "size": 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Reward(ctx, "shop", "g1", 3); err != nil {
			t.Fatal(err)
		}
		if err := cl.DeleteBandit(ctx, "shop", false); err != nil {
			t.Fatal(err)
		}
		// DSJSON: each decision lists the arms the bandit had then.
		lines := strings.Split(strings.TrimSpace(exported(t, "--database-url", url, "--bandit", "shop")), "\n")
		if len(lines) != 21 {
			t.Fatalf("%d lines, want 21 rewarded decisions", len(lines))
		}
		for i, line := range lines {
			var l struct {
				A []int `json:"a"`
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 4, false: 3}[i == 20]; len(l.A) != want {
				t.Errorf("line %d: %d actions, want %d", i, len(l.A), want)
			}
		}
		// OBP: every row in the current encoding (4 colors and the size),
		// the earlier ones encoded again from their contexts.
		rows, err := csv.NewReader(strings.NewReader(exported(t, "--database-url", url, "--bandit", "shop", "--format", "obp-csv"))).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 22 || len(rows[0]) != 10 {
			t.Fatalf("%d rows of %d columns, want a header and 21 rows of 10", len(rows), len(rows[0]))
		}
		if got, want := strings.Join(rows[1][5:], ","), "1,0,0,0,-0.5"; got != want {
			t.Errorf("e00's context %s, want %s (red, size 0)", got, want)
		}
		if got, want := strings.Join(rows[21][:3], ",")+","+strings.Join(rows[21][5:], ","), "g1,"+rows[21][1]+","+strconv.Itoa(indexOf([]string{"x", "y", "z", "w"}, d.Arm))+",0,0,0,1,0"; got != want {
			t.Errorf("g1's row %s, want %s (black, size 1)", got, want)
		}
	})

	runCases(t, []runCase{
		{"an unknown bandit is a one-line error", []string{"export", "--database-url", url, "--bandit", "nope"}, 1, "", "refinery export: --bandit: no bandit named \"nope\" in the database\n"},
		{"an unknown format is refused", []string{"export", "--database-url", url, "--bandit", "shop", "--format", "parquet"}, 2, "", "refinery export: --format \"parquet\": want dsjson or obp-csv\n"},
		{"a bad time is refused", []string{"export", "--database-url", url, "--bandit", "shop", "--from", "yesterday"}, 2, "", "refinery export: --from \"yesterday\": want RFC 3339 (2026-11-24T01:00:00Z) or a date (2026-11-24)\n"},
		{"an empty range is refused", []string{"export", "--database-url", url, "--bandit", "shop", "--from", "2026-01-02", "--to", "2026-01-01"}, 2, "", "refinery export: --from 2026-01-02 is not before --to 2026-01-01\n"},
	})
}

// servedShop serves a fresh schema and creates on it the export and
// evaluate tests' bandit "shop": arms x, y, z, a color and a size,
// eps-greedy with epsilon 0.3. It returns the schema's URL and a client
// of the service.
func servedShop(t *testing.T) (string, *apiclient.Client) {
	t.Helper()
	url := storetest.FreshSchemaURL(t)
	m := startServe(t, url)
	cl, err := apiclient.New(m.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateBandit(context.Background(), map[string]any{
		"name": "shop", "arms": []string{"x", "y", "z"},
		"features": []map[string]any{
			{"name": "color", "type": "categorical", "values": []string{"red", "green", "blue"}},
			{"name": "size", "type": "numeric", "center": 1, "scale": 2},
		},
		"policy": map[string]any{"kind": "eps-greedy", "epsilon": 0.3}, "model": map[string]any{"hidden": []int{4}},
	}); err != nil {
		t.Fatal(err)
	}
	return url, cl
}

func indexOf(arms []string, arm string) int {
	for i, a := range arms {
		if a == arm {
			return i
		}
	}
	return -1
}
