package bandit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/refinery-bandits/refinery/bandit"
)

// For every policy kind, DefaultConfig with a name, arms and features is
// a valid configuration, and SetDefaults fills in exactly its settings
// around the ones given: a setting given (a zero where zero is a value:
// model.hidden [], training.stop_tolerance 0 given as a pointer) is kept,
// an object given (model.noise_prior) is kept whole, and the others are
// DefaultConfig's.
func TestDefaultConfigIsWhatSetDefaultsFillsIn(t *testing.T) {
	for _, k := range PolicyKinds() {
		t.Run(string(k), func(t *testing.T) {
			def := DefaultConfig(k)
			def.Name, def.Arms = "d", []string{"a", "b"}
			def.Features = []Feature{{Name: "color", Type: Categorical, Values: []string{"red", "blue"}}}
			if err := Validate(&def); err != nil {
				t.Fatalf("DefaultConfig(%s) is not valid: %v", k, err)
			}
			var c Config
			given := `{"name": "d", "arms": ["a", "b"], "features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}],
				"policy": {"kind": "` + string(k) + `", "propensity_samples": 7}, "model": {"hidden": [], "noise_prior": {"shape": 3}},
				"training": {"iterations": 9, "stop_tolerance": 0.5}}`
			if err := json.Unmarshal([]byte(given), &c); err != nil {
				t.Fatal(err)
			}
			SetDefaults(&c)
			want := def
			want.Policy.PropensitySamples = 7
			want.Model.Hidden = []int{}
			want.Model.NoisePrior = &NoisePrior{Shape: 3}
			want.Training.Iterations = 9
			*want.Training.StopTolerance = 0.5
			got, _ := json.Marshal(c)
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Errorf("SetDefaults(%s) =\n%s\nwant\n%s", given, got, wantJSON)
			}
		})
	}
}

// DefaultConfig returns new slices and pointers: changing one result
// leaves the next alone.
func TestDefaultConfigSharesNothing(t *testing.T) {
	a := DefaultConfig(RefinedTS)
	a.Model.Hidden[0] = 1
	a.Refinement.Fractions[0] = 0
	*a.Policy.MaxSampleAge = 0
	*a.Reward.Wait = 0
	b := DefaultConfig(RefinedTS)
	if b.Model.Hidden[0] != DefaultThompsonHidden[0] || b.Refinement.Fractions[0] != DefaultFractions[0] || *b.Policy.MaxSampleAge == 0 || *b.Reward.Wait == 0 {
		t.Errorf("a change to one DefaultConfig showed in the next: %+v", b)
	}
}

// The table of settings in docs/api.md states DefaultConfig's defaults:
// each row's default column is printed here from DefaultConfig and must
// read as the docs do (a changed default fails until the docs follow).
func TestDocsStateTheDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{} // a row's first column: its last
	for line := range strings.SplitSeq(string(doc), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " | ")
		got[first] = strings.TrimSuffix(line[strings.LastIndex(line, " | ")+3:], " |")
	}
	dur := func(d *Duration) string { // "10m", as the docs write 10m0s
		s := time.Duration(*d).String()
		if strings.HasSuffix(s, "m0s") || strings.HasSuffix(s, "h0m") {
			s = s[:len(s)-2]
		}
		return "`\"" + s + "\"`"
	}
	ts, mf, eps := DefaultConfig(""), DefaultConfig(LaplaceTS), DefaultConfig(EpsGreedy)
	p, m, tr, r := ts.Policy, ts.Model, ts.Training, ts.Refinement
	for row, want := range map[string]string{
		"`policy.kind`":                   "`" + string(p.Kind) + "`",
		"`policy.samples`":                fmt.Sprintf("%d for refined-ts and mf-ts, %d for the other Thompson kinds", p.Samples, mf.Policy.Samples),
		"`policy.propensity_samples`":     fmt.Sprint(p.PropensitySamples),
		"`policy.epsilon`":                fmt.Sprint(*eps.Policy.Epsilon),
		"`policy.laplace`, `policy.flow`": "`" + mf.Policy.Laplace + "`; `go doc ./bandit/spec FlowConfig`",
		"`policy.max_sample_uses`, `max_sample_age`, `max_versions_behind`": fmt.Sprintf("%d, %s, %d", p.MaxSampleUses, dur(p.MaxSampleAge), *p.MaxVersionsBehind),
		"`model.hidden`": fmt.Sprintf("`%v` for refined-ts and mf-ts, `%v` for the other neural kinds", jsonOf(t, m.Hidden), jsonOf(t, mf.Model.Hidden)),
		"`model.likelihood`, `prior`, `prior_variance`, `init_sigma`, `noise`, `noise_prior`": fmt.Sprintf("`%s`, `%s`, %g, %g, `%s` for refined-ts and mf-ts (`%s` for the others), shape %g rate %g",
			m.Likelihood, m.Prior, m.PriorVariance, m.InitSigma, m.Noise, eps.Model.Noise, m.NoisePrior.Shape, m.NoisePrior.Rate),
		"`model.skip`":       fmt.Sprint(*m.Skip),
		"`model.stochastic`": "`" + m.Stochastic + "`",
		"`training.iterations`, `iterations_per_reward`, `stop_tolerance`, `cpu_share`, `min_interval`, `snapshot_every`": fmt.Sprintf("%d, %d, %g, %g, %s, %d",
			tr.Iterations, tr.IterationsPerReward, *tr.StopTolerance, tr.CPUShare, dur(tr.MinInterval), tr.SnapshotEvery),
		"`training.batch_size`, `lr`, `sigma_lr`": fmt.Sprintf("%d, %g, %g", tr.BatchSize, tr.LR, tr.SigmaLR),
		"`training.estimator`, `bound`, `optimizer` (with `ris_samples`, `collapsed_reg`, `collapsed_shape`, `ngvi_step`)": fmt.Sprintf("`%s`, `%s`, `%s`", tr.Estimator, tr.Bound, tr.Optimizer),
		"`refinement.fractions`, `iterations`, `lr`, `batch_size`, `bank_size`":                                            fmt.Sprintf("`%s`, %d, %g, %d, %d", jsonOf(t, r.Fractions), r.Iterations, r.LR, r.BatchSize, r.BankSize),
		"`reward.wait`": dur(ts.Reward.Wait),
	} {
		if got[row] != want {
			t.Errorf("docs/api.md, the default of %s = %q, DefaultConfig's is %q", row, got[row], want)
		}
	}
}

// jsonOf is v in JSON with a space after each comma, as the docs write
// arrays.
func jsonOf(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), ",", ", ")
}
