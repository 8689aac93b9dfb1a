package bandit

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// A noise linear in the context (model.noise "context") survives a
// network that grows (new inputs, new arms): on a context of the old
// network and its image in the new one, every old arm's noise variance is
// the same; a new arm's is the old arms' mean intercept, whatever the
// context's new inputs.
func TestGrowContextHyper(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	a := nn.NewArch(3, []int{4}, 2)
	b := nn.NewArch(5, []int{4}, 3)
	inputs := []int{0, 2, 3} // old input i is new input inputs[i]
	old := make([]float64, a.Out()*(a.In()+1))
	for k := range old {
		old[k] = rng.NormFloat64()
	}
	pv := make([]float64, a.NumParams())
	for j := range pv {
		pv[j] = 1
	}
	q := posterior.NewMeanField(a.NumParams(), len(old), pv, 1)
	g := growContextHyper(q, old, a, b, inputs)
	if len(g.Hyper) != b.Out()*(b.In()+1) {
		t.Fatalf("%d hyperparameters, want %d", len(g.Hyper), b.Out()*(b.In()+1))
	}
	la := nn.NewLikelihood(a, nn.NewData(a.In(), a.Out()).View(), nn.Options{LearnNoise: true, NoiseContext: true})
	lb := nn.NewLikelihood(b, nn.NewData(b.In(), b.Out()).View(), nn.Options{LearnNoise: true, NoiseContext: true})
	for range 5 {
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()}
		xb := make([]float64, b.In())
		for i, j := range inputs {
			xb[j] = x[i]
		}
		for arm := range a.Out() {
			want, got := la.ContextNoiseVar(arm, x, old), lb.ContextNoiseVar(arm, xb, g.Hyper)
			if math.Abs(got-want) > 1e-12*want {
				t.Errorf("arm %d: noise variance %g after growing, %g before", arm, got, want)
			}
		}
		xb[1], xb[4] = 7, -3 // the new inputs do not move a new arm's noise
		if got, want := lb.ContextNoiseVar(2, xb, g.Hyper), math.Exp((old[0]+old[4])/2); math.Abs(got-want) > 1e-12*want {
			t.Errorf("new arm: noise variance %g, want the mean intercept's %g", got, want)
		}
	}
}
