package posterior

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestLog1pSmall(t *testing.T) {
	for _, e := range []float64{0, 1e-300, 1e-12, 1e-6, 9.99e-5, 1e-4, 1e-3, 0.1, 0.5, 1} {
		got, want := log1pSmall(e), math.Log1p(e)
		if math.Abs(got-want) > 1e-12*math.Max(want, 1e-300) {
			t.Errorf("log1pSmall(%g) = %.17g, want %.17g", e, got, want)
		}
	}
}

func TestSoftplusInverse(t *testing.T) {
	for _, s := range []float64{1e-12, 1e-6, 0.01, 0.5, 1, 3, 29.9, 30.1, 100, 1e4} {
		got := Softplus(SoftplusInv(s))
		if math.Abs(got-s) > 1e-12*math.Max(1, s) && math.Abs(got-s)/s > 1e-9 {
			t.Errorf("Softplus(SoftplusInv(%g)) = %g", s, got)
		}
	}
	if got := Softplus(-800); got != 0 && got > 1e-300 {
		t.Errorf("Softplus(-800) = %g, want ~0", got)
	}
	if got := Softplus(800); got != 800 {
		t.Errorf("Softplus(800) = %g, want 800", got)
	}
}

// TestKLMatchesMonteCarlo checks the closed-form KL against a Monte Carlo
// estimate of E_q[log q(w) - log p(w)] with 200,000 draws; the tolerance
// is 5 standard errors of that estimate.
func TestKLMatchesMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := NewMeanField(3, 0, []float64{1, 0.5, 2}, 1)
	copy(q.Mu, []float64{0.3, -1, 2})
	q.SetSigma([]float64{0.2, 0.9, 1.7})
	q.PriorMean = []float64{0, 0.5, -1}
	sig := q.Sigma(nil)
	const n = 200000
	var sum, sum2 float64
	w := make([]float64, 3)
	for range n {
		q.Sample(w, rng)
		var d float64
		for j := range w {
			d += logNormal(w[j], q.Mu[j], sig[j]*sig[j]) - logNormal(w[j], q.PriorMean[j], q.PriorVar[j])
		}
		sum += d
		sum2 += d * d
	}
	mean := sum / n
	se := math.Sqrt((sum2/n - mean*mean) / n)
	if got := q.KL(); math.Abs(got-mean) > 5*se {
		t.Errorf("KL() = %g, Monte Carlo %g ± %g", got, mean, se)
	}
}

// noData is a likelihood with no rows: the ELBO is -KL.
type noData struct{ n int }

func (l noData) NumParams() int           { return l.n }
func (noData) NumHyper() int              { return 0 }
func (noData) NumRows() int               { return 0 }
func (noData) NewEvaluator(int) Evaluator { return nil }

// TestKLGradient checks the trainer's gradient of -ELBO on a dataset with
// no rows, which is the gradient of KL in mu and rho, against central
// finite differences of KL; the relative error must be below 1e-7.
func TestKLGradient(t *testing.T) {
	q := NewMeanField(4, 0, []float64{1, 0.3, 2, 0.7}, 1)
	copy(q.Mu, []float64{0.3, -1, 2, 0})
	copy(q.Rho, []float64{-2, 0.1, 1.5, -0.5})
	q.PriorMean = []float64{0, 0.5, -1, 0.2}
	tr, err := NewTrainer(noData{4}, TrainConfig{Reference: true}) // tr.grad is the reference path's
	if err != nil {
		t.Fatal(err)
	}
	q0 := q.Clone()
	tr.step(q, rand.New(rand.NewPCG(1, 1)))
	grad := tr.grad // gradient of -ELBO = KL
	const h = 1e-6
	for j := range 8 {
		p := q0.Params()
		old := p[j]
		p[j] = old + h
		up := q0.KL()
		p[j] = old - h
		down := q0.KL()
		p[j] = old
		fd := (up - down) / (2 * h)
		if rel := math.Abs(fd-grad[j]) / math.Max(1e-8, math.Abs(fd)+math.Abs(grad[j])); rel > 1e-7 {
			t.Errorf("dKL/dparam[%d] = %g, finite difference %g", j, grad[j], fd)
		}
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	q := NewMeanField(3, 1, []float64{1, 2, 3}, 0.1)
	copy(q.Mu, []float64{1, 2, 3})
	q.Hyper[0] = -0.5
	q.PriorMean = []float64{0.1, 0.2, 0.3}
	b, err := q.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got MeanField
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for i, v := range q.Params() {
		if got.Params()[i] != v {
			t.Fatalf("params differ at %d: %g vs %g", i, got.Params()[i], v)
		}
	}
	if got.PriorVar[2] != 3 || got.PriorMean[1] != 0.2 || got.Hyper[0] != -0.5 {
		t.Errorf("prior or hyper not restored: %+v", got)
	}
	for _, bad := range [][]byte{nil, b[:10], b[:len(b)-1], append(append([]byte{}, b...), 0)} {
		if err := got.UnmarshalBinary(bad); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("UnmarshalBinary(%d bytes) = %v, want ErrBadSnapshot", len(bad), err)
		}
	}
}

// TestTrainerRecoversBayesianLinearRegression: for Bayesian linear
// regression with a known noise variance the optimal mean-field posterior
// has the exact posterior mean and variances 1/diag(Lambda) (Bishop 2006,
// Section 10.1.2; Khan 2018, Section 3). With the analytic data term the
// trainer's only error is the optimizer's, so the tolerance is tight.
func TestTrainerRecoversBayesianLinearRegression(t *testing.T) {
	forEngines(t, testTrainerRecoversBayesianLinearRegression)
}

func testTrainerRecoversBayesianLinearRegression(t *testing.T, reference bool) {
	rng := rand.New(rand.NewPCG(7, 7))
	lik := correlatedRegression(rng, 40, 3, 0.8, 0.25)
	lik.exact = true
	priorVar := []float64{1, 1, 2}
	wantMean, prec := lik.exactPosterior(priorVar)

	q := NewMeanField(3, 0, priorVar, 0.5)
	tr, err := NewTrainer(lik, TrainConfig{BatchSize: 64, LR: 0.05, FinalLR: 1e-5, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), q, 20000, rng); err != nil {
		t.Fatal(err)
	}
	const tol = 1e-6 // relative; Adam with the learning rate decayed to 1e-5
	sig := q.Sigma(nil)
	for j := range 3 {
		wantVar := 1 / prec.At(j, j)
		if rel := math.Abs(q.Mu[j]-wantMean[j]) / math.Abs(wantMean[j]); rel > tol {
			t.Errorf("mean[%d] = %.9g, want %.9g (rel err %.2g)", j, q.Mu[j], wantMean[j], rel)
		}
		// The fast engine holds rho in float32: one ulp of rho moves the
		// variance by 2 sigmoid(rho)/softplus(rho) ulp(rho) relative
		// (4.5e-7 at rho = -2.5), and Adam stops within a few ulps of the
		// optimum; allow 8 on top of the optimizer's error.
		vtol := tol
		if !reference {
			ulp := math.Abs(q.Rho[j]) * 0x1p-23
			vtol += 8 * 2 * sigmoid(q.Rho[j]) / sig[j] * ulp
		}
		if rel := math.Abs(sig[j]*sig[j]-wantVar) / wantVar; rel > vtol {
			t.Errorf("var[%d] = %.9g, want %.9g (rel err %.2g)", j, sig[j]*sig[j], wantVar, rel)
		}
	}
}

// TestTrainerStochastic trains the same model with the stochastic
// reparameterization estimator on minibatches of 16 out of 200 rows.
// Gradient noise leaves the solution jittering around the optimum, so
// the tolerance is 10% of each posterior standard deviation for the
// means and 10% for the variances.
func TestTrainerStochastic(t *testing.T) { forEngines(t, testTrainerStochastic) }

func testTrainerStochastic(t *testing.T, reference bool) {
	rng := rand.New(rand.NewPCG(3, 4))
	lik := correlatedRegression(rng, 200, 3, 0.8, 0.5)
	priorVar := ones(3, 1)
	wantMean, prec := lik.exactPosterior(priorVar)
	q := NewMeanField(3, 0, priorVar, 0.5)
	tr, err := NewTrainer(lik, TrainConfig{BatchSize: 16, LR: 0.01, FinalLR: 1e-5, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.Run(context.Background(), q, 40000, rng)
	if err != nil {
		t.Fatal(err)
	}
	if !(st.MeanELBO > st.FirstELBO) {
		t.Errorf("ELBO went from %g to %g, want it to rise", st.FirstELBO, st.MeanELBO)
	}
	sig := q.Sigma(nil)
	for j := range 3 {
		wantVar := 1 / prec.At(j, j)
		if d := math.Abs(q.Mu[j] - wantMean[j]); d > 0.1*math.Sqrt(wantVar) {
			t.Errorf("mean[%d] = %.6g, want %.6g ± %.3g", j, q.Mu[j], wantMean[j], 0.1*math.Sqrt(wantVar))
		}
		if rel := math.Abs(sig[j]*sig[j]-wantVar) / wantVar; rel > 0.10 {
			t.Errorf("var[%d] = %.6g, want %.6g (rel err %.2g)", j, sig[j]*sig[j], wantVar, rel)
		}
	}
}

func TestTrainerSameSeedSameBits(t *testing.T) {
	run := func() []float64 {
		rng := rand.New(rand.NewPCG(11, 12))
		lik := correlatedRegression(rng, 100, 4, 0.5, 0.5)
		q := NewMeanField(4, 0, ones(4, 1), 0.3)
		tr, err := NewTrainer(lik, TrainConfig{BatchSize: 8})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), q, 500, rng); err != nil {
			t.Fatal(err)
		}
		return append([]float64(nil), q.Params()...)
	}
	a, b := run(), run()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("param %d: %v != %v", i, a[i], b[i])
		}
	}
}

func TestTrainerStepAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	lik := correlatedRegression(rng, 100, 4, 0.5, 0.5)
	q := NewMeanField(4, 0, ones(4, 1), 0.3)
	for _, b := range []Bound{BoundELBO, BoundCollapsedMean, BoundCollapsedMeanVar} {
		for _, o := range []Optimizer{OptimizerAdam, OptimizerNGVI} {
			for _, ref := range []bool{false, true} {
				tr, err := NewTrainer(lik, TrainConfig{BatchSize: 8, Bound: b, Optimizer: o, Reference: ref})
				if err != nil {
					t.Fatal(err)
				}
				if a := testing.AllocsPerRun(100, func() { tr.Step(q, rng) }); a != 0 {
					t.Errorf("Step (%s, %s, reference %v) allocates %v times, want 0", b, o, ref, a)
				}
			}
		}
	}
}

func TestTrainerHonoursCancellation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	lik := correlatedRegression(rng, 100, 4, 0.5, 0.5)
	q := NewMeanField(4, 0, ones(4, 1), 0.3)
	tr, _ := NewTrainer(lik, TrainConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := tr.Run(ctx, q, 1000, rng)
	if !errors.Is(err, context.Canceled) || st.Iterations != 0 {
		t.Errorf("Run on a cancelled context = %d iterations, %v; want 0, context.Canceled", st.Iterations, err)
	}
}

func TestTrainerReportsNonFiniteELBO(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	lik := correlatedRegression(rng, 10, 2, 0.5, 0.5)
	lik.y[3] = math.NaN()
	q := NewMeanField(2, 0, ones(2, 1), 0.3)
	tr, _ := NewTrainer(lik, TrainConfig{})
	_, err := tr.Run(context.Background(), q, 10, rng)
	var nf *NonFiniteError
	if !errors.As(err, &nf) || nf.Iteration != 0 {
		t.Errorf("Run with a NaN target = %v, want a NonFiniteError at iteration 0", err)
	}
}

func TestTrainConfigValidation(t *testing.T) {
	lik := &linearGaussian{x: [][]float64{{1}}, y: []float64{1}, noiseVar: 1}
	for _, c := range []TrainConfig{
		{BatchSize: -1}, {LR: -1}, {LR: math.Inf(1)}, {FinalLR: math.NaN()},
		{Optimizer: OptimizerNGVI + 1}, {Optimizer: -1}, {Optimizer: OptimizerNGVI, Point: true},
		{Optimizer: OptimizerNGVI, NGVIStep: 1.5}, {Optimizer: OptimizerNGVI, NGVIStep: -0.1}, {NGVIStep: math.NaN()},
	} {
		if _, err := NewTrainer(lik, c); err == nil {
			t.Errorf("NewTrainer(%+v) = nil error, want one", c)
		}
	}
}

// TestPointTrainerFindsTheMAP: with Point set the trainer finds the
// posterior mode of Bayesian linear regression, which is its posterior
// mean, and leaves rho untouched.
func TestPointTrainerFindsTheMAP(t *testing.T) { forEngines(t, testPointTrainerFindsTheMAP) }

func testPointTrainerFindsTheMAP(t *testing.T, reference bool) {
	rng := rand.New(rand.NewPCG(7, 8))
	lik := correlatedRegression(rng, 40, 3, 0.8, 0.25)
	priorVar := []float64{1, 1, 2}
	wantMean, _ := lik.exactPosterior(priorVar)
	q := NewMeanField(3, 0, priorVar, 0.5)
	rho := append([]float64(nil), q.Rho...)
	tr, err := NewTrainer(lik, TrainConfig{LR: 0.05, FinalLR: 1e-5, Point: true, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	st, err := tr.Run(context.Background(), q, 20000, rng)
	if err != nil {
		t.Fatal(err)
	}
	// The reported objective is the MAP objective at the mode.
	want := lik.LogLikAt(q.Mu)
	for j, mu := range q.Mu {
		want += logNormal(mu, 0, priorVar[j])
	}
	if math.Abs(st.LastELBO-want) > 1e-9*math.Abs(want) {
		t.Errorf("reported objective %.12g, want log p(y|mu) + log p(mu) = %.12g", st.LastELBO, want)
	}
	for j := range 3 {
		if rel := math.Abs(q.Mu[j]-wantMean[j]) / math.Abs(wantMean[j]); rel > 1e-6 {
			t.Errorf("mode[%d] = %.9g, want %.9g", j, q.Mu[j], wantMean[j])
		}
		if q.Rho[j] != rho[j] {
			t.Errorf("rho[%d] moved from %g to %g", j, rho[j], q.Rho[j])
		}
	}
}
