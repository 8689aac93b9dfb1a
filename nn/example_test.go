package nn_test

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/nn"
)

// A mean-field Gaussian posterior for a two-armed bandit network, trained by
// maximizing the expected log-likelihood with the local reparameterization
// trick (the KL term, which the posterior package adds, is left out here).
func ExampleNewLikelihood() {
	rng := rand.New(rand.NewPCG(1, 2))

	// Contexts of 4 binary features; arm 1 pays +5 when feature 0 is off
	// and -35 when it is on; arm 0 pays nothing.
	data := nn.NewData(4, 2)
	for range 256 {
		x := []float64{float64(rng.IntN(2)), float64(rng.IntN(2)), float64(rng.IntN(2)), 1}
		arm, y := rng.IntN(2), 0.0
		if arm == 1 {
			y = 5 - 40*x[0]
		}
		data.Append(x, arm, y)
	}

	arch := nn.NewArch(4, []int{16, 16}, 2)
	std := nn.FitStandardization(data.View()) // rewards to unit scale
	lik := nn.NewLikelihood(arch, data.View(), nn.Options{
		Estimator:       nn.LocalReparam,
		NoiseVar:        1,
		Standardization: std,
	})
	ev := lik.NewEvaluator(32)

	// theta = [mu | rho], sigma = softplus(rho).
	n := arch.NumParams()
	theta := make([]float64, 2*n)
	mu, rho := theta[:n], theta[n:]
	arch.InitHe(mu, rng)
	for j := range rho {
		rho[j] = -5
	}
	sigma := make([]float64, n)
	grad := make([]float64, 2*n)
	opt := nn.NewAdam(2*n, 1e-2)
	rows := make([]int, 32)
	for range 1000 {
		for i := range rows {
			rows[i] = rng.IntN(lik.NumRows())
		}
		for j, r := range rho {
			sigma[j] = math.Log1p(math.Exp(r))
		}
		ev.ExpectedLogLik(grad[:n], grad[n:], nil, mu, sigma, nil, rows, rng)
		for j := range grad {
			grad[j] = -grad[j] // descend the negative expected log-likelihood
		}
		for j, r := range rho {
			grad[n+j] /= 1 + math.Exp(-r) // d sigma / d rho = logistic(rho)
		}
		opt.Step(theta, grad)
	}

	pred := nn.NewPredictor(arch, 2)
	contexts := []float64{
		0, 1, 0, 1, // edible
		1, 1, 0, 1, // poisonous
	}
	r := pred.Predict(nil, mu, contexts, std)
	fmt.Printf("edible:    pass %.0f, eat %.0f\n", math.Abs(r[0]), r[1])
	fmt.Printf("poisonous: pass %.0f, eat %.0f\n", math.Abs(r[2]), r[3])
	// Output:
	// edible:    pass 0, eat 5
	// poisonous: pass 0, eat -35
}
