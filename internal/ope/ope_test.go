package ope

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
)

// threeArms is a bandit with three arms and one categorical feature.
func threeArms(t *testing.T) *bandit.Config {
	t.Helper()
	cfg, err := bandit.ParseConfig([]byte(`{"name": "b", "arms": ["a", "b", "c"],
		"features": [{"name": "f", "type": "categorical", "values": ["x", "y"]}], "policy": {"kind": "eps-greedy"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// records is an Exporter over a slice, which checks the range it is
// asked for.
type records struct {
	t        *testing.T
	from, to time.Time
	recs     []*bandit.DecisionRecord
}

func (r records) Export(ctx context.Context, name string, from, to time.Time, fn func(*bandit.DecisionRecord) error) error {
	if name != "b" || !from.Equal(r.from) || !to.Equal(r.to) {
		r.t.Errorf("Export(%q, %v, %v), want b, %v, %v", name, from, to, r.from, r.to)
	}
	for _, rec := range r.recs {
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

func record(id, ctx string, encoded []float64, arm int, props []float64, policy string, reward *float64) *bandit.DecisionRecord {
	rec := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: id, Context: json.RawMessage(ctx), Encoded: encoded,
		Arm: arm, Propensities: props, Policy: policy}}
	if reward != nil {
		rec.Reward = &bandit.Reward{EventID: id, Value: *reward}
	}
	return rec
}

// TestReadStoreMakesRowsOfRewardedDecisions: ReadStore asks the store
// for the range it is given, skips and counts the decisions without a
// reward, counts the rows by policy, encodes a context stored without
// its encoding (or with fewer inputs than the bandit's features have
// now), and pads the propensities of a decision made before arms were
// added with zeros, remembering how many arms it had.
func TestReadStoreMakesRowsOfRewardedDecisions(t *testing.T) {
	cfg := threeArms(t)
	one, two := 1.0, 2.0
	from, to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	st := records{t: t, from: from, to: to, recs: []*bandit.DecisionRecord{
		record("grown", `{"f":"y"}`, []float64{0}, 1, []float64{0.4, 0.6}, "eps-greedy", &one),
		record("unrewarded", `{"f":"x"}`, []float64{1, 0}, 0, []float64{0.5, 0.25, 0.25}, "eps-greedy", nil),
		record("fresh", `{"f":"x"}`, nil, 2, []float64{0.1, 0.1, 0.8}, "greedy", &two),
	}}
	l, err := ReadStore(context.Background(), st, cfg, "b", from, to)
	if err != nil {
		t.Fatal(err)
	}
	if l.Source != "bandit b" || l.Skipped != 1 || len(l.Rows) != 2 || l.Policies["eps-greedy"] != 1 || l.Policies["greedy"] != 1 {
		t.Fatalf("ReadStore = source %q, %d skipped, %d rows, policies %v; want bandit b, 1, 2, one each of eps-greedy and greedy", l.Source, l.Skipped, len(l.Rows), l.Policies)
	}
	g, f := l.Rows[0], l.Rows[1]
	if !slices.Equal(g.X, []float64{0, 1}) || !slices.Equal(g.Propensities, []float64{0.4, 0.6, 0}) || g.LoggedArms != 2 || g.Mu != 0.6 || g.Reward != 1 {
		t.Errorf("the grown bandit's row is %+v, want x [0 1], propensities [0.4 0.6 0], 2 logged arms, mu 0.6, reward 1", g)
	}
	if !slices.Equal(f.X, []float64{1, 0}) || f.LoggedArms != 0 || f.Mu != 0.8 || f.Reward != 2 {
		t.Errorf("the fresh row is %+v, want x [1 0], 0 logged arms (all), mu 0.8, reward 2", f)
	}
}

// TestReadStoreRefusesAnUndefinedWeight: a logged propensity of 0 for
// the chosen arm is an error naming the decision, not a row.
func TestReadStoreRefusesAnUndefinedWeight(t *testing.T) {
	one := 1.0
	st := records{t: t, recs: []*bandit.DecisionRecord{record("zero", `{"f":"x"}`, []float64{1, 0}, 0, []float64{0, 0.5, 0.5}, "", &one)}}
	_, err := ReadStore(context.Background(), st, threeArms(t), "b", time.Time{}, time.Time{})
	if err == nil || !strings.Contains(err.Error(), "decision zero: logged propensity 0 of its arm") {
		t.Errorf("ReadStore of a propensity 0: %v, want an error naming decision zero", err)
	}
}

// TestCandidatesTakeSimulatesPolicySpecs: refinery evaluate --candidates
// and refinery simulate --policies accept and refuse the same KIND:ARG
// strings (one grammar, bandit.ParsePolicySpec; they once disagreed on
// the epsilon range, (0,1] against [0,1]), but for refined-ts:supply,
// which a candidate refuses on purpose (it keeps its first bank).
func TestCandidatesTakeSimulatesPolicySpecs(t *testing.T) {
	base := threeArms(t)
	preset := simulators.Presets()["paper"]
	specs := []string{"eps-greedy:0", "eps-greedy:1", "eps-greedy:0.05", "eps-greedy:1e-3", "eps-greedy:1.5", "eps-greedy:-0.1",
		"eps-greedy:x", "eps-greedy:", "eps-greedy:NaN", "greedy:0.1", "laplace-ts:last-layer", "laplace-ts:diagonal", "laplace-ts:full",
		"flow-ts:last-layer", "mf-ts:3", "refined-ts:bank", "oracle", "uniform", "linear-ts", "neural-linear"}
	for _, k := range bandit.PolicyKinds() {
		specs = append(specs, string(k))
	}
	for _, s := range specs {
		_, errEval := Candidates(base, s, nil)
		_, errSim := simulators.ParsePolicies(s, preset)
		if (errEval == nil) != (errSim == nil) {
			t.Errorf("%q: evaluate --candidates says %v, simulate --policies %v; want both to accept or both to refuse", s, errEval, errSim)
		}
	}
	if _, err := Candidates(base, "refined-ts:supply", nil); err == nil {
		t.Error("evaluate --candidates took refined-ts:supply, want it refused (a candidate keeps its first bank)")
	}
}
