package posterior_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// banditData returns n rows shaped like the one-hot mushroom bandit: 22
// categorical attributes (15 with 5 values, 7 with 6: 117 one-hot
// features), 2 arms, rewards +5 / -35 / 0 from a fixed random rule.
func banditData(n int, rng *rand.Rand) nn.View {
	const dim = 117
	d := nn.NewData(dim, 2)
	x := make([]float64, dim)
	for range n {
		clear(x)
		off := 0
		for a := range 22 {
			k := 5
			if a >= 15 {
				k = 6
			}
			x[off+rng.IntN(k)] = 1
			off += k
		}
		arm := rng.IntN(2)
		y := 0.0
		if arm == 0 {
			y = 5
			if x[0] == 1 && rng.IntN(2) == 0 {
				y = -35
			}
		}
		d.Append(x, arm, y)
	}
	return d.View()
}

// paperModel is the network of Havasi et al. (2021) Section 4.3 on 2,000
// rows: 117 inputs, two hidden layers of 100 ReLU units, 2 outputs, a
// standard normal prior, learned noise.
func paperModel(est nn.Estimator) (*nn.Likelihood, *posterior.MeanField) {
	rng := rand.New(rand.NewPCG(1, 2))
	arch := nn.NewArch(117, []int{100, 100}, 2)
	view := banditData(2000, rng)
	lik := nn.NewLikelihood(arch, view, nn.Options{Estimator: est, LearnNoise: true, Standardization: nn.FitStandardization(view)})
	prior := make([]float64, arch.NumParams())
	for i := range prior {
		prior[i] = 1
	}
	q := posterior.NewMeanField(arch.NumParams(), 1, prior, 0.01)
	arch.InitHe(q.Mu, rng)
	return lik, q
}

// BenchmarkTrainerStep is one ELBO iteration of the trainer (minibatch of
// 64, forward, backward, KL gradient, Adam) on the paper's bandit network.
func BenchmarkTrainerStep(b *testing.B) {
	for _, est := range []nn.Estimator{nn.LocalReparam, nn.WeightReparam, nn.Deterministic} {
		b.Run(est.String(), func(b *testing.B) {
			lik, q := paperModel(est)
			tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{})
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(3, 4))
			b.ReportAllocs()
			for b.Loop() {
				tr.Step(q, rng)
			}
		})
	}
}

// BenchmarkRefine is one refined sample of the paper's bandit network
// (Havasi et al. 2021, Section 4.3: K = 2, fractions 0.7 / 0.3, 500
// conditional iterations, batch 64) from a mean-field posterior trained
// for 500 iterations on 2,000 rows.
//
//	go test -run '^$' -bench BenchmarkRefine -benchtime 10x ./posterior/
func BenchmarkRefine(b *testing.B) {
	lik, q := paperModel(nn.LocalReparam)
	tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	if _, err := tr.Run(context.Background(), q, 500, rng); err != nil {
		b.Fatal(err)
	}
	ref, err := posterior.NewRefiner(lik, posterior.RefineConfig{Fractions: []float64{0.7, 0.3}, Iterations: 500})
	if err != nil {
		b.Fatal(err)
	}
	w := make([]float64, lik.NumParams())
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ref.Refine(context.Background(), w, q, rng); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sample")
}
