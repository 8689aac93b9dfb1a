package bandit_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// Refinement targets the posterior of the model the trainer fitted: under
// the ELBO that is q's own prior N(0, s^2); under a collapsed bound
// (Tomczak et al. 2021) it is the ELBO under the prior the bound learned
// given q, an empirical-Bayes prior: mean (1 - alpha_reg) mu and variance
// s^2 for "collapsed-mean" (Eq. 9), the learned mean and 1/E[tau] for
// "collapsed-mean-var" (Eq. 10). The published posterior (what snapshots
// persist and the trainer continues from) keeps the fixed prior.
func TestRefinementTargetsTheTrainedModelsPrior(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		bound string
		reg   float64
	}{
		{"collapsed-mean", 0},
		{"collapsed-mean", 0.5},
		{"elbo", 0},
		{"collapsed-mean-var", 0},
	} {
		t.Run(fmt.Sprintf("%s reg %g", c.bound, c.reg), func(t *testing.T) {
			cfg := smallConfig(bandit.RefinedTS)
			cfg.Training.Bound, cfg.Training.CollapsedReg = bandit.Bound(c.bound), c.reg
			cfg.Model.PriorVariance = 0.8
			a := stepAgent(t, 1, 5, cfg)
			trainToy(ctx, t, a, 10)
			pub := a.Posterior()
			if pub.Version == 0 {
				t.Fatal("no training")
			}
			mean, vari := a.RefinementPrior()
			reg := c.reg
			if reg == 0 {
				reg = bandit.DefaultCollapsedReg
			}
			for j := range mean {
				wantM, wantV := 0.0, pub.PriorVar[j]
				switch c.bound {
				case "collapsed-mean":
					wantM = (1 - reg) * pub.Mu[j]
				case "collapsed-mean-var":
					wantM = (1 - reg) * pub.Mu[j] // Eq. 10's mean, as Eq. 9's
					if !(vari[j] > 0) || vari[j] == pub.PriorVar[j] {
						t.Fatalf("parameter %d: learned prior variance %g, want a positive one other than the fixed %g", j, vari[j], pub.PriorVar[j])
					}
					wantV = vari[j]
				}
				if math.Abs(mean[j]-wantM) > 1e-9*(1+math.Abs(wantM)) || math.Abs(vari[j]-wantV) > 1e-12*wantV {
					t.Fatalf("parameter %d refines under N(%g, %g), want N(%g, %g)", j, mean[j], vari[j], wantM, wantV)
				}
			}
		})
	}
}
