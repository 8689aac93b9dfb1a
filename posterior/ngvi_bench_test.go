package posterior_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"testing"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
	"github.com/refinery-bandits/refinery/simulators"
)

// TestNGVIOnTheMushroomNetwork trains the paper's bandit network (117
// one-hot mushroom inputs, 2x100 ReLU, 2 outputs, N(0, 1) prior, learned
// noise; the bandit's initial posterior with sigma 0.01) on 400 mushroom
// rows with uniformly random arms, 3,000 iterations of Adam (lr 1e-3) and
// of natural-gradient VI at steps 0.1, DefaultNGVIStep (0.01) and 0.001,
// all batch 64 on the fast engine, and logs the full-data ELBO, its KL and the spread of the
// standard deviations of each. It runs only when NGVI_BENCH names the
// mushroom data directory, and fails only if a run fails or its ELBO is
// not finite: it measures, it does not judge.
func TestNGVIOnTheMushroomNetwork(t *testing.T) {
	dir := os.Getenv("NGVI_BENCH")
	if dir == "" {
		t.Skip("set NGVI_BENCH to the mushroom data directory")
	}
	env, err := simulators.ParseEnv("mushroom", dir)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 13))
	data := nn.NewData(env.NumFeatures(), 2)
	for range 400 {
		st := env.Next(rng)
		a := rng.IntN(2)
		data.Append(st.X, a, st.Realized[a])
	}
	view := data.View()
	arch := nn.NewArch(env.NumFeatures(), []int{100, 100}, 2)
	std := nn.FitStandardization(view)
	n := arch.NumParams()
	for _, c := range []posterior.TrainConfig{
		{}, {Optimizer: posterior.OptimizerNGVI, NGVIStep: 0.1},
		{Optimizer: posterior.OptimizerNGVI}, {Optimizer: posterior.OptimizerNGVI, NGVIStep: 0.001},
	} {
		o := c.Optimizer
		q := posterior.NewMeanField(n, 1, ones(n, 1), 0.01)
		arch.InitHe(q.Mu, rand.New(rand.NewPCG(2, 13)))
		q.Hyper[0] = 2 * math.Log(std.Scale)
		lik := nn.NewLikelihood(arch, view, nn.Options{LearnNoise: true, Standardization: std})
		tr, err := posterior.NewTrainer(lik, c)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(3, 13))
		before := tr.ELBO(q, 4, r)
		if _, err := tr.Run(context.Background(), q, 3000, r); err != nil {
			t.Fatalf("%s: %v", o, err)
		}
		elbo := tr.ELBO(q, 4, r)
		if math.IsNaN(elbo) || math.IsInf(elbo, 0) {
			t.Fatalf("%s: ELBO %g", o, elbo)
		}
		s := q.Sigma(nil)
		slices.Sort(s)
		name := o.String()
		if o == posterior.OptimizerNGVI {
			name += fmt.Sprintf(" (step %g)", tr.Config().NGVIStep)
		}
		t.Logf("%s: full-data ELBO %.6g -> %.6g after 3,000 iterations (KL %.6g); sigma 10%%/50%%/90%% %.3g/%.3g/%.3g; noise variance %.3g (standardized %.3g)",
			name, before, elbo, tr.Penalty(q), s[n/10], s[n/2], s[9*n/10], math.Exp(q.Hyper[0]), math.Exp(q.Hyper[0])/(std.Scale*std.Scale))
	}
}
