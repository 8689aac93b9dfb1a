package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// moments accumulates the mean and standard error of vectors.
type moments struct {
	n        int
	sum, ssq []float64
}

func newMoments(k int) *moments {
	return &moments{sum: make([]float64, k), ssq: make([]float64, k)}
}

func (m *moments) add(v []float64) {
	m.n++
	for i, x := range v {
		m.sum[i] += x
		m.ssq[i] += x * x
	}
}

func (m *moments) mean(i int) float64 { return m.sum[i] / float64(m.n) }

// se returns the standard error of the mean of component i.
func (m *moments) se(i int) float64 {
	mu := m.mean(i)
	v := (m.ssq[i]/float64(m.n) - mu*mu) * float64(m.n) / float64(m.n-1)
	return math.Sqrt(math.Max(v, 0) / float64(m.n))
}

// estimate runs ExpectedLogLik with seeds 1..reps and returns the moments of
// the vector (value, dMu..., dSigma..., dHyper...), on the float64
// evaluator or, if fast, on the fast engine with its own noise (kern.RNG).
func estimate(lik *Likelihood, p problem, hyper []float64, rows []int, reps int, fast bool) *moments {
	n := p.arch.NumParams()
	nh := lik.NumHyper()
	ev := lik.NewEvaluator(len(p.data.y))
	ev32 := lik.NewEvaluator32(len(p.data.y))
	mu, sig := make([]float32, n), make([]float32, n)
	dMu, dSig := make([]float32, n), make([]float32, n)
	p.arch.ToEngine(mu, p.mu)
	p.arch.ToEngine(sig, p.sigma)
	v := make([]float64, 1+2*n+nh)
	m := newMoments(len(v))
	for s := range reps {
		rng := rand.New(rand.NewPCG(uint64(s)+1, 77))
		if fast {
			v[0] = ev32.ExpectedLogLik(dMu, dSig, v[1+2*n:], mu, sig, hyper, rows, rng)
			p.arch.FromEngine(v[1:1+n], dMu)
			p.arch.FromEngine(v[1+n:1+2*n], dSig)
		} else {
			v[0] = ev.ExpectedLogLik(v[1:1+n], v[1+n:1+2*n], v[1+2*n:], p.mu, p.sigma, hyper, rows, rng)
		}
		m.add(v)
	}
	return m
}

// engineNames names the fast argument of estimate in subtests.
var engineNames = map[bool]string{false: "reference", true: "fast engine"}

// zTol is the number of combined standard errors by which two Monte Carlo
// means (or a mean and an exact value) may differ. About 120 components are
// compared per case; for Gaussian errors P(|z| > 4.5) = 6.8e-6 per
// component, so a correct implementation fails a case with probability
// below 1e-3. The seeds are fixed, so the test is deterministic.
const zTol = 4.5

// TestLocalAndWeightReparamAreUnbiasedForTheSameExpectation compares the
// Monte Carlo means of the value and of every gradient component of the
// two stochastic estimators: both are unbiased for E_q[sum log p] and its
// gradient, so their means must agree within zTol combined standard errors.
func TestLocalAndWeightReparamAreUnbiasedForTheSameExpectation(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(engineNames[fast], func(t *testing.T) { testUnbiased(t, fast) })
	}
}

func testUnbiased(t *testing.T, fast bool) {
	const reps = 4000
	for _, learn := range []bool{false, true} {
		p := newProblem(3, []int{4, 5}, 3, 11, 21)
		opt := Options{NoiseVar: 4, LearnNoise: learn, Standardization: Standardization{Shift: -3, Scale: 5}}
		opt.Estimator = LocalReparam
		lrt := NewLikelihood(p.arch, p.data, opt)
		opt.Estimator = WeightReparam
		wr := NewLikelihood(p.arch, p.data, opt)
		hyper := p.hyper[:lrt.NumHyper()]
		rows := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
		a := estimate(lrt, p, hyper, rows, reps, fast)
		b := estimate(wr, p, hyper, rows, reps, fast)
		worst := 0.0
		for i := range a.sum {
			se := math.Hypot(a.se(i), b.se(i))
			d := math.Abs(a.mean(i) - b.mean(i))
			if se == 0 {
				if d != 0 {
					t.Errorf("learn=%v component %d: means %g and %g differ with zero standard error", learn, i, a.mean(i), b.mean(i))
				}
				continue
			}
			z := d / se
			worst = math.Max(worst, z)
			if z > zTol {
				t.Errorf("learn=%v component %d: LocalReparam mean %g, WeightReparam mean %g, |z| = %.2f > %g", learn, i, a.mean(i), b.mean(i), z, zTol)
			}
		}
		t.Logf("learn=%v: %d components, worst |z| = %.2f (value: LRT %.4f ± %.4f, WR %.4f ± %.4f)",
			learn, len(a.sum), worst, a.mean(0), a.se(0), b.mean(0), b.se(0))
	}
}

// TestLinearModelMatchesClosedForm checks, for the model with no hidden
// layer, the Monte Carlo means of both stochastic estimators against the
// closed form of the expected Gaussian log-likelihood of a linear model.
// With r_i = y_i - Shift - Scale (mu_{W,a} x_i + mu_{b,a}), a = a_i,
//
//	E_q[log p_i] = -1/2 log(2 pi s2) - (r_i^2 + Scale^2 (sum_k x_ik^2 sigma_{W,ak}^2 + sigma_{b,a}^2)) / (2 s2),
//	dE/dmu       = the gradient of log p at w = mu,
//	dE/dsigma_{W,ak} = -Scale^2 x_ik^2 sigma_{W,ak} / s2,  dE/dsigma_{b,a} = -Scale^2 sigma_{b,a} / s2.
func TestLinearModelMatchesClosedForm(t *testing.T) {
	for _, fast := range []bool{false, true} {
		t.Run(engineNames[fast], func(t *testing.T) { testLinearClosedForm(t, fast) })
	}
}

func testLinearClosedForm(t *testing.T, fast bool) {
	const reps = 4000
	p := newProblem(4, nil, 3, 13, 5)
	std := Standardization{Shift: 2, Scale: 3}
	const s2 = 6.0
	det := NewLikelihood(p.arch, p.data, Options{Estimator: Deterministic, NoiseVar: s2, Standardization: std})
	n := p.arch.NumParams()
	ly := p.arch.Layer(0)
	want := make([]float64, 1+2*n)
	want[0] = det.NewEvaluator(4).LogLik(want[1:1+n], nil, p.mu, nil, nil)
	for i := range p.data.Len() {
		a, x := p.data.Arm(i), p.data.X(i)
		for k, xk := range x {
			j := ly.W + a*ly.In + k
			s := p.sigma[j]
			want[0] -= std.Scale * std.Scale * xk * xk * s * s / (2 * s2)
			want[1+n+j] -= std.Scale * std.Scale * xk * xk * s / s2
		}
		j := ly.B + a
		s := p.sigma[j]
		want[0] -= std.Scale * std.Scale * s * s / (2 * s2)
		want[1+n+j] -= std.Scale * std.Scale * s / s2
	}
	for _, est := range []Estimator{LocalReparam, WeightReparam} {
		lik := NewLikelihood(p.arch, p.data, Options{Estimator: est, NoiseVar: s2, Standardization: std})
		m := estimate(lik, p, nil, nil, reps, fast)
		// Components without noise are exact up to rounding: float64's,
		// or float32's on the fast engine (fastTol, see engine_test.go).
		exact := 1e-12
		if fast {
			exact = fastTol
		}
		worst := 0.0
		for i, w := range want {
			se := m.se(i)
			d := math.Abs(m.mean(i) - w)
			if se == 0 {
				if relErr(m.mean(i), w, 1e-12) > exact {
					t.Errorf("%v component %d: mean %g with zero standard error, want %g", est, i, m.mean(i), w)
				}
				continue
			}
			z := d / se
			worst = math.Max(worst, z)
			if z > zTol {
				t.Errorf("%v component %d: mean %g ± %g, closed form %g, |z| = %.2f > %g", est, i, m.mean(i), se, w, z, zTol)
			}
		}
		t.Logf("%v: worst |z| = %.2f; value %.4f ± %.4f, closed form %.4f", est, worst, m.mean(0), m.se(0), want[0])
	}
}

func TestSameSeedGivesSameBits(t *testing.T) {
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
		t.Run(est.String(), func(t *testing.T) {
			p := newProblem(5, []int{6, 4}, 2, 40, 3)
			lik := NewLikelihood(p.arch, p.data, Options{Estimator: est, LearnNoise: true, Standardization: Standardization{Shift: 1, Scale: 2}})
			n := p.arch.NumParams()
			run := func() []float64 {
				ev := lik.NewEvaluator(16)
				out := make([]float64, 1+2*n+1)
				rng := seeded(2024)
				var v float64
				for range 3 { // several calls so that the stream position matters
					v = ev.ExpectedLogLik(out[1:1+n], out[1+n:1+2*n], out[1+2*n:], p.mu, p.sigma, p.hyper, nil, rng)
				}
				out[0] = v
				return out
			}
			a, b := run(), run()
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("component %d: %v then %v with the same seed", i, a[i], b[i])
				}
			}
		})
	}
}

func TestEvaluatorsAllocateNothing(t *testing.T) {
	p := newProblem(7, []int{9, 8}, 3, 50, 11)
	n := p.arch.NumParams()
	dMu, dSigma, dW := make([]float64, n), make([]float64, n), make([]float64, n)
	dHyper := make([]float64, 1)
	rows := []int{4, 8, 15, 16, 23, 42, 4, 1, 2, 3}
	rng := seeded(1)
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
		lik := NewLikelihood(p.arch, p.data, Options{Estimator: est, LearnNoise: true})
		ev := lik.NewEvaluator(8) // smaller than the batches: chunking too
		cases := []struct {
			name string
			f    func()
		}{
			{"ExpectedLogLik on rows", func() { ev.ExpectedLogLik(dMu, dSigma, dHyper, p.mu, p.sigma, p.hyper, rows, rng) }},
			{"ExpectedLogLik on all rows", func() { ev.ExpectedLogLik(dMu, dSigma, dHyper, p.mu, p.sigma, p.hyper, nil, rng) }},
			{"LogLik with gradients", func() { ev.LogLik(dW, dHyper, p.mu, p.hyper, rows) }},
			{"LogLik on all rows without gradients", func() { ev.LogLik(nil, nil, p.mu, p.hyper, nil) }},
		}
		for _, c := range cases {
			if got := testing.AllocsPerRun(20, c.f); got != 0 {
				t.Errorf("%v %s: %v allocations per call, want 0", est, c.name, got)
			}
		}
	}
	pr := NewPredictor(p.arch, 8)
	dst := make([]float64, 20*p.arch.Out())
	x := p.data.x[:20*p.arch.In()]
	if got := testing.AllocsPerRun(20, func() { pr.Sample(dst, p.mu, p.sigma, x, Standardization{}, rng) }); got != 0 {
		t.Errorf("Predictor.Sample: %v allocations per call, want 0", got)
	}
}

func TestEmptyRowsGiveZero(t *testing.T) {
	p := newProblem(3, []int{4}, 2, 5, 1)
	n := p.arch.NumParams()
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
		lik := NewLikelihood(p.arch, p.data, Options{Estimator: est, LearnNoise: true})
		ev := lik.NewEvaluator(4)
		dMu, dSigma, dHyper := make([]float64, n), make([]float64, n), []float64{7}
		for j := range dMu {
			dMu[j], dSigma[j] = 1, 1
		}
		v := ev.ExpectedLogLik(dMu, dSigma, dHyper, p.mu, p.sigma, p.hyper, []int{}, seeded(1))
		if v != 0 || dHyper[0] != 0 {
			t.Errorf("%v: value %v, dHyper %v on no rows, want 0, 0", est, v, dHyper[0])
		}
		for j := range dMu {
			if dMu[j] != 0 || dSigma[j] != 0 {
				t.Fatalf("%v: gradient %d is (%v, %v) on no rows, want zero", est, j, dMu[j], dSigma[j])
			}
		}
	}
}

// TestWideLayersOnFewRows runs every estimator on the bandit network's
// widths with fewer rows than a Gemm tile: products whose output spans
// several tiles over a short inner dimension (a regression test for the
// tiling in gemm).
func TestWideLayersOnFewRows(t *testing.T) {
	for _, rows := range []int{1, 10, 70} {
		p := newProblem(117, []int{100, 100}, 2, rows, 6).oneHot(2)
		n := p.arch.NumParams()
		for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
			lik := NewLikelihood(p.arch, p.data, Options{Estimator: est, LearnNoise: true})
			ev := lik.NewEvaluator(64)
			dMu, dSigma, dHyper := make([]float64, n), make([]float64, n), make([]float64, 1)
			v := ev.ExpectedLogLik(dMu, dSigma, dHyper, p.mu, p.sigma, p.hyper, nil, seeded(1))
			w := ev.LogLik(dMu, dHyper, p.mu, p.hyper, nil)
			if math.IsNaN(v) || math.IsInf(v, 0) || math.IsNaN(w) || math.IsInf(w, 0) {
				t.Errorf("%d rows, %v: expected log-likelihood %v, log-likelihood %v", rows, est, v, w)
			}
		}
	}
}
