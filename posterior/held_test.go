package posterior

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// heldProblem is a 3-weight Bayesian linear regression with correlated
// features and an exact data term, for the tests of held parameters.
func heldProblem() (*linearGaussian, []float64) {
	rng := rand.New(rand.NewPCG(41, 43))
	lik := correlatedRegression(rng, 30, 3, 0.6, 0.5)
	lik.exact = true
	return lik, ones(3, 1)
}

// A parameter whose standard deviation is held small trains as a point
// estimate beside the others' posterior. On linear regression the
// mean-field optimum's means are the exact posterior mean and its
// variances the inverse diagonal of the posterior precision (Bishop 2006,
// Section 10.1.2); with weights 0 and 1 held at a tiny sigma, whose KL
// gradient in the mean is the negated log prior's, the ELBO in their
// means is the log posterior, so all three means must reach the exact
// posterior mean, weight 2's sigma its mean-field value, and the held
// rho must not move.
func TestHeldSigmaTrainsAPointEstimateBesideAPosterior(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		lik, prior := heldProblem()
		mean, prec := lik.exactPosterior(prior)
		q := NewMeanField(3, 0, prior, 0.3)
		q.SetSigma([]float64{1e-4, 1e-4, 0.3})
		rho0 := append([]float64(nil), q.Rho...)
		tr, err := NewTrainer(lik, TrainConfig{LR: 0.05, FinalLR: 1e-5, Reference: reference, HeldSigma: []int{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), q, 6000, rand.New(rand.NewPCG(1, 2))); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			if math.Abs(q.Mu[j]-mean[j]) > 1e-3 {
				t.Errorf("mu[%d] = %.5f, want the posterior mean %.5f", j, q.Mu[j], mean[j])
			}
		}
		for _, j := range []int{0, 1} {
			if math.Abs(q.Rho[j]-rho0[j]) > 1e-6*math.Abs(rho0[j]) {
				t.Errorf("held rho[%d] moved from %.8g to %.8g", j, rho0[j], q.Rho[j])
			}
		}
		sig := make([]float64, 3)
		q.Sigma(sig)
		if want := 1 / math.Sqrt(prec.At(2, 2)); math.Abs(sig[2]-want) > 1e-3*want {
			t.Errorf("sigma[2] = %.5f, want the mean-field optimum %.5f", sig[2], want)
		}
	})
}

// Held parameters stay exactly where they are, means and standard
// deviations, however the others move.
func TestHeldParametersDoNotMove(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		lik, prior := heldProblem()
		q := NewMeanField(3, 0, prior, 0.3)
		q.Mu[1] = 0.7
		mu0, rho0 := append([]float64(nil), q.Mu...), append([]float64(nil), q.Rho...)
		tr, err := NewTrainer(lik, TrainConfig{LR: 0.05, Reference: reference, Held: []int{1}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), q, 500, rand.New(rand.NewPCG(3, 4))); err != nil {
			t.Fatal(err)
		}
		if math.Abs(q.Mu[1]-mu0[1]) > 1e-7 || math.Abs(q.Rho[1]-rho0[1]) > 1e-6*math.Abs(rho0[1]) {
			t.Errorf("held parameter moved: mu %.8g -> %.8g, rho %.8g -> %.8g", mu0[1], q.Mu[1], rho0[1], q.Rho[1])
		}
		if q.Mu[0] == mu0[0] || q.Mu[2] == mu0[2] {
			t.Errorf("free means did not move: %v", q.Mu)
		}
	})
}

// A refined sample leaves held parameters at q0's means and refines the
// others given them. With one free weight the conditional posterior is a
// one-dimensional Gaussian, which the mean-field family holds exactly, so
// its refined samples are draws from the exact conditional posterior of
// Bayesian linear regression given the held weights: mean m2 - (Lambda_20
// (w0 - m0) + Lambda_21 (w1 - m1)) / Lambda_22 and variance 1/Lambda_22.
func TestRefinerLeavesHeldParametersAtTheirMeans(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		if testing.Short() {
			t.Skip("statistical test with 2,000 refined samples")
		}
		lik, prior := heldProblem()
		mean, prec := lik.exactPosterior(prior)
		q0 := NewMeanField(3, 0, prior, 0.3)
		// Held weights away from the posterior mean, so that the
		// conditional mean differs from the marginal one.
		q0.Mu[0], q0.Mu[1] = mean[0]+0.3, mean[1]-0.2
		q0.SetSigma([]float64{1e-4, 1e-4, 0.3})
		tr, err := NewTrainer(lik, TrainConfig{LR: 0.05, FinalLR: 1e-5, Reference: reference, Held: []int{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 6))
		if _, err := tr.Run(context.Background(), q0, 4000, rng); err != nil {
			t.Fatal(err)
		}
		ref, err := NewRefiner(lik, RefineConfig{K: 3, Ratio: 0.6, Iterations: 300, LR: 0.05, Reference: reference, Held: []int{0, 1}})
		if err != nil {
			t.Fatal(err)
		}
		condMean := mean[2] - (prec.At(2, 0)*(q0.Mu[0]-mean[0])+prec.At(2, 1)*(q0.Mu[1]-mean[1]))/prec.At(2, 2)
		condVar := 1 / prec.At(2, 2)
		const n = 2000
		var s, ss float64
		w := make([]float64, 3)
		for range n {
			if _, _, err := ref.Refine(context.Background(), w, q0, rng); err != nil {
				t.Fatal(err)
			}
			if w[0] != q0.Mu[0] || w[1] != q0.Mu[1] {
				t.Fatalf("held weights refined to %.8g, %.8g, want q0's means %.8g, %.8g", w[0], w[1], q0.Mu[0], q0.Mu[1])
			}
			s += w[2]
			ss += w[2] * w[2]
		}
		m, v := s/n, ss/n-(s/n)*(s/n)
		t.Logf("free weight: refined mean %.4f variance %.5f; exact conditional %.4f, %.5f", m, v, condMean, condVar)
		if se := math.Sqrt(condVar / n); math.Abs(m-condMean) > 4*se {
			t.Errorf("refined mean %.4f, want the conditional posterior's %.4f (4 s.e. %.4f)", m, condMean, 4*se)
		}
		// The variance of n normal draws has relative s.e. sqrt(2/n) = 3.2%.
		if math.Abs(v/condVar-1) > 0.13 {
			t.Errorf("refined variance %.5f, want the conditional posterior's %.5f", v, condVar)
		}
	})
}

func TestHeldIndicesAreChecked(t *testing.T) {
	lik, _ := heldProblem()
	for _, cfg := range []TrainConfig{
		{HeldSigma: []int{3}},
		{Held: []int{-1}},
		{HeldSigma: []int{1, 1}},
		{Point: true, HeldSigma: []int{0}},
	} {
		if _, err := NewTrainer(lik, cfg); err == nil {
			t.Errorf("NewTrainer(%+v) accepted bad held parameters", cfg)
		}
	}
	if _, err := NewRefiner(lik, RefineConfig{Held: []int{5}}); err == nil {
		t.Error("NewRefiner accepted a held index out of range")
	}
}

// Holding parameters adds no allocation to an iteration, on either engine.
func TestHeldStepAllocatesNothing(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		lik, prior := heldProblem()
		q := NewMeanField(3, 0, prior, 0.3)
		tr, err := NewTrainer(lik, TrainConfig{Reference: reference, HeldSigma: []int{0}, Held: []int{1}})
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		if a := testing.AllocsPerRun(50, func() { tr.Step(q, rng) }); a != 0 {
			t.Errorf("a Step with held parameters allocates %v times, want 0", a)
		}
	})
}
