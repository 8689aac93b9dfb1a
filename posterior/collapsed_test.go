package posterior

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// randomQ returns one weight's q = N(mu, sigma^2) and prior variance s2
// (gamma of Eq. 9, the hyperprior's mean variance of Eq. 10).
func randomQ(rng *rand.Rand) (mu, sigma, s2 float64) {
	mu = 2 * rng.NormFloat64()
	sigma = math.Exp(-3 + 4*rng.Float64())
	s2 = math.Exp(-2 + 3*rng.Float64())
	return
}

// uncollapsedMean is weight j's share of the bound of Eq. 3 (Tomczak et al. 2021)
// for the hierarchical model of Eq. 9, w ~ N(mu_p, gamma), mu_p ~ N(0,
// alpha), with q(w) = N(mu, sigma^2) and any q(mu_p) = N(m, v), less the
// data term: E[log p(w | mu_p)] + E[log p(mu_p)] + H[q(w)] + H[q(mu_p)].
func uncollapsedMean(mu, sigma, gamma, alpha, m, v float64) float64 {
	const l2pi = 1.8378770664093453 // log(2 pi)
	s2 := sigma * sigma
	return -0.5*(l2pi+math.Log(gamma)) - (s2+(mu-m)*(mu-m)+v)/(2*gamma) -
		0.5*(l2pi+math.Log(alpha)) - (m*m+v)/(2*alpha) +
		0.5*(l2pi+1+math.Log(s2)) + 0.5*(l2pi+1+math.Log(v))
}

// digamma is psi(x) for x > 0 by recurrence to x >= 8 and the asymptotic
// series (error below 1e-12 there).
func digamma(x float64) float64 {
	var r float64
	for x < 8 {
		r -= 1 / x
		x++
	}
	f := 1 / (x * x)
	return r + math.Log(x) - 0.5/x - f*(1.0/12-f*(1.0/120-f*(1.0/252-f*(1.0/240-f/132))))
}

// uncollapsedMeanVar is weight j's share of Eq. 3's bound for the model of
// Eq. 10, w ~ N(mu_p, 1/tau), mu_p ~ N(0, 1/(t tau)), tau ~ Gamma(a, b),
// with q(w) = N(mu, sigma^2), q(mu_p | tau) = N(m, 1/(k tau)) and q(tau) =
// Gamma(qa, qb), less the data term.
func uncollapsedMeanVar(mu, sigma, a, b, t, m, k, qa, qb float64) float64 {
	const l2pi = 1.8378770664093453
	s2 := sigma * sigma
	eTau, eLogTau := qa/qb, digamma(qa)-math.Log(qb)
	lgA, _ := math.Lgamma(a)
	lgQA, _ := math.Lgamma(qa)
	// E[tau (w - mu_p)^2] = E[tau] (sigma^2 + (mu - m)^2) + 1/k.
	logW := 0.5*eLogTau - 0.5*l2pi - 0.5*(eTau*(s2+(mu-m)*(mu-m))+1/k)
	// E[t tau mu_p^2] = t (E[tau] m^2 + 1/k).
	logMu := 0.5*math.Log(t) + 0.5*eLogTau - 0.5*l2pi - 0.5*t*(eTau*m*m+1/k)
	logTau := a*math.Log(b) - lgA + (a-1)*eLogTau - b*eTau
	hW := 0.5 * (l2pi + 1 + math.Log(s2))
	hMu := 0.5*(l2pi+1-math.Log(k)) - 0.5*eLogTau
	hTau := qa - math.Log(qb) + lgQA + (1-qa)*digamma(qa)
	return logW + logMu + logTau + hW + hMu + hTau
}

// TestCollapsedBoundIsAtLeastTheUncollapsed: at random q the collapsed
// bounds (Eqs. 9 and 10) are at least the bound of Eq. 3 with any other
// q over the prior's parameters (Tomczak et al. 2021, Eq. 4), the fixed-prior ELBO
// being its limit as q(mu_p) narrows to a point. Eq. 9 at alpha_reg = 1 is
// the ELBO with the prior N(0, gamma) exactly.
//
// The collapsed bound is not at least the ELBO with the fixed prior
// N(0, gamma) it replaces: that ELBO belongs to another model (alpha = 0),
// and at mu = 0 Eq. 9 is below it by -1/2 log alpha_reg per weight, the
// Occam term. Both are checked below.
func TestCollapsedBoundIsAtLeastTheUncollapsed(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 9))
	for i := range 2000 {
		mu, sigma, s2 := randomQ(rng)
		reg := math.Exp(-5 * rng.Float64()) // (0.0067, 1]
		cm := newCollapsed(BoundCollapsedMean, reg, 1)
		// Eq. 9: alpha from alpha_reg = gamma/(gamma + alpha).
		alpha := s2 * (1 - reg) / reg
		m, v := mu+rng.NormFloat64(), math.Exp(-4+6*rng.Float64())
		if alpha > 0 {
			if got, other := -cm.penalty(mu, sigma, s2), uncollapsedMean(mu, sigma, s2, alpha, m, v); got < other-1e-9*math.Abs(other) {
				t.Fatalf("case %d Eq. 9: collapsed %.12g below uncollapsed %.12g (mu %g sigma %g gamma %g alpha_reg %g, q(mu_p) = N(%g, %g))", i, got, other, mu, sigma, s2, reg, m, v)
			}
		}
		cmv := newCollapsed(BoundCollapsedMeanVar, reg, math.Exp(-1+3*rng.Float64()))
		a, b, tt := cmv.shape, cmv.shape*s2, reg/(1-reg) // delta = t/(1 + t)
		if reg < 1 {
			k, qa, qb := math.Exp(-2+4*rng.Float64()), math.Exp(-1+4*rng.Float64()), math.Exp(-2+4*rng.Float64())
			if got, other := -cmv.penalty(mu, sigma, s2), uncollapsedMeanVar(mu, sigma, a, b, tt, m, k, qa, qb); got < other-1e-9*math.Abs(other) {
				t.Fatalf("case %d Eq. 10: collapsed %.12g below uncollapsed %.12g", i, got, other)
			}
		}
	}
	// alpha_reg = 1 is the ELBO with the prior N(0, gamma); below 1 the
	// bound at mu = 0 falls short of that ELBO by -1/2 log alpha_reg.
	q := NewMeanField(5, 0, []float64{1, 0.3, 2, 0.7, 1.5}, 0.4)
	copy(q.Mu, []float64{0.3, -1, 2, 0, 0.01})
	if got, want := newCollapsed(BoundCollapsedMean, 1, 1).sum(q), q.KL(); math.Abs(got-want) > 1e-12*math.Abs(want) {
		t.Errorf("Eq. 9 at alpha_reg = 1: penalty %.15g, KL %.15g", got, want)
	}
	one := NewMeanField(1, 0, []float64{1}, 0.5)
	if gap := newCollapsed(BoundCollapsedMean, 0.075, 1).sum(one) - one.KL(); math.Abs(gap+0.5*math.Log(0.075)) > 1e-12 {
		t.Errorf("Eq. 9 at mu = 0: penalty - KL = %.15g, want -1/2 log 0.075 = %.15g", gap, -0.5*math.Log(0.075))
	}
}

// goldenMax maximizes a unimodal f on [lo, hi] to 1e-10 of the interval.
func goldenMax(f func(float64) float64, lo, hi float64) float64 {
	const r = 0.6180339887498949
	a, b := lo, hi
	c, d := b-r*(b-a), a+r*(b-a)
	fc, fd := f(c), f(d)
	for b-a > 1e-10*(hi-lo) {
		if fc > fd {
			b, d, fd = d, c, fc
			c = b - r*(b-a)
			fc = f(c)
		} else {
			a, c, fc = c, d, fd
			d = a + r*(b-a)
			fd = f(d)
		}
	}
	return (a + b) / 2
}

// TestCollapsedPriorIsTheOptimum checks the learned priors of both bounds
// against direct numerical work on the uncollapsed bound. Eq. 9: a
// golden-section maximization of Eq. 3 over q(mu_p) = N(m, v) (separable
// in m and log v) finds m* = CollapsedPrior's mean and a maximum equal to
// the collapsed bound. Eq. 10: the optimal q(mu_p, tau) is proportional to
// exp(E_q[log p(w | mu_p, tau)]) p(mu_p | tau) p(tau); a 2-D quadrature of
// it gives the collapsed bound (log of its mass plus H[q(w)]), E[mu_p] and
// E[tau], which must equal CollapsedPrior's mean and 1/variance.
func TestCollapsedPriorIsTheOptimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 10))
	const n = 6
	q := NewMeanField(n, 0, ones(n, 1), 1)
	for j := range n {
		mu, sigma, s2 := randomQ(rng)
		q.Mu[j], q.Rho[j], q.PriorVar[j] = mu, SoftplusInv(sigma), s2
	}
	mean, variance := make([]float64, n), make([]float64, n)

	tr, err := NewTrainer(noData{n}, TrainConfig{Reference: true, Bound: BoundCollapsedMean, CollapsedReg: 0.2})
	if err != nil {
		t.Fatal(err)
	}
	tr.CollapsedPrior(q, mean, variance)
	for j, mu := range q.Mu {
		sigma, gamma := Softplus(q.Rho[j]), q.PriorVar[j]
		alpha := gamma * (1 - 0.2) / 0.2
		vOpt := alpha * gamma / (alpha + gamma)
		m := goldenMax(func(m float64) float64 { return uncollapsedMean(mu, sigma, gamma, alpha, m, vOpt) }, -20, 20)
		lv := goldenMax(func(lv float64) float64 { return uncollapsedMean(mu, sigma, gamma, alpha, m, math.Exp(lv)) }, -20, 10)
		if math.Abs(m-mean[j]) > 1e-7*(1+math.Abs(m)) {
			t.Errorf("Eq. 9 weight %d (mu %g): numerical optimum m = %.10g, learned prior mean %.10g", j, mu, m, mean[j])
		}
		if variance[j] != gamma {
			t.Errorf("Eq. 9 weight %d: learned prior variance %g, want the fixed gamma %g", j, variance[j], gamma)
		}
		best := uncollapsedMean(mu, sigma, gamma, alpha, m, math.Exp(lv))
		if got := -tr.col.penalty(mu, sigma, gamma); math.Abs(got-best) > 1e-9*(1+math.Abs(best)) {
			t.Errorf("Eq. 9 weight %d: collapsed %.12g, numerical maximum of Eq. 3 %.12g", j, got, best)
		}
	}

	const delta, shape = 0.3, 1.5
	tr, err = NewTrainer(noData{n}, TrainConfig{Reference: true, Bound: BoundCollapsedMeanVar, CollapsedReg: delta, CollapsedShape: shape})
	if err != nil {
		t.Fatal(err)
	}
	tr.CollapsedPrior(q, mean, variance)
	tt := delta / (1 - delta)
	for j, mu := range q.Mu {
		sigma := Softplus(q.Rho[j])
		b := shape * q.PriorVar[j]
		lgA, _ := math.Lgamma(shape)
		// log of exp(E_q log N(w | mu_p, 1/tau)) N(mu_p | 0, 1/(t tau)) Gamma(tau | a, b)
		logf := func(mp, tau float64) float64 {
			return 0.5*math.Log(tau/(2*math.Pi)) - 0.5*tau*(sigma*sigma+(mu-mp)*(mu-mp)) +
				0.5*math.Log(tt*tau/(2*math.Pi)) - 0.5*tt*tau*mp*mp +
				shape*math.Log(b) - lgA + (shape-1)*math.Log(tau) - b*tau
		}
		// tau = exp(u) over the bulk of q*(tau) = Gamma(a + 1/2, rate);
		// mu_p over +-12 standard deviations of q*(mu_p | tau).
		rate := b + 0.5*(delta*mu*mu+sigma*sigma)
		uc := math.Log((shape + 0.5) / rate)
		const nu, nm = 1200, 400
		var z, zm, zt float64
		for iu := range nu {
			u := uc - 14 + 20*(float64(iu)+0.5)/nu
			tau := math.Exp(u)
			sd := 1 / math.Sqrt((1+tt)*tau)
			c := mu / (1 + tt)
			for im := range nm {
				mp := c + sd*(-12+24*(float64(im)+0.5)/nm)
				w := math.Exp(logf(mp, tau)) * tau * (20.0 / nu) * (24 * sd / nm) // d tau = tau du
				z += w
				zm += w * mp
				zt += w * tau
			}
		}
		got := -tr.col.penalty(mu, sigma, q.PriorVar[j])
		want := math.Log(z) + 0.5*math.Log(2*math.Pi*math.E*sigma*sigma)
		if math.Abs(got-want) > 1e-6*(1+math.Abs(want)) {
			t.Errorf("Eq. 10 weight %d: collapsed %.10g, quadrature %.10g", j, got, want)
		}
		if em := zm / z; math.Abs(em-mean[j]) > 1e-6*(1+math.Abs(em)) {
			t.Errorf("Eq. 10 weight %d: E[mu_p] by quadrature %.10g, learned prior mean %.10g", j, em, mean[j])
		}
		if et := zt / z; math.Abs(et*variance[j]-1) > 1e-6 {
			t.Errorf("Eq. 10 weight %d: E[tau] by quadrature %.10g, learned prior precision %.10g", j, et, 1/variance[j])
		}
	}
}

// TestCollapsedGradient checks the reference trainer's gradient of
// -bound on a dataset with no rows, the gradient of Penalty in mu and
// rho, against central finite differences of Penalty, for both bounds.
func TestCollapsedGradient(t *testing.T) {
	for _, b := range []Bound{BoundCollapsedMean, BoundCollapsedMeanVar} {
		q := NewMeanField(4, 0, []float64{1, 0.3, 2, 0.7}, 1)
		copy(q.Mu, []float64{0.3, -1, 2, 0})
		copy(q.Rho, []float64{-2, 0.1, 1.5, -0.5})
		tr, err := NewTrainer(noData{4}, TrainConfig{Reference: true, Bound: b, CollapsedReg: 0.3, CollapsedShape: 2})
		if err != nil {
			t.Fatal(err)
		}
		q0 := q.Clone()
		tr.step(q, rand.New(rand.NewPCG(1, 1)))
		const h = 1e-6
		for j := range 8 {
			p := q0.Params()
			old := p[j]
			p[j] = old + h
			up := tr.Penalty(q0)
			p[j] = old - h
			down := tr.Penalty(q0)
			p[j] = old
			fd := (up - down) / (2 * h)
			if rel := math.Abs(fd-tr.grad[j]) / math.Max(1e-8, math.Abs(fd)+math.Abs(tr.grad[j])); rel > 1e-7 {
				t.Errorf("%s: dPenalty/dparam[%d] = %g, finite difference %g", b, j, tr.grad[j], fd)
			}
		}
	}
}

// TestCollapsedRunReportsTheBound: Run's LastELBO under a collapsed bound
// is the data term less Penalty, the collapsed bound: with no rows it is
// -Penalty at the final q exactly.
func TestCollapsedRunReportsTheBound(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		for _, b := range []Bound{BoundCollapsedMean, BoundCollapsedMeanVar} {
			q := NewMeanField(3, 0, []float64{1, 0.5, 2}, 0.3)
			copy(q.Mu, []float64{0.5, -1, 2})
			tr, err := NewTrainer(noData{3}, TrainConfig{Reference: reference, Bound: b, LR: 0.05})
			if err != nil {
				t.Fatal(err)
			}
			st, err := tr.Run(t.Context(), q, 50, rand.New(rand.NewPCG(2, 2)))
			if err != nil {
				t.Fatal(err)
			}
			if want := -tr.Penalty(q); st.LastELBO != want || want == -q.KL() {
				t.Errorf("%s: LastELBO %.15g, want -Penalty %.15g (KL %.15g)", b, st.LastELBO, want, q.KL())
			}
		}
	})
}

// TestInvalidBoundConfigs: NewTrainer refuses an unknown bound, a
// collapsed bound with a point estimate and a collapsed regularization
// or hyperprior shape out of range. (bandit's
// TestSettingsMapOntoTheTrainer checks the bounds' names.)
func TestInvalidBoundConfigs(t *testing.T) {
	lik := noData{1}
	for _, c := range []TrainConfig{{Bound: 3}, {Bound: BoundCollapsedMean, Point: true}, {CollapsedReg: 1.5}, {CollapsedReg: -0.1}, {CollapsedShape: -1}, {CollapsedReg: math.NaN()}} {
		if _, err := NewTrainer(lik, c); err == nil {
			t.Errorf("NewTrainer(%+v) = nil error, want one", c)
		}
	}
}

// TestCollapsedFastMatchesReference runs 40 iterations of each collapsed
// bound on both engines on a small linear regression, where Adam's later
// steps depend on the ratio of the data and prior gradients, not only on
// their signs (TestFastTrainerStepMatchesReference takes one step). The
// parameters must agree to float32 accuracy and differ from the ELBO's
// trajectory. (Without data Eq. 9's mean gradient is alpha_reg times the
// ELBO's and Adam, invariant to a gradient's scale, would not tell them
// apart.)
func TestCollapsedFastMatchesReference(t *testing.T) {
	const n = 8
	rng := rand.New(rand.NewPCG(13, 11))
	lik := correlatedRegression(rng, 40, n, 0.5, 0.5)
	q0 := NewMeanField(n, 0, ones(n, 1), 1)
	for j := range n {
		mu, sigma, s2 := randomQ(rng)
		q0.Mu[j], q0.Rho[j], q0.PriorVar[j] = mu, SoftplusInv(sigma), s2
	}
	run := func(b Bound, reference bool) *MeanField {
		q := q0.Clone()
		tr, err := NewTrainer(lik, TrainConfig{Reference: reference, Bound: b, LR: 0.02, CollapsedReg: 0.2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(t.Context(), q, 40, rand.New(rand.NewPCG(1, 2))); err != nil {
			t.Fatal(err)
		}
		return q
	}
	elbo := run(BoundELBO, true)
	for _, b := range []Bound{BoundCollapsedMean, BoundCollapsedMeanVar} {
		ref, fast := run(b, true), run(b, false)
		pr, pf, pe := ref.Params(), fast.Params(), elbo.Params()
		worst, apart := 0.0, 0.0
		for j := range pr {
			d := math.Abs(pr[j] - pf[j])
			worst = math.Max(worst, d)
			apart = math.Max(apart, math.Abs(pr[j]-pe[j]))
			if d > 2e-5*(1+math.Abs(pr[j])) {
				t.Errorf("%s param %d: fast %.9g, reference %.9g", b, j, pf[j], pr[j])
			}
		}
		if apart < 0.01 {
			t.Errorf("%s: trajectory within %g of the ELBO's, want it to differ", b, apart)
		}
		t.Logf("%s: worst fast-reference difference %.3g; largest difference from the ELBO's trajectory %.3g", b, worst, apart)
	}
}

// TestCollapsedMeanIsBayesianLinearRegression trains CM-MF-VI (Eq. 9) on
// Bayesian linear regression, where it has a closed-form optimum: the
// bound is E_q[log p(y | X w)] - sum_j [(sigma_j^2 + alpha_reg mu_j^2) /
// (2 gamma) - log sigma_j] + const, so mu* is the exact posterior mean
// under the prior N(0, gamma/alpha_reg) = N(0, gamma + alpha), the
// marginal prior of the hierarchical model (Bishop 2006, Eqs.
// 3.50-3.51), and sigma_j*^2 = 1/Lambda_jj with Lambda the posterior
// precision under the prior N(0, gamma). The trainer must reach both, its
// reported bound must equal Eq. 9 at the closed-form optimum, and that
// must lie below the exact log evidence log N(y | 0, s2 I + (gamma +
// alpha) X X^T).
func TestCollapsedMeanIsBayesianLinearRegression(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		rng := rand.New(rand.NewPCG(7, 8))
		lik := correlatedRegression(rng, 40, 3, 0.8, 0.25)
		lik.exact = true
		const reg = 0.075
		gamma := []float64{1, 1, 2}
		marg := make([]float64, 3)
		for j, g := range gamma {
			marg[j] = g / reg
		}
		wantMean, _ := lik.exactPosterior(marg)
		_, prec := lik.exactPosterior(gamma)

		q := NewMeanField(3, 0, gamma, 0.5)
		tr, err := NewTrainer(lik, TrainConfig{BatchSize: 64, LR: 0.05, FinalLR: 1e-5, Reference: reference, Bound: BoundCollapsedMean, CollapsedReg: reg})
		if err != nil {
			t.Fatal(err)
		}
		st, err := tr.Run(t.Context(), q, 20000, rng)
		if err != nil {
			t.Fatal(err)
		}
		sig := q.Sigma(nil)
		for j := range 3 {
			if rel := math.Abs(q.Mu[j]-wantMean[j]) / math.Abs(wantMean[j]); rel > 1e-5 {
				t.Errorf("mean[%d] = %.9g, want %.9g (rel err %.2g)", j, q.Mu[j], wantMean[j], rel)
			}
			if wantVar := 1 / prec.At(j, j); math.Abs(sig[j]*sig[j]-wantVar)/wantVar > 1e-5 {
				t.Errorf("var[%d] = %.9g, want %.9g", j, sig[j]*sig[j], wantVar)
			}
		}

		// Eq. 9 at the closed-form optimum.
		opt := NewMeanField(3, 0, gamma, 1)
		copy(opt.Mu, wantMean)
		for j := range 3 {
			opt.Rho[j] = SoftplusInv(math.Sqrt(1 / prec.At(j, j)))
		}
		want := tr.ELBO(opt, 1, rng) // exact data term
		if got := tr.ELBO(q, 1, rng); math.Abs(got-want) > 1e-7*math.Abs(want) {
			t.Errorf("bound at the trained q %.10g, at the closed-form optimum %.10g", got, want)
		}
		if math.Abs(st.LastELBO-want) > 1e-6*math.Abs(want) {
			t.Errorf("Run reports %.10g, the closed-form optimum of Eq. 9 is %.10g", st.LastELBO, want)
		}
		// log N(y | 0, s2 I + X diag(gamma + alpha) X^T)
		n := len(lik.y)
		cov := mat.NewSymDense(n, nil)
		for a := range n {
			for b := a; b < n; b++ {
				var c float64
				for j := range 3 {
					c += lik.x[a][j] * marg[j] * lik.x[b][j]
				}
				if a == b {
					c += lik.noiseVar
				}
				cov.SetSym(a, b, c)
			}
		}
		var ch mat.Cholesky
		if !ch.Factorize(cov) {
			t.Fatal("evidence covariance not positive definite")
		}
		var alpha mat.VecDense
		if err := ch.SolveVecTo(&alpha, mat.NewVecDense(n, lik.y)); err != nil {
			t.Fatal(err)
		}
		logEv := -0.5*(float64(n)*math.Log(2*math.Pi)+ch.LogDet()) - 0.5*mat.Dot(&alpha, mat.NewVecDense(n, lik.y))
		if want > logEv {
			t.Errorf("Eq. 9 at its optimum %.10g above the exact log evidence %.10g", want, logEv)
		}
		t.Logf("Eq. 9 at its optimum %.6f, exact log evidence with the marginal prior %.6f", want, logEv)
	})
}

// TestCollapsedMeanVarStationaryOnLinearRegression trains CMV-MF-VI
// (Eq. 10) on Bayesian linear regression, where its optimum has no closed
// form but satisfies, per weight j with B_j = b + delta mu_j^2/2 +
// sigma_j^2/2 and c = a + 1/2, the stationarity conditions of Eq. 10
// (the learned prior's precision c/B_j in the place of 1/gamma):
//
//	X_j^T (y - X mu) / s2 = delta c mu_j / B_j
//	1/sigma_j^2 = ||X_j||^2 / s2 + c / B_j
//
// computed here from the data directly, not from the trainer.
func TestCollapsedMeanVarStationaryOnLinearRegression(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		rng := rand.New(rand.NewPCG(7, 9))
		lik := correlatedRegression(rng, 40, 3, 0.8, 0.25)
		lik.exact = true
		const delta, shape = 0.3, 2.0
		gamma := []float64{1, 1, 2}
		q := NewMeanField(3, 0, gamma, 0.5)
		tr, err := NewTrainer(lik, TrainConfig{BatchSize: 64, LR: 0.05, FinalLR: 1e-5, Reference: reference,
			Bound: BoundCollapsedMeanVar, CollapsedReg: delta, CollapsedShape: shape})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(t.Context(), q, 20000, rng); err != nil {
			t.Fatal(err)
		}
		sig := q.Sigma(nil)
		for j := range 3 {
			var gmu, xx float64
			for i, x := range lik.x {
				f := 0.0
				for k := range 3 {
					f += x[k] * q.Mu[k]
				}
				gmu += x[j] * (lik.y[i] - f) / lik.noiseVar
				xx += x[j] * x[j] / lik.noiseVar
			}
			c := shape + 0.5
			bj := shape*gamma[j] + 0.5*(delta*q.Mu[j]*q.Mu[j]+sig[j]*sig[j])
			if want := delta * c * q.Mu[j] / bj; math.Abs(gmu-want) > 1e-4*(1+math.Abs(want)) {
				t.Errorf("weight %d: X^T(y - X mu)/s2 = %.9g, delta c mu/B = %.9g", j, gmu, want)
			}
			if want := 1 / (xx + c/bj); math.Abs(sig[j]*sig[j]-want) > 1e-5*want {
				t.Errorf("weight %d: sigma^2 = %.9g, 1/(||x||^2/s2 + c/B) = %.9g", j, sig[j]*sig[j], want)
			}
		}
	})
}

// TestCollapsedMeanIsTheELBOOfItsMarginalPrior: Eq. 9's model with mu_p
// integrated out is the prior N(0, gamma/alpha_reg) (MarginalPriorVar),
// and at random q the collapsed bound's per-weight penalty is the KL to
// that prior plus (1 - alpha_reg) sigma^2/(2 gamma): the collapsed bound
// is the ELBO of the marginal model less that, so never above it, and
// equal at alpha_reg = 1. The marginal variance is also checked by Monte
// Carlo over the hierarchical model.
func TestCollapsedMeanIsTheELBOOfItsMarginalPrior(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 1))
	for range 1000 {
		mu, sigma, gamma := randomQ(rng)
		reg := 0.01 + 0.99*rng.Float64()
		v, ok := BoundCollapsedMean.MarginalPriorVar(gamma, reg)
		if !ok || math.Abs(v-gamma/reg) > 1e-12*v {
			t.Fatalf("MarginalPriorVar(%g, %g) = %g, %v; want %g", gamma, reg, v, ok, gamma/reg)
		}
		kl := 0.5 * ((sigma*sigma+mu*mu)/v - 1 + math.Log(v/(sigma*sigma)))
		pen := newCollapsed(BoundCollapsedMean, reg, 0).penalty(mu, sigma, gamma)
		want := kl + (1-reg)*sigma*sigma/(2*gamma)
		if math.Abs(pen-want) > 1e-9*(1+math.Abs(want)) {
			t.Fatalf("mu %g sigma %g gamma %g reg %g: penalty %g, KL to N(0, gamma/reg) + (1-reg) sigma^2/(2 gamma) = %g", mu, sigma, gamma, reg, pen, want)
		}
	}
	// w = mu_p + e, mu_p ~ N(0, alpha), e ~ N(0, gamma): Var w = gamma/reg.
	const gamma, reg, n = 0.7, 0.075, 400000
	alpha := gamma * (1 - reg) / reg
	var s2 float64
	for range n {
		w := math.Sqrt(alpha)*rng.NormFloat64() + math.Sqrt(gamma)*rng.NormFloat64()
		s2 += w * w
	}
	v, _ := BoundCollapsedMean.MarginalPriorVar(gamma, reg)
	if got := s2 / n; math.Abs(got-v) > 4*v*math.Sqrt(2.0/n) {
		t.Errorf("Monte Carlo variance of w %g, MarginalPriorVar %g", got, v)
	}
	if _, ok := BoundCollapsedMeanVar.MarginalPriorVar(1, 0.075); ok {
		t.Error("Eq. 10's marginal prior reported Gaussian")
	}
	if v, ok := BoundELBO.MarginalPriorVar(2, 0.075); v != 2 || !ok {
		t.Errorf("the ELBO's marginal prior variance %g, %v; want its own 2", v, ok)
	}
}
