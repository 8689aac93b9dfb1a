package posterior_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

func ones(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// TestNoHiddenLayerIsBayesianLinearRegression: an nn network without
// hidden layers is Bayesian linear regression, y = w.x + b + e with
// e ~ N(0, s2) known. The optimal mean-field posterior has the exact
// posterior mean and the variances 1/diag(Lambda) of the exact precision
// Lambda = I/prior + [X 1]^T [X 1] / s2 (Bishop 2006, Eqs. 3.50-3.51 and
// Section 10.1.2). The trainer, with the stochastic local
// reparameterization estimator of the real network code, must find both:
// means within 10% of the posterior standard deviation, variances within
// 10%; so must natural-gradient VI, in a tenth of Adam's iterations. The features are correlated (pairwise 0.8), which makes the
// diagonal of Lambda differ from the inverse diagonal of its inverse.
func TestNoHiddenLayerIsBayesianLinearRegression(t *testing.T) {
	posterior.ForEngines(t, testNoHiddenLayerIsBayesianLinearRegression)
}

func testNoHiddenLayerIsBayesianLinearRegression(t *testing.T, reference bool) {
	const d, n, noise = 3, 50, 0.25
	rng := rand.New(rand.NewPCG(1, 1))
	arch := nn.NewArch(d, nil, 1)
	data := nn.NewData(d, 1)
	wTrue := []float64{1, -0.5, 0.8}
	design := mat.NewDense(n, d+1, nil)
	y := make([]float64, n)
	for i := range n {
		c := rng.NormFloat64()
		x := make([]float64, d)
		f := 0.3
		for j := range x {
			x[j] = math.Sqrt(0.2)*rng.NormFloat64() + math.Sqrt(0.8)*c
			f += wTrue[j] * x[j]
			design.Set(i, j, x[j])
		}
		design.Set(i, d, 1)
		y[i] = f + math.Sqrt(noise)*rng.NormFloat64()
		data.Append(x, 0, y[i])
	}
	// Exact posterior over [w | b] with prior N(0, I).
	var prec mat.SymDense
	prec.SymOuterK(1/noise, design.T())
	for j := range d + 1 {
		prec.SetSym(j, j, prec.At(j, j)+1)
	}
	var xty mat.VecDense
	xty.MulVec(design.T(), mat.NewVecDense(n, y))
	xty.ScaleVec(1/noise, &xty)
	var ch mat.Cholesky
	if !ch.Factorize(&prec) {
		t.Fatal("precision not positive definite")
	}
	var mean mat.VecDense
	if err := ch.SolveVecTo(&mean, &xty); err != nil {
		t.Fatal(err)
	}

	// Adam, and natural-gradient VI with its step decayed from 0.1 to
	// 1e-3 (NGVIStep scaled by LR's decay), in a tenth of the iterations.
	// (At steps of 0.3 and more its noisy curvature estimates make it
	// diverge here: the mean's step is a Jacobi iteration preconditioned
	// by the diagonal precision, unstable on these correlated features
	// while the precision is underestimated.)
	for _, c := range []struct {
		cfg   posterior.TrainConfig
		iters int
	}{
		{posterior.TrainConfig{LR: 0.02, FinalLR: 1e-5}, 30000},
		{posterior.TrainConfig{Optimizer: posterior.OptimizerNGVI, NGVIStep: 0.1, LR: 1, FinalLR: 1e-2}, 3000},
	} {
		lik := nn.NewLikelihood(arch, data.View(), nn.Options{Estimator: nn.LocalReparam, NoiseVar: noise})
		q := posterior.NewMeanField(arch.NumParams(), 0, ones(arch.NumParams(), 1), 0.1)
		c.cfg.Reference = reference
		tr, err := posterior.NewTrainer(lik, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), q, c.iters, rng); err != nil {
			t.Fatal(err)
		}
		sig := q.Sigma(nil)
		// nn's layout is the weights (row-major) then the bias, the same
		// order as the design's columns.
		for j := range d + 1 {
			wantVar := 1 / prec.At(j, j)
			if diff := math.Abs(q.Mu[j] - mean.AtVec(j)); diff > 0.1*math.Sqrt(wantVar) {
				t.Errorf("%s: mean[%d] = %.5f, exact %.5f (posterior sd %.4f)", c.cfg.Optimizer, j, q.Mu[j], mean.AtVec(j), math.Sqrt(wantVar))
			}
			if rel := math.Abs(sig[j]*sig[j]-wantVar) / wantVar; rel > 0.1 {
				t.Errorf("%s: var[%d] = %.6f, exact 1/Lambda_jj = %.6f (rel err %.3f)", c.cfg.Optimizer, j, sig[j]*sig[j], wantVar, rel)
			}
		}
	}
}

// sineData draws n points of y = sin(3x) + 0.3 e, x ~ U(-2, 2).
func sineData(n int, rng *rand.Rand) (*nn.Data, [][]float64, []float64) {
	data := nn.NewData(1, 1)
	var xs [][]float64
	var ys []float64
	for range n {
		x := []float64{4*rng.Float64() - 2}
		y := math.Sin(3*x[0]) + 0.3*rng.NormFloat64()
		data.Append(x, 0, y)
		xs = append(xs, x)
		ys = append(ys, y)
	}
	return data, xs, ys
}

// trainSine fits a mean-field BNN with two hidden layers of 32 units and a
// learned noise variance to 300 sine points.
func trainSine(t *testing.T, seed uint64, reference bool) (*nn.Likelihood, *posterior.MeanField, *posterior.Trainer, posterior.RunStats, float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	data, _, _ := sineData(300, rng)
	arch := nn.NewArch(1, []int{32, 32}, 1)
	lik := nn.NewLikelihood(arch, data.View(), nn.Options{LearnNoise: true, Standardization: nn.FitStandardization(data.View())})
	q := posterior.NewMeanField(arch.NumParams(), 1, ones(arch.NumParams(), 1), 0.01)
	arch.InitHe(q.Mu, rng)
	tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{LR: 0.01, FinalLR: 5e-4, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	before := tr.ELBO(q, 20, rng)
	st, err := tr.Run(context.Background(), q, 6000, rng)
	if err != nil {
		t.Fatal(err)
	}
	return lik, q, tr, st, before
}

// TestELBORisesAndPredictionsAreCalibrated trains a small BNN on a sine
// regression task: the full-data ELBO estimate must rise over training,
// and the 90% predictive interval (5% and 95% quantiles of 400 draws of
// f(x; w) + e, w ~ q, e ~ N(0, s2)) must hold between 85% and 95% of 1,000
// held-out targets.
func TestELBORisesAndPredictionsAreCalibrated(t *testing.T) {
	posterior.ForEngines(t, testELBORisesAndPredictionsAreCalibrated)
}

func testELBORisesAndPredictionsAreCalibrated(t *testing.T, reference bool) {
	lik, q, tr, st, before := trainSine(t, 1, reference)
	rng := rand.New(rand.NewPCG(99, 99))
	after := tr.ELBO(q, 20, rng)
	t.Logf("ELBO %.1f before training, %.1f after (minibatch estimates %.1f -> %.1f)", before, after, st.FirstELBO, st.MeanELBO)
	if !(after > before+100) {
		t.Errorf("ELBO went from %.1f to %.1f, want it to rise", before, after)
	}
	_, xs, ys := sineData(1000, rng)
	pred := nn.NewPredictor(lik.Arch(), 1)
	sig := q.Sigma(nil)
	std := lik.Options().Standardization
	noiseSD := math.Sqrt(lik.NoiseVar(q.Hyper))
	const draws = 400
	inside := 0
	out := make([]float64, 1)
	samples := make([]float64, draws)
	for i, x := range xs {
		for k := range samples {
			pred.Sample(out, q.Mu, sig, x, std, rng)
			samples[k] = out[0] + noiseSD*rng.NormFloat64()
		}
		sort.Float64s(samples)
		lo, hi := samples[draws*5/100], samples[draws*95/100]
		if ys[i] >= lo && ys[i] <= hi {
			inside++
		}
	}
	cover := float64(inside) / float64(len(xs))
	t.Logf("90%% predictive interval covers %.3f of held-out targets (noise sd %.3f, true 0.3)", cover, noiseSD)
	if cover < 0.85 || cover > 0.95 {
		t.Errorf("coverage %.3f, want within [0.85, 0.95]", cover)
	}
}

// TestRefinementImprovesTheELBO is Proposition 1 of Havasi et al. (2021)
// in practice: on the sine BNN, the mean over 20 seeds of the
// single-sample ELBO_aux (Eq. 13) must be at least ELBO_init, the ELBO
// of the mean-field posterior refinement starts from (estimated with 200
// draws). Both are reported with standard errors.
func TestRefinementImprovesTheELBO(t *testing.T) {
	posterior.ForEngines(t, testRefinementImprovesTheELBO)
}

func testRefinementImprovesTheELBO(t *testing.T, reference bool) {
	if testing.Short() {
		t.Skip("20 refined samples of a BNN")
	}
	lik, q, tr, _, _ := trainSine(t, 2, reference)
	rng := rand.New(rand.NewPCG(5, 5))
	// ELBO_init and its standard error from independent estimates.
	var e, e2 float64
	const m = 200
	for range m {
		v := tr.ELBO(q, 1, rng)
		e += v
		e2 += v * v
	}
	init := e / m
	initSE := math.Sqrt((e2/m - init*init) / m)

	ref, err := posterior.NewRefiner(lik, posterior.RefineConfig{Fractions: []float64{0.7, 0.3}, Iterations: 1000, LR: 1e-3, Diagnostics: true, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	var s, s2 float64
	const seeds = 20
	for seed := range seeds {
		_, st, err := ref.Refine(context.Background(), nil, q, rand.New(rand.NewPCG(uint64(seed), 11)))
		if err != nil {
			t.Fatal(err)
		}
		s += st.ELBOAux
		s2 += st.ELBOAux * st.ELBOAux
	}
	aux := s / seeds
	auxSE := math.Sqrt((s2/seeds - aux*aux) / (seeds - 1))
	t.Logf("ELBO_init = %.2f ± %.2f; mean ELBO_aux over %d refined samples = %.2f ± %.2f", init, initSE, seeds, aux, auxSE)
	if aux < init {
		t.Errorf("mean ELBO_aux %.2f ± %.2f is below ELBO_init %.2f ± %.2f", aux, auxSE, init, initSE)
	}
}
