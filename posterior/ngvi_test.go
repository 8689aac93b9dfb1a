package posterior

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// TestNGVIReachesBayesianLinearRegressionBeforeAdam: on the closed-form
// Bayesian linear regression of TestTrainerRecoversBayesianLinearRegression
// (40 rows, 3 features correlated 0.8, analytic data term, prior variances
// 1, 1, 2) the optimal mean-field posterior has the exact posterior mean
// and the variances 1/diag(Lambda) of the exact precision (Bishop 2006,
// Section 10.1.2). Natural-gradient VI (OptimizerNGVI, step 0.5) must come
// within ngviTol of both and stay there to the 20,000th iteration, in
// fewer iterations than Adam needs for the same at its best of three
// learning rates (0.01, 0.05, 0.2, each decayed to 1e-5 over 20,000
// iterations as in that test). The iteration counts are printed.
func TestNGVIReachesBayesianLinearRegressionBeforeAdam(t *testing.T) {
	forEngines(t, testNGVIReachesBayesianLinearRegressionBeforeAdam)
}

// ngviTol is the relative error allowed in each mean and variance: well
// above float32 rounding (6e-8 relative per operation on the fast
// engine), well below any statistical error.
const ngviTol = 1e-5

func testNGVIReachesBayesianLinearRegressionBeforeAdam(t *testing.T, reference bool) {
	rng := rand.New(rand.NewPCG(7, 7))
	lik := correlatedRegression(rng, 40, 3, 0.8, 0.25)
	lik.exact = true
	priorVar := []float64{1, 1, 2}
	wantMean, prec := lik.exactPosterior(priorVar)
	wantVar := make([]float64, 3)
	for j := range wantVar {
		wantVar[j] = 1 / prec.At(j, j)
	}
	// within reports whether q is within ngviTol of the optimum, with
	// the fast engine's float32 rho allowed 8 ulps on top (as in
	// TestTrainerRecoversBayesianLinearRegression), and the worst
	// relative errors.
	sig := make([]float64, 3)
	within := func(q *MeanField) (okMu, okVar bool, worstMu, worstVar float64) {
		q.Sigma(sig)
		okMu, okVar = true, true
		for j := range 3 {
			rm := math.Abs(q.Mu[j]-wantMean[j]) / math.Abs(wantMean[j])
			rv := math.Abs(sig[j]*sig[j]-wantVar[j]) / wantVar[j]
			vtol := ngviTol
			if !reference {
				vtol += 8 * 2 * sigmoid(q.Rho[j]) / sig[j] * math.Abs(q.Rho[j]) * 0x1p-23
			}
			okMu, okVar = okMu && rm <= ngviTol, okVar && rv <= vtol
			worstMu, worstVar = max(worstMu, rm), max(worstVar, rv)
		}
		return okMu, okVar, worstMu, worstVar
	}
	// reach runs maxIters Steps of cfg from the same start, with Run's
	// learning-rate decay, and returns the number of iterations after
	// which q was within tolerance at every later iteration
	// (maxIters+1 if it was not at the end), and q; and the same count
	// for the variances alone.
	const maxIters = 20000
	reach := func(cfg TrainConfig) (int, int, *MeanField) {
		cfg.BatchSize, cfg.Reference = 64, reference
		q := NewMeanField(3, 0, priorVar, 0.5)
		tr, err := NewTrainer(lik, cfg)
		if err != nil {
			t.Fatal(err)
		}
		decay := 1.0
		if cfg.FinalLR > 0 {
			decay = math.Pow(cfg.FinalLR/cfg.LR, 1.0/(maxIters-1))
		}
		lr := tr.Config().LR
		r := rand.New(rand.NewPCG(1, 2))
		reached, reachedVar := 0, 0
		for i := 1; i <= maxIters; i++ {
			tr.SetLR(lr)
			tr.Step(q, r)
			lr *= decay
			okMu, okVar, _, _ := within(q)
			if !okMu || !okVar {
				reached = i + 1
			}
			if !okVar {
				reachedVar = i + 1
			}
		}
		return reached, reachedVar, q
	}

	ngviIters, ngviVar, q := reach(TrainConfig{Optimizer: OptimizerNGVI, NGVIStep: 0.5})
	if ngviIters > maxIters {
		_, _, em, ev := within(q)
		t.Fatalf("NGVI was not within %g after %d iterations: worst relative errors mean %.3g, variance %.3g", ngviTol, maxIters, em, ev)
	}
	t.Logf("NGVI (step 0.5): within %g of the exact means and mean-field variances from iteration %d to %d (the variances alone from iteration %d)", ngviTol, ngviIters, maxIters, ngviVar)

	adamIters, adamVar := maxIters+1, maxIters+1
	for _, lr := range []float64{0.01, 0.05, 0.2} {
		n, nv, q := reach(TrainConfig{LR: lr, FinalLR: 1e-5})
		_, _, em, ev := within(q)
		t.Logf("Adam (lr %g decayed to 1e-5): within %g from iteration %d, the variances alone from %d (%d = not at the end; worst relative errors at the end: mean %.3g, variance %.3g)", lr, ngviTol, n, nv, maxIters+1, em, ev)
		adamIters, adamVar = min(adamIters, n), min(adamVar, nv)
	}
	if ngviIters >= adamIters {
		t.Errorf("NGVI took %d iterations, Adam at its best %d; want NGVI fewer", ngviIters, adamIters)
	}
	if ngviVar >= adamVar {
		t.Errorf("NGVI's variances took %d iterations, Adam's at its best %d; want NGVI fewer", ngviVar, adamVar)
	}
}

// TestNGVIUpdateFixedPoint: the stationary points of the ELBO in
// (mu, sigma), gMu = prec (mu - m) and 1/sigma^2 = prec - gSigma/sigma,
// are exactly the fixed points of ngviUpdate at every step size; at step
// 1 with the curvature of a Gaussian data term the update jumps to them
// from within its trust regions, and it moves at most to their edge from
// outside.
func TestNGVIUpdateFixedPoint(t *testing.T) {
	const m, prec, a, b = 0.3, 2.0, 5.0, 1.5 // E(w) = -a/2 w^2 + b w
	// The optimum of -a/2 (mu^2 + sigma^2) + b mu - KL: Lambda = prec + a,
	// mu = (b + prec m)/Lambda.
	lam := prec + a
	muOpt, sigOpt := (b+prec*m)/lam, 1/math.Sqrt(lam)
	grads := func(mu, sigma float64) (float64, float64) { return -a*mu + b, -a * sigma }
	for _, beta := range []float64{0.01, 0.3, 1} {
		gm, gs := grads(muOpt, sigOpt)
		mu, sigma := ngviUpdate(muOpt, sigOpt, gm, gs, m, prec, beta)
		if math.Abs(mu-muOpt) > 1e-15 || math.Abs(sigma-sigOpt) > 1e-15 {
			t.Errorf("step %g from the optimum (%g, %g) = (%g, %g), want no move", beta, muOpt, sigOpt, mu, sigma)
		}
		mu32, sigma32 := []float32{float32(muOpt)}, []float32{float32(sigOpt)}
		ngviPass32(mu32, sigma32, []float32{float32(gm) / 2}, []float32{float32(gs) / 2}, []float32{m}, []float32{prec}, 2, float32(beta))
		if math.Abs(float64(mu32[0])-muOpt) > 1e-6 || math.Abs(float64(sigma32[0])-sigOpt) > 1e-6 {
			t.Errorf("float32 step %g from the optimum (%g, %g) = (%g, %g), want no move", beta, muOpt, sigOpt, mu32[0], sigma32[0])
		}
	}
	// Step 1 from within the trust regions (precision within a factor 2
	// of the optimum's, mean within one new standard deviation) lands on
	// the optimum.
	mu0, sig0 := muOpt+0.5*sigOpt, 1.2*sigOpt
	gm, gs := grads(mu0, sig0)
	mu, sigma := ngviUpdate(mu0, sig0, gm, gs, m, prec, 1)
	if math.Abs(mu-muOpt) > 1e-12 || math.Abs(sigma-sigOpt) > 1e-12 {
		t.Errorf("step 1 from (%g, %g) = (%g, %g), want the optimum (%g, %g)", mu0, sig0, mu, sigma, muOpt, sigOpt)
	}
	// From far away the trust regions bound the step: the precision
	// changes by at most a factor 2 and the mean by at most the new
	// standard deviation.
	gm, gs = grads(-2, 0.05)
	mu, sigma = ngviUpdate(-2, 0.05, gm, gs, m, prec, 1)
	if want := 0.05 * math.Sqrt2; math.Abs(sigma-want) > 1e-15 {
		t.Errorf("sigma after step 1 from 0.05 towards %g = %g, want %g (precision halved)", sigOpt, sigma, want)
	}
	if want := -2 + sigma; math.Abs(mu-want) > 1e-15 {
		t.Errorf("mean after step 1 from -2 towards %g = %g, want %g (one standard deviation)", muOpt, mu, want)
	}
	// A negative curvature estimate cannot make the precision fall below
	// the prior's.
	if _, s := ngviUpdate(0, 0.6, 0, 1e6, m, prec, 1); !(s <= 1/math.Sqrt(prec)) {
		t.Errorf("sigma after a curvature estimate of -1.7e6 = %g, want at most the prior's %g", s, 1/math.Sqrt(prec))
	}
}

// TestNGVIWithCollapsedBoundsIsStationary: under the collapsed bounds
// the natural-gradient trainer steps towards the learned prior given q
// (collapsed.prior). On the analytic linear regression, after it settles,
// its q must satisfy the bound's stationarity conditions to 1e-4 relative:
// the gradient of Run's objective, estimated the same way as Adam's, is
// zero. The conditions are those of TestCollapsedMeanIsBayesianLinearRegression
// and TestCollapsedMeanVarStationaryOnLinearRegression, written as
// ngviUpdate's fixed point.
func TestNGVIWithCollapsedBoundsIsStationary(t *testing.T) {
	for _, b := range []Bound{BoundCollapsedMean, BoundCollapsedMeanVar} {
		t.Run(b.String(), func(t *testing.T) {
			forEngines(t, func(t *testing.T, reference bool) {
				rng := rand.New(rand.NewPCG(9, 9))
				lik := correlatedRegression(rng, 40, 3, 0.5, 0.25)
				lik.exact = true
				q := NewMeanField(3, 0, ones(3, 1), 0.5)
				tr, err := NewTrainer(lik, TrainConfig{Optimizer: OptimizerNGVI, NGVIStep: 0.5, Bound: b, Reference: reference})
				if err != nil {
					t.Fatal(err)
				}
				before := tr.ELBO(q, 1, rng)
				if _, err := tr.Run(context.Background(), q, 2000, rng); err != nil {
					t.Fatal(err)
				}
				if after := tr.ELBO(q, 1, rng); !(after > before) {
					t.Errorf("bound went from %g to %g, want it to rise", before, after)
				}
				sig := q.Sigma(nil)
				ev := lik.NewEvaluator(64)
				n := 3
				dMu, dSigma := make([]float64, n), make([]float64, n)
				rows := []int{}
				for i := range lik.NumRows() {
					rows = append(rows, i)
				}
				ev.ExpectedLogLik(dMu, dSigma, nil, q.Mu, sig, nil, rows, rng)
				for j := range n {
					m, prec := tr.col.prior(q.Mu[j], sig[j], q.PriorVar[j])
					gMu := dMu[j] - prec*(q.Mu[j]-m)
					gSig := dSigma[j] + 1/sig[j] - prec*sig[j]
					// Relative to the size of the terms that cancel.
					if rel := math.Abs(gMu) / (math.Abs(dMu[j]) + prec*math.Abs(q.Mu[j]-m) + 1); rel > 1e-4 {
						t.Errorf("dBound/dmu[%d] = %g, want 0 (relative %g)", j, gMu, rel)
					}
					if rel := math.Abs(gSig) / (1 / sig[j]); rel > 1e-4 {
						t.Errorf("dBound/dsigma[%d] = %g, want 0 (relative %g)", j, gSig, rel)
					}
				}
			})
		})
	}
}
