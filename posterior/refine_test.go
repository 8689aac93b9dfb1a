package posterior

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// moments accumulates the first two moments of a pair (x, y).
type moments struct {
	n                     float64
	sx, sy, sxx, syy, sxy float64
}

func (m *moments) add(x, y float64) {
	m.n++
	m.sx += x
	m.sy += y
	m.sxx += x * x
	m.syy += y * y
	m.sxy += x * y
}
func (m *moments) meanX() float64 { return m.sx / m.n }
func (m *moments) meanY() float64 { return m.sy / m.n }
func (m *moments) varX() float64  { return m.sxx/m.n - m.meanX()*m.meanX() }
func (m *moments) varY() float64  { return m.syy/m.n - m.meanY()*m.meanY() }
func (m *moments) cov() float64   { return m.sxy/m.n - m.meanX()*m.meanY() }
func (m *moments) corr() float64  { return m.cov() / math.Sqrt(m.varX()*m.varY()) }

// regression of y on x: E[y | x] = alpha + beta x, residual variance.
func (m *moments) regress() (alpha, beta, resid float64) {
	beta = m.cov() / m.varX()
	alpha = m.meanY() - beta*m.meanX()
	resid = m.varY() - beta*beta*m.varX()
	return
}

// TestAuxiliaryClosedFormsMatchMonteCarlo checks Eqs. A1, A3 and A5 of
// Havasi et al. (2021) against brute force: the generative model is
// sampled directly and the Gaussian conditionals are recovered by linear
// regression on 400,000 draws. Tolerance: 0.01 absolute on means and
// slopes and 2% relative on variances, about 5 standard errors at this
// sample size.
func TestAuxiliaryClosedFormsMatchMonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	// Three auxiliary variables with non-zero prior means, at step k = 2
	// with a_1 already drawn.
	mus := []float64{0.2, -0.3, 0.5}
	vars := []float64{0.5, 0.3, 0.2}
	a1 := 0.7
	s := auxStep{
		mu: mus[1], varK: vars[1], sPrev: vars[1] + vars[2], sK: vars[2],
		b: a1, m: mus[1] + mus[2],
	}
	const n = 400000
	const tolMean, tolVar = 0.01, 0.02

	t.Run("A1: the prior conditional of a_k given w", func(t *testing.T) {
		// Draw a_2, a_3 from their priors; w = a_1 + a_2 + a_3.
		// Regress a_2 on w.
		var m moments
		for range n {
			a2 := mus[1] + math.Sqrt(vars[1])*rng.NormFloat64()
			a3 := mus[2] + math.Sqrt(vars[2])*rng.NormFloat64()
			m.add(a1+a2+a3, a2)
		}
		alpha, beta, resid := m.regress()
		for _, w := range []float64{-1, 0.5, 2} {
			got, gotVar := s.condAux(w)
			if want := alpha + beta*w; math.Abs(got-want) > tolMean {
				t.Errorf("A1 mean at w=%g: %g, Monte Carlo %g", w, got, want)
			}
			if math.Abs(gotVar-resid)/resid > tolVar {
				t.Errorf("A1 variance: %g, Monte Carlo %g", gotVar, resid)
			}
		}
	})

	nu, rho2 := 1.1, 0.09
	var m moments // (a_k, w) under q(w) p(a_k | a_{1:k-1}, w)
	for range n {
		w := nu + math.Sqrt(rho2)*rng.NormFloat64()
		cm, cv := s.condAux(w)
		m.add(cm+math.Sqrt(cv)*rng.NormFloat64(), w)
	}
	t.Run("A3: the marginal of a_k under q", func(t *testing.T) {
		gotMean, gotVar := s.marginalAux(nu, rho2)
		if math.Abs(gotMean-m.meanX()) > tolMean {
			t.Errorf("A3 mean %g, Monte Carlo %g", gotMean, m.meanX())
		}
		if math.Abs(gotVar-m.varX())/m.varX() > tolVar {
			t.Errorf("A3 variance %g, Monte Carlo %g", gotVar, m.varX())
		}
	})
	t.Run("A5: q(w | a_k)", func(t *testing.T) {
		alpha, beta, resid := m.regress()
		for _, a := range []float64{-0.5, 0, 0.4} {
			got, gotVar := s.posteriorGivenAux(a, nu, rho2)
			if want := alpha + beta*a; math.Abs(got-want) > tolMean {
				t.Errorf("A5 mean at a=%g: %g, Monte Carlo %g", a, got, want)
			}
			if math.Abs(gotVar-resid)/resid > tolVar {
				t.Errorf("A5 variance %g, Monte Carlo %g", gotVar, resid)
			}
		}
	})
}

func TestAuxiliaryEdgeCases(t *testing.T) {
	const nu, rho2, b = 0.8, 0.04, 0.3
	t.Run("a vanishing fraction leaves q unchanged", func(t *testing.T) {
		// a_k is drawn from its marginal (A3), whose spread vanishes
		// with sigma_k^2; q(w | a_k) must then be q(w) itself.
		s := auxStep{varK: 1e-12, sPrev: 1, sK: 1 - 1e-12, b: b}
		am, av := s.marginalAux(nu, rho2)
		for _, z := range []float64{-3, 0, 3} {
			m, v := s.posteriorGivenAux(am+z*math.Sqrt(av), nu, rho2)
			if math.Abs(m-nu) > 1e-6 || math.Abs(v-rho2) > 1e-12 {
				t.Errorf("q(w | a) = N(%g, %g), want N(%g, %g)", m, v, nu, rho2)
			}
		}
	})
	t.Run("the whole remaining variance collapses q onto the prior's draw", func(t *testing.T) {
		s := auxStep{varK: 0.25, sPrev: 0.25, sK: 0, b: b}
		m, v := s.posteriorGivenAux(-0.4, nu, rho2)
		if math.Abs(m-(b-0.4)) > 1e-12 || v != 0 {
			t.Errorf("q(w | a) = N(%g, %g), want the point %g", m, v, b-0.4)
		}
		// and a_k is drawn from q(w) shifted by b: A3 with s_k = 0.
		am, av := s.marginalAux(nu, rho2)
		if math.Abs(am-(nu-b)) > 1e-12 || math.Abs(av-rho2) > 1e-12 {
			t.Errorf("q(a) = N(%g, %g), want N(%g, %g)", am, av, nu-b, rho2)
		}
	})
	t.Run("a delta posterior stays put", func(t *testing.T) {
		for _, s := range []auxStep{
			{varK: 0.5, sPrev: 1, sK: 0.5, b: b},
			{varK: 1, sPrev: 1, sK: 0, b: b},
		} {
			for _, a := range []float64{-2, 0, 3} {
				m, v := s.posteriorGivenAux(a, nu, 0)
				if m != nu || v != 0 {
					t.Errorf("%+v: q(w | a=%g) = N(%g, %g), want the point %g", s, a, m, v, nu)
				}
			}
		}
	})
}

func TestScheduleValidation(t *testing.T) {
	f, err := RefineConfig{K: 3, Ratio: 0.5}.Schedule()
	if err != nil || len(f) != 3 || f[0] != 0.5 || f[1] != 0.25 || f[2] != 0.25 {
		t.Errorf("geometric schedule K=3 r=0.5 = %v, %v; want [0.5 0.25 0.25]", f, err)
	}
	for _, c := range []RefineConfig{
		{Fractions: []float64{0.7, 0.2}},
		{Fractions: []float64{1.2, -0.2}},
		{Fractions: []float64{}},
		{K: -1},
		{Ratio: 1},
	} {
		if _, err := c.Schedule(); err == nil {
			t.Errorf("Schedule(%+v) = nil error, want one", c)
		}
	}
}

// fourModes is a one-weight model whose likelihood has four narrow modes
// at -1.5, -0.5, 0.5, 1.5 (a mixture of Gaussian bumps of width 0.15),
// so that with the prior N(0, 1) the posterior has four modes (Havasi et
// al. 2021, Section 2.3, with a posterior of our own).
type fourModes struct{}

var modeCenters = []float64{-1.5, -0.5, 0.5, 1.5}

const modeWidth = 0.15

func (fourModes) NumParams() int             { return 1 }
func (fourModes) NumHyper() int              { return 0 }
func (fourModes) NumRows() int               { return 1 }
func (fourModes) NewEvaluator(int) Evaluator { return fourModesEval{} }

type fourModesEval struct{}

// logLik returns log sum_m N(w | c_m, width^2) / 4 and its derivative.
func (fourModesEval) logLik(w float64) (float64, float64) {
	var mx = math.Inf(-1)
	var lp [4]float64
	for i, c := range modeCenters {
		lp[i] = logNormal(w, c, modeWidth*modeWidth) - math.Log(4)
		mx = math.Max(mx, lp[i])
	}
	var s, ds float64
	for i, c := range modeCenters {
		e := math.Exp(lp[i] - mx)
		s += e
		ds += e * -(w - c) / (modeWidth * modeWidth)
	}
	return mx + math.Log(s), ds / s
}

func (e fourModesEval) ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper []float64, rows []int, rng *rand.Rand) float64 {
	eps := rng.NormFloat64()
	l, d := e.logLik(mu[0] + sigma[0]*eps)
	dMu[0], dSigma[0] = d, d*eps
	return l
}

func (e fourModesEval) LogLik(dW, dHyper, w, hyper []float64, rows []int) float64 {
	l, d := e.logLik(w[0])
	if dW != nil {
		dW[0] = d
	}
	return l
}

// resolvedModes counts the modes that stand out in a sample: a mode c is
// resolved when the fraction of samples within one mode width of c is
// at least 2% and at least 1.5 times the fraction within one mode width
// of each trough next to it (c ± 0.5).
func resolvedModes(ws []float64) (n int, peak, trough [4]float64) {
	frac := func(c float64) float64 {
		k := 0
		for _, w := range ws {
			if math.Abs(w-c) <= modeWidth {
				k++
			}
		}
		return float64(k) / float64(len(ws))
	}
	for i, c := range modeCenters {
		peak[i] = frac(c)
		trough[i] = math.Max(frac(c-0.5), frac(c+0.5))
		if peak[i] >= 0.02 && peak[i] >= 1.5*trough[i] {
			n++
		}
	}
	return n, peak, trough
}

// TestRefinementFindsModes is the toy of Havasi et al. (2021), Section
// 2.3, on a four-mode posterior of our own. As in the paper's Figure 2b
// the ELBO's Gaussian fit is one broad bump: it has a single peak, which
// sits in the trough between the two central modes, and resolves none of
// them. Refined samples (K = 2 with p(a_1) = N(0, 0.9), p(a_2) = N(0,
// 0.1): the narrower last variance than the paper's 0.2 localizes each
// conditional posterior on one mode of width 0.15) must resolve at least
// three modes, and the mean ELBO_aux over the samples must exceed
// ELBO_init by more than two standard errors.
func TestRefinementFindsModes(t *testing.T) { forEngines(t, testRefinementFindsModes) }

func testRefinementFindsModes(t *testing.T, reference bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	lik := fourModes{}
	q0 := NewMeanField(1, 0, []float64{1}, 0.8)
	tr, err := NewTrainer(lik, TrainConfig{LR: 0.01, FinalLR: 1e-4, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), q0, 5000, rng); err != nil {
		t.Fatal(err)
	}
	elboInit := tr.ELBO(q0, 200000, rng)

	const samples = 2000
	gauss := make([]float64, samples)
	for i := range gauss {
		gauss[i] = q0.Sample(nil, rng)[0]
	}
	ref, err := NewRefiner(lik, RefineConfig{Fractions: []float64{0.9, 0.1}, Iterations: 500, LR: 0.05, Diagnostics: true, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	refined := make([]float64, samples)
	var sum, sum2 float64
	for i := range refined {
		w, st, err := ref.Refine(context.Background(), nil, q0, rng)
		if err != nil {
			t.Fatal(err)
		}
		refined[i] = w[0]
		sum += st.ELBOAux
		sum2 += st.ELBOAux * st.ELBOAux
	}
	mean := sum / samples
	se := math.Sqrt((sum2/samples - mean*mean) / samples)
	gn, gp, gt := resolvedModes(gauss)
	rn, rp, rt := resolvedModes(refined)
	t.Logf("q0 = N(%.3f, %.3f^2)", q0.Mu[0], q0.Sigma(nil)[0])
	t.Logf("Gaussian: mass at modes %.3f, in troughs beside them %.3f: %d resolved", gp, gt, gn)
	t.Logf("refined:  mass at modes %.3f, in troughs beside them %.3f: %d resolved", rp, rt, rn)
	t.Logf("ELBO_init = %.4f, ELBO_aux = %.4f ± %.4f (the paper's toy: -1.79 and >= -1.45)", elboInit, mean, se)
	if gn != 0 {
		t.Errorf("the Gaussian fit resolves %d modes, want 0 (a single broad bump)", gn)
	}
	if rn < 3 {
		t.Errorf("refined samples resolve %d modes, want at least 3", rn)
	}
	if !(mean-2*se > elboInit) {
		t.Errorf("ELBO_aux = %g ± %g, want above ELBO_init = %g", mean, se, elboInit)
	}
}

// TestRefinementCapturesCorrelation: on Bayesian linear regression with
// two strongly correlated features the exact posterior is strongly
// correlated while mean-field samples are not; refined samples recover
// the correlation more closely as the number K of auxiliary variables
// grows (Havasi et al. 2021, Section 2.4 makes the same point on eight
// schools). The geometric schedule with r = 0.7 is used for every K.
func TestRefinementCapturesCorrelation(t *testing.T) {
	forEngines(t, testRefinementCapturesCorrelation)
}

func testRefinementCapturesCorrelation(t *testing.T, reference bool) {
	if testing.Short() {
		t.Skip("statistical test with 8,000 refined samples")
	}
	rng := rand.New(rand.NewPCG(8, 9))
	lik := correlatedRegression(rng, 10, 2, 0.95, 1)
	lik.exact = true
	prior := ones(2, 1)
	_, prec := lik.exactPosterior(prior)
	exact := -prec.At(0, 1) / math.Sqrt(prec.At(0, 0)*prec.At(1, 1))

	q0 := NewMeanField(2, 0, prior, 0.5)
	tr, _ := NewTrainer(lik, TrainConfig{LR: 0.05, FinalLR: 1e-5, Reference: reference})
	if _, err := tr.Run(context.Background(), q0, 10000, rng); err != nil {
		t.Fatal(err)
	}
	const samples = 2000
	corr := map[int]float64{}
	for _, k := range []int{1, 2, 4, 8} {
		ref, err := NewRefiner(lik, RefineConfig{K: k, Ratio: 0.7, Iterations: 300, LR: 0.05, Reference: reference})
		if err != nil {
			t.Fatal(err)
		}
		var m moments
		w := make([]float64, 2)
		for range samples {
			if _, _, err := ref.Refine(context.Background(), w, q0, rng); err != nil {
				t.Fatal(err)
			}
			m.add(w[0], w[1])
		}
		corr[k] = m.corr()
	}
	var mf moments
	for range samples {
		w := q0.Sample(nil, rng)
		mf.add(w[0], w[1])
	}
	t.Logf("exact posterior correlation %.3f; mean-field samples %.3f; refined K=1 %.3f, K=2 %.3f, K=4 %.3f, K=8 %.3f",
		exact, mf.corr(), corr[1], corr[2], corr[4], corr[8])

	// Standard error of a sample correlation near zero is 1/sqrt(n) =
	// 0.022; allow 4 of them.
	const noise = 4 / 44.7
	if math.Abs(mf.corr()) > noise || math.Abs(corr[1]) > noise {
		t.Errorf("mean-field correlation %.3f, refined K=1 %.3f; want both ~0", mf.corr(), corr[1])
	}
	if math.Abs(exact) < 0.5 {
		t.Fatalf("test problem too easy: exact correlation %.3f", exact)
	}
	gap := func(k int) float64 { return math.Abs(corr[k] - exact) }
	if !(gap(2) < gap(1) && gap(4) < gap(2) && gap(8) < gap(4)+noise) {
		t.Errorf("refined correlation does not approach %.3f as K grows: %v", exact, corr)
	}
	if gap(8) > 0.5*math.Abs(exact) {
		t.Errorf("K=8 correlation %.3f is not within half of the exact %.3f", corr[8], exact)
	}
}

func TestRefinerHonoursCancellation(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	lik := correlatedRegression(rng, 10, 2, 0.5, 1)
	q0 := NewMeanField(2, 0, ones(2, 1), 0.3)
	ref, _ := NewRefiner(lik, RefineConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := ref.Refine(ctx, nil, q0, rng); err != context.Canceled {
		t.Errorf("Refine on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestRefinerAllocatesNothingPerSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	lik := correlatedRegression(rng, 100, 3, 0.5, 1)
	q0 := NewMeanField(3, 0, ones(3, 1), 0.3)
	ref, _ := NewRefiner(lik, RefineConfig{Iterations: 50, BatchSize: 8})
	w := make([]float64, 3)
	ctx := context.Background()
	if a := testing.AllocsPerRun(20, func() { ref.Refine(ctx, w, q0, rng) }); a != 0 {
		t.Errorf("Refine allocates %v times per sample, want 0", a)
	}
}

// TestRefineWithAPriorMeanIsTheShiftedProblem: refining q0 under a prior
// N(m, s^2) is refining the shifted problem, w' = w - m with the prior
// N(0, s^2), targets y - x.m and q0's means less m, and adding m back
// (Refine starts Appendix A's sum of auxiliary variables at b_0 = m).
// On the exact linear-Gaussian model and the reference engine, with the
// same random stream, the two samples agree to rounding.
func TestRefineWithAPriorMeanIsTheShiftedProblem(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lik := correlatedRegression(rng, 20, 3, 0.5, 0.5)
	lik.exact = true
	m := []float64{0.8, -1.2, 0.3}
	shifted := &linearGaussian{noiseVar: lik.noiseVar, exact: true}
	for i, x := range lik.x {
		var f float64
		for j := range x {
			f += x[j] * m[j]
		}
		shifted.x = append(shifted.x, x)
		shifted.y = append(shifted.y, lik.y[i]-f)
	}
	q0 := NewMeanField(3, 0, []float64{0.7, 1.1, 0.4}, 0.2)
	q0.PriorMean = slices.Clone(m)
	copy(q0.Mu, []float64{1.1, -0.9, 0.1})
	q0s := q0.Clone()
	q0s.PriorMean = nil
	for j := range q0s.Mu {
		q0s.Mu[j] -= m[j]
	}
	cfg := RefineConfig{K: 3, Ratio: 0.6, Iterations: 200, LR: 0.02, Reference: true}
	r1, err := NewRefiner(lik, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := NewRefiner(shifted, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for s := range 5 {
		w1, _, err := r1.Refine(context.Background(), nil, q0, rand.New(rand.NewPCG(uint64(s), 1)))
		if err != nil {
			t.Fatal(err)
		}
		w2, _, err := r2.Refine(context.Background(), nil, q0s, rand.New(rand.NewPCG(uint64(s), 1)))
		if err != nil {
			t.Fatal(err)
		}
		for j := range w1 {
			if d := math.Abs(w1[j] - (w2[j] + m[j])); d > 1e-9 {
				t.Errorf("sample %d, weight %d: %.12f under the prior mean, %.12f shifted back", s, j, w1[j], w2[j]+m[j])
			}
		}
	}
}
