package bandit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// A fresh Thompson-sampling bandit explores (issue 18, finding 1): before
// any reward its posterior is the prior, which is symmetric in the arms,
// so on every context each arm is chosen with probability 1/3. Over 300
// decisions on random contexts of a 3-arm bandit with the default
// network, the mean reported propensity of each arm is within 0.03 of 1/3
// (each is a mean of 32-group estimates, standard error about 0.005), the
// frequency of each arm within 0.1 of 1/3 (standard error 0.027), and no
// decision reports a chosen-arm probability of 0.999 or more (before the
// fix, 97 of the first 100 did).
func TestFreshThompsonBanditExplores(t *testing.T) {
	for _, kind := range []bandit.PolicyKind{bandit.MeanFieldTS, bandit.RefinedTS} {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Seed: 3, Workers: 1, Logger: testLogger(t)})
			defer svc.Close(ctx)
			if err := svc.Load(ctx); err != nil {
				t.Fatal(err)
			}
			values := []string{"a", "c", "f", "l", "m", "n", "p", "s", "y"}
			a, err := svc.Create(ctx, &bandit.Config{
				Name: "fresh",
				Arms: []string{"eat", "pass", "ask"},
				Features: []bandit.Feature{
					{Name: "odor", Type: bandit.Categorical, Values: values},
					{Name: "weight", Type: bandit.Numeric},
				},
				Policy: bandit.PolicyConfig{Kind: kind},
			})
			if err != nil {
				t.Fatal(err)
			}
			const n = 300
			rng := rand.New(rand.NewPCG(1, 2))
			var freq, meanP [3]float64
			sure := 0
			for i := range n {
				raw, _ := json.Marshal(map[string]any{"odor": values[rng.IntN(len(values))], "weight": 3 * rng.NormFloat64()})
				o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("f", i), Context: raw})
				if err != nil {
					t.Fatal(err)
				}
				d := o.Decision
				if d.Sample != bandit.SampleMeanField || d.ModelVersion != 0 {
					t.Fatalf("decision %d acted on %s samples of version %d, want mean-field samples of version 0 (the prior)", i, d.Sample, d.ModelVersion)
				}
				freq[d.Arm] += 1.0 / n
				for k, p := range d.Propensities {
					meanP[k] += p / n
				}
				if d.Propensities[d.Arm] >= 0.999 {
					sure++
				}
			}
			t.Logf("%s: frequencies %.3f, mean propensities %.3f", kind, freq, meanP)
			for k := range 3 {
				if math.Abs(meanP[k]-1.0/3) > 0.03 {
					t.Errorf("mean propensity of arm %d = %.4f, want 1/3 ± 0.03", k, meanP[k])
				}
				if math.Abs(freq[k]-1.0/3) > 0.1 {
					t.Errorf("arm %d chosen in %.4f of decisions, want 1/3 ± 0.1", k, freq[k])
				}
			}
			if sure > 0 {
				t.Errorf("%d of %d decisions had a chosen-arm probability >= 0.999, want 0", sure, n)
			}
		})
	}
}

// Propensities have a resolution importance weighting can use (issue 18,
// finding 2): 60 mean-field TS decisions of a bandit that learns (step
// mode, trained every 5 rewards) report for every arm a probability in
// [MinPropensity, 1-MinPropensity]; the 5 decisions before the first
// training draw from the prior, whose conditional means are zero, so
// their probabilities are exactly 1/2; and after it (the output layer's
// noise integrated out) at most a few are multiples of 1/32, the steps
// of the 32-group vote count they replaced, other than the floor.
func TestThompsonPropensitiesAreFine(t *testing.T) {
	got := playStep(t, bandit.MeanFieldTS, 11, 60)
	steps, floored := 0, 0
	for i, d := range got {
		for k, p := range d.Propensities {
			if p < bandit.MinPropensity || p > 1-bandit.MinPropensity {
				t.Errorf("decision %d: propensity of arm %d = %g, want in [%g, %g]", i, k, p, bandit.MinPropensity, 1-bandit.MinPropensity)
			}
		}
		p := d.Propensities[d.Arm]
		if d.Version == 0 {
			if p != 0.5 {
				t.Errorf("decision %d on the prior: propensity %g, want 1/2", i, p)
			}
			continue
		}
		if p == 1-bandit.MinPropensity || p == bandit.MinPropensity {
			floored++
		} else if math.Abs(p*32-math.Round(p*32)) < 1e-9 {
			steps++
		}
	}
	t.Logf("%d of %d chosen-arm propensities at the floor", floored, len(got))
	if steps > 3 {
		t.Errorf("%d of %d chosen-arm propensities are multiples of 1/32", steps, len(got))
	}
	t.Logf("chosen-arm propensities: first %.6f, last %.6f", got[0].Propensities[got[0].Arm], got[len(got)-1].Propensities[got[len(got)-1].Arm])
}
