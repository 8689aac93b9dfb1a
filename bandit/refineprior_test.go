package bandit_test

import (
	"context"
	"math"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/posterior"
	"github.com/refinery-bandits/refinery/store"
)

// Under training.bound "collapsed-mean" refinement targets the posterior of
// the model the trainer fitted, whose prior with the learned means
// integrated out is N(0, s^2/alpha_reg) (posterior.Bound.MarginalPriorVar):
// refined-ts refines with those variances, while the published posterior
// (what snapshots persist and the trainer continues from) keeps s^2. Under
// "elbo" and "collapsed-mean-var" (whose marginal is not Gaussian)
// refinement keeps the fixed prior.
func TestRefinementTargetsTheTrainedModelsPrior(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		bound string
		reg   float64
		scale float64 // refinement prior variance / model.prior_variance
	}{
		{"collapsed-mean", 0, 1 / posterior.DefaultCollapsedReg},
		{"collapsed-mean", 0.5, 2},
		{"elbo", 0, 1},
		{"collapsed-mean-var", 0, 1},
	} {
		svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Seed: 1, Step: &bandit.StepConfig{TrainEvery: 5}})
		if err := svc.Load(ctx); err != nil {
			t.Fatal(err)
		}
		cfg := smallConfig(bandit.RefinedTS)
		cfg.Training.Bound, cfg.Training.CollapsedReg = c.bound, c.reg
		cfg.Model.PriorVariance = 0.8
		a, err := svc.Create(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		got, pub := a.RefinementPriorVar(), a.Posterior().PriorVar
		for j := range got {
			if math.Abs(got[j]-0.8*c.scale) > 1e-12 || pub[j] != 0.8 {
				t.Fatalf("%s (reg %g): parameter %d refines with prior variance %g and publishes %g; want %g and 0.8", c.bound, c.reg, j, got[j], pub[j], 0.8*c.scale)
			}
		}
		svc.Close(ctx)
	}
}
