package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// armFeatureConfig is a bandit whose four arms are described by one
// numeric arm feature, "slant", and whose reward is u * slant (armReward):
// which arm is best depends on the context, and the arms' rewards are
// related through their features only.
func armFeatureConfig(kind bandit.PolicyKind) *bandit.Config {
	c := &bandit.Config{
		Name:        "catalogue",
		Arms:        []string{"lo", "midlo", "midhi", "hi"},
		Features:    []bandit.Feature{{Name: "u", Type: bandit.Numeric}},
		ArmFeatures: []bandit.Feature{{Name: "slant", Type: bandit.Numeric}},
		ArmValues: map[string]json.RawMessage{
			"lo": json.RawMessage(`{"slant": -1}`), "midlo": json.RawMessage(`{"slant": -0.5}`),
			"midhi": json.RawMessage(`{"slant": 0.5}`), "hi": json.RawMessage(`{"slant": 1}`),
		},
		Policy:     bandit.PolicyConfig{Kind: kind},
		Model:      bandit.ModelConfig{Hidden: []int{16}},
		Training:   bandit.TrainingConfig{Iterations: 300, IterationsPerReward: 300, CPUShare: 1, SnapshotEvery: 1, MinInterval: new(bandit.Duration)},
		Refinement: bandit.RefinementConfig{Iterations: 50, BankSize: 6},
	}
	return c
}

// armReward is the catalogue's reward: u * slant plus N(0, 0.1^2) noise.
func armReward(u, slant float64, rng *rand.Rand) float64 {
	return u*slant + 0.1*rng.NormFloat64()
}

// armSlant is the slant of the catalogue's arm named name.
func armSlant(t *testing.T, c bandit.Config, name string) float64 {
	t.Helper()
	var v struct{ Slant float64 }
	if err := json.Unmarshal(c.ArmValues[name], &v); err != nil {
		t.Fatal(err)
	}
	return v.Slant
}

// TestArmFeaturesLearnAndGeneralize: on the catalogue, where the best
// arm is "hi" when u = 1 and "lo" when u = -1, every kind with a model
// learns from 300 rewarded decisions (step mode, seeded) to
// play the context's best arm on most of the last 100 (a policy blind
// to the context plays it on at most about half); an arm added by PATCH
// with slant 0.9 is scored, before any reward of its own, near "hi"
// (slant 1) and far from "lo" (slant -1) at u = 1; a retired arm is
// never chosen again.
func TestArmFeaturesLearnAndGeneralize(t *testing.T) {
	for _, p := range []bandit.PolicyConfig{
		{Kind: bandit.RefinedTS}, {Kind: bandit.MeanFieldTS}, {Kind: bandit.EpsGreedy}, {Kind: bandit.Greedy},
		{Kind: bandit.LinearTS}, {Kind: bandit.LaplaceTS}, {Kind: bandit.LaplaceTS, Laplace: bandit.LaplaceLastLayer},
		{Kind: bandit.FlowTS}, {Kind: bandit.NeuralLinear},
	} {
		t.Run(strings.TrimSuffix(string(p.Kind)+" "+p.Laplace, " "), func(t *testing.T) {
			ctx := context.Background()
			svc := stepService(t, 3, 20)
			cfg := armFeatureConfig(p.Kind)
			cfg.Policy = p
			a, err := svc.Create(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			env := rand.New(rand.NewPCG(5, 6))
			best := 0
			const steps, last = 300, 100
			for i := range steps {
				u := float64(2*env.IntN(2) - 1)
				o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("e", i), Context: json.RawMessage(fmt.Sprintf(`{"u": %g}`, u))})
				if err != nil {
					t.Fatal(err)
				}
				name := a.Config().Arms[o.Decision.Arm]
				if i >= steps-last && name == map[bool]string{true: "hi", false: "lo"}[u > 0] {
					best++
				}
				if err := a.Reward(ctx, o.Decision.EventID, armReward(u, armSlant(t, a.Config(), name), env)); err != nil {
					t.Fatal(err)
				}
			}
			// Tolerance: 75 of 100. A context-blind policy's best is
			// one arm for both contexts, right on about 50.
			t.Logf("the context's best arm on %d of the last %d decisions", best, last)
			if best < 75 {
				t.Errorf("the context's best arm on %d of the last %d decisions, want at least 75", best, last)
			}

			b, effects, err := svc.Update(ctx, "catalogue", &bandit.Patch{AddArms: []string{"new"}, ArmValues: map[string]json.RawMessage{"new": json.RawMessage(`{"slant": 0.9}`)}})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(effects, "\n"), "on their features") {
				t.Errorf("effects %q do not say the new arm is scored on its features", effects)
			}
			// The mean score of each arm over 40 decisions at u = 1,
			// none rewarded: the new arm's are the network's on its
			// features.
			mean := make([]float64, 5)
			for i := range 40 {
				o, err := b.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("n", i), Context: json.RawMessage(`{"u": 1}`)})
				if err != nil {
					t.Fatal(err)
				}
				for k, s := range o.Decision.Scores {
					mean[k] += s / 40
				}
			}
			lo, hi, nw := mean[0], mean[3], mean[4]
			t.Logf("at u = 1 mean scores lo %.3f, hi %.3f, new (slant 0.9) %.3f", lo, hi, nw)
			// Tolerance: the rewards of hi and new differ by 0.1 and
			// those of lo and new by 1.9; the new arm's mean score must
			// be nearer hi's, within 0.4 of it.
			if math.Abs(nw-hi) > 0.4 || math.Abs(nw-hi) >= math.Abs(nw-lo) {
				t.Errorf("at u = 1 mean scores lo %.3f, hi %.3f, new (slant 0.9) %.3f: want new within 0.4 of hi and nearer hi than lo", lo, hi, nw)
			}

			c, _, err := svc.Update(ctx, "catalogue", &bandit.Patch{RetireArms: []string{"hi", "new"}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				o, err := c.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("r", i), Context: json.RawMessage(`{"u": 1}`)})
				if err != nil {
					t.Fatal(err)
				}
				if arm := c.Config().Arms[o.Decision.Arm]; arm == "hi" || arm == "new" {
					t.Fatalf("decision %d chose the retired arm %s", i, arm)
				}
				if p := o.Decision.Propensities; p[3] != 0 || p[4] != 0 {
					t.Fatalf("decision %d gives the retired arms probabilities %v", i, p[3:])
				}
			}
		})
	}
}

// TestArmFeaturesValidation: a configuration or patch with bad arm
// features is refused with the field named.
func TestArmFeaturesValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(c *bandit.Config)
		field string
	}{
		{"an arm without its features", func(c *bandit.Config) { delete(c.ArmValues, "hi") }, "arm_values.hi"},
		{"a feature of the wrong type", func(c *bandit.Config) { c.ArmValues["hi"] = json.RawMessage(`{"slant": "steep"}`) }, "arm_values.hi.slant"},
		{"an unknown arm feature", func(c *bandit.Config) { c.ArmValues["hi"] = json.RawMessage(`{"slant": 1, "colour": 2}`) }, "arm_values.hi.colour"},
		{"features of an arm the bandit lacks", func(c *bandit.Config) { c.ArmValues["ghost"] = json.RawMessage(`{"slant": 1}`) }, "arm_values.ghost"},
		{"arm values without arm features", func(c *bandit.Config) { c.ArmFeatures = nil }, "arm_values"},
		{"an arm feature without a type", func(c *bandit.Config) { c.ArmFeatures[0].Type = "" }, "arm_features[0].type"},
		{"an unknown retired arm", func(c *bandit.Config) { c.Retired = []string{"ghost"} }, "retired[0]"},
		{"every arm retired", func(c *bandit.Config) { c.Retired = slices.Clone(c.Arms) }, "retired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := armFeatureConfig(bandit.MeanFieldTS)
			tc.edit(c)
			bandit.SetDefaults(c)
			err := bandit.Validate(c)
			var ve *bandit.ValidationError
			if !errors.As(err, &ve) || !slices.ContainsFunc(ve.Errors, func(e bandit.FieldError) bool { return e.Field == tc.field }) {
				t.Errorf("Validate = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestArmFeaturesShadowRankReplay: on a bandit with arm features, a
// candidate of another kind is asked at every decision and ranking
// (each slot logs its choice), a ranking orders distinct live arms,
// and a decision whose arm was retired since replays as made.
func TestArmFeaturesShadowRankReplay(t *testing.T) {
	ctx := context.Background()
	svc := stepService(t, 4, 10)
	cfg := armFeatureConfig(bandit.MeanFieldTS)
	cfg.Shadow = &bandit.ShadowConfig{Policy: bandit.PolicyConfig{Kind: bandit.LinearTS}}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := rand.New(rand.NewPCG(8, 9))
	var first *bandit.Decision
	for i := range 40 {
		u := float64(2*env.IntN(2) - 1)
		o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("e", i), Context: json.RawMessage(fmt.Sprintf(`{"u": %g}`, u))})
		if err != nil {
			t.Fatal(err)
		}
		if o.Decision.ShadowPropensities == nil {
			t.Fatalf("decision %d has no shadow choice", i)
		}
		if first == nil {
			first = o.Decision
		}
		name := a.Config().Arms[o.Decision.Arm]
		if err := a.Reward(ctx, o.Decision.EventID, armReward(u, armSlant(t, a.Config(), name), env)); err != nil {
			t.Fatal(err)
		}
	}
	outs, err := a.Rank(ctx, bandit.RankRequest{Context: json.RawMessage(`{"u": 1}`), Slots: 3})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for j, o := range outs {
		if seen[o.Decision.Arm] || o.Decision.ShadowPropensities == nil {
			t.Errorf("slot %d: arm %d (seen before: %v), shadow probabilities %v", j, o.Decision.Arm, seen[o.Decision.Arm], o.Decision.ShadowPropensities)
		}
		seen[o.Decision.Arm] = true
	}
	b, _, err := svc.Update(ctx, "catalogue", &bandit.Patch{RetireArms: []string{a.Config().Arms[first.Arm]}})
	if err != nil {
		t.Fatal(err)
	}
	o, err := b.Decide(ctx, bandit.DecideRequest{EventID: first.EventID, Context: first.Context})
	if err != nil || o.Created || o.Decision.Arm != first.Arm {
		t.Errorf("replaying %s after its arm was retired: %+v, %v; want the stored decision", first.EventID, o, err)
	}
}

// TestArmFeaturesGrowInputs: adding values to a categorical context
// feature of a bandit with arm features grows the network's inputs
// between the context's and the arms' (the arms' inputs move up): the
// point estimate scores every arm on an earlier context exactly as
// before, to rounding, and takes contexts with the new value.
func TestArmFeaturesGrowInputs(t *testing.T) {
	ctx := context.Background()
	svc := stepService(t, 2, 20)
	cfg := armFeatureConfig(bandit.Greedy)
	cfg.Features = append(cfg.Features, bandit.Feature{Name: "site", Type: bandit.Categorical, Values: []string{"web", "app"}})
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := rand.New(rand.NewPCG(1, 1))
	for i := range 60 {
		u := float64(2*env.IntN(2) - 1)
		raw := json.RawMessage(fmt.Sprintf(`{"u": %g, "site": %q}`, u, []string{"web", "app"}[i%2]))
		o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("e", i), Context: raw})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Reward(ctx, o.Decision.EventID, armReward(u, armSlant(t, a.Config(), a.Config().Arms[o.Decision.Arm]), env)); err != nil {
			t.Fatal(err)
		}
	}
	probe := json.RawMessage(`{"u": 1, "site": "app"}`)
	before, err := a.Decide(ctx, bandit.DecideRequest{EventID: "p0", Context: probe})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := svc.Update(ctx, "catalogue", &bandit.Patch{AddValues: map[string][]string{"site": {"kiosk"}}})
	if err != nil {
		t.Fatal(err)
	}
	after, err := b.Decide(ctx, bandit.DecideRequest{EventID: "p1", Context: probe})
	if err != nil {
		t.Fatal(err)
	}
	// Tolerance: the fast engine predicts in float32.
	for k, s := range before.Decision.Scores {
		if d := math.Abs(after.Decision.Scores[k] - s); d > 1e-5 {
			t.Errorf("arm %d scored %g before adding a value, %g after", k, s, after.Decision.Scores[k])
		}
	}
	if _, err := b.Decide(ctx, bandit.DecideRequest{EventID: "p2", Context: json.RawMessage(`{"u": 1, "site": "kiosk"}`)}); err != nil {
		t.Errorf("a context with the new value: %v", err)
	}
}
