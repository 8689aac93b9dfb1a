package nn

import "math"

// Reparameterized importance sampling (RIS; Long, Tian, Zhang & Xu 2024,
// "Reparameterized Importance Sampling for Robust Variational Bayesian
// Neural Networks", ICML) propagates through each hidden layer
// an estimate of its output's first moment,
//
//	z~_l = E_{w_l ~ q_l}[relu(w_l z~_{l-1})]                    (Sec. 3),
//
// by importance sampling from a proposal r close to the optimal one,
//
//	z~_l ≈ 1/M sum_m q(w^m)/r(w^m) relu(w^m z~_{l-1}),  w^m ~ r (Eq. 8),
//	r*(w) ∝ |f(w)| q(w),  f(w) = relu(w z~_{l-1})                (Eq. 9),
//
// instead of passing on one sample of the layer's output as local
// reparameterization does. Given the previous layer's estimate z~_{l-1}
// (the contexts for the first layer), f depends on a unit's weight row w_j
// only through its pre-activation a_j = w_j z~_{l-1} + b_j, which under q is
// exactly
// N(m_j, v_j) with m = z~ mu_W^T + mu_b and v = (z~∘z~)(sigma_W∘sigma_W)^T
// + sigma_b∘sigma_b (Appendix A: the bias is one more weight on a constant
// input). We therefore sample each unit's pre-activation, not its weight
// row: the estimate has the same expectation, and its importance weight
// is a ratio of two univariate densities instead of a product of In+1 of
// them, whose variance would grow exponentially with the width.
//
// Proposal. Eq. 10 takes r Gaussian with the mean and variance of r*,
// which Eqs. 11-12 (with the normalizer E_q|f| that Eq. 9 implies) and the
// second-order expansion of Eqs. 13-15 approximate. For a ReLU unit that
// expansion is exact away from the kink (the integrands are polynomials
// there) and degenerate across it (h = h'' = 0 for m < 0), so we take the
// moments of r*(a) ∝ relu(a) N(a; m, v) exactly: with s = sqrt(v),
// t = m/s, Phi and phi the standard normal CDF and density,
//
//	Z_k = E_q[relu(a) a^k] / s^(k+1):
//	Z_0 = t Phi + phi,  Z_1 = (t^2+1) Phi + t phi,  Z_2 = (t^3+3t) Phi + (t^2+2) phi,
//	mu^ = m + s nu,   nu = Z_1/Z_0 - t = Phi/Z_0,
//	sigma^2^ = v tau_m^2,  tau_m^2 = Z_2/Z_0 - (Z_1/Z_0)^2,
//
// which for t >> 1 reduce to Eq. 15's mu^ = m + v/m, sigma^2^ = v - v^2/m^2.
// tau_m^2 is below 1 for every t, and an importance sampler whose Gaussian
// proposal has less than half the target's variance has infinite
// variance (the ratio q^2/r is not integrable), which tau_m^2 reaches for
// t below about 0.3; the proposal's tau^2 is therefore tau_m^2 floored
// smoothly at risTau2Floor (risSmoothFloor). Evaluating Phi costs more
// than the rest of a unit's work, so the proposal is read from a table of
// cubic Hermite interpolation (risLookup); any proposal leaves the
// estimate unbiased, as long as the weights below use the same one.
//
// Reparameterization (Proposition 2, Eq. 17). The proposal sample is the
// reparameterization of q with shifted, scaled noise,
//
//	a = m + s eps,  eps = nu + tau xi,  xi ~ N(0, 1)  (Algorithm 1, lines 4-5),
//	gamma = q(a)/r(a) = N(eps; 0, 1) / N(eps; nu, tau^2) = tau exp((xi^2 - eps^2)/2)  (line 6),
//	z~ = 1/M sum_m gamma_m relu(a_m)  (line 9).
//
// Gradient. Section 4.2 holds (nu, tau) fixed in the backward pass ("RIS:
// dw/dmu = I, dw/dsigma = eps"): da/dm = 1, da/ds = eps, gamma constant.
// That gradient is unbiased for the moment's (E[gamma 1[a>0] (1, eps)] =
// d/d(m, s) E_q[relu(a)]), but gamma's spread (about 1/t for t >> 1) then
// multiplies every unit's backward factor, where local reparameterization
// has exactly 1[a>0]. Differentiating the sampled estimate through
// (nu, tau) = (nu, tau)(m/s) as well is unbiased too, since the estimate's
// expectation does not depend on the proposal, and the proposal's terms
// cancel most of that spread (for t >> 1 the estimate is
// m + (v/m)(1 - xi^2) + ..., so its derivative in m is 1 + O(1/t^2)). On
// the paper's bandit network it has 6-10 times less gradient variance than
// the fixed proposal (bench/ris.md), so it is the default;
// Options.RISFixedProposal selects Section 4.2's gradient.
//
// Only hidden layers propagate moments: the linear output layer, whose
// "non-linearity" is the Gaussian likelihood, is sampled by local
// reparameterization from its Gaussian marginal given z~_{L-1}, so the
// expected log-likelihood keeps its expectation over the output layer.
// The objective RIS estimates is therefore the paper's, not the ELBO's
// expected log-likelihood: the data term of the network whose hidden
// layers output their means, sum_i E_{q_L}[log p(y_i | W_L z~_{L-1}(x_i))],
// in which the hidden layers' variances act only through the means they
// shift: nothing in it penalizes how far a weight sample's predictions
// stray from the means' (bench/ris-mushroom.md: mean-field Thompson
// sampling on a RIS-trained posterior passed almost always on the
// mushroom bandit). nn's tests check the estimate of every z~_l against brute-force
// Monte Carlo over the weights and against the closed form
// E_q[relu(a)] = s (t Phi(t) + phi(t)).

// risTau2Floor is the floor of the proposal variance tau^2, as a fraction
// of the pre-activation's variance v: importance weights q/r with a
// Gaussian proposal of variance tau^2 v have a finite second moment only
// for tau^2 > 1/2. 0.6 gave the lowest variance of the moment estimate
// among 0.6, 0.7, 0.8 and 1 at every t = m/s in [-3, 3] (numerical
// quadrature of E_r[(gamma relu(a))^2]; at t = 0 the relative variance is
// 0.10, against 2.14 for one plain sample of relu(a)). risTau2Width is the
// width of the smooth floor: the proposal's derivative in t must be
// continuous for the gradient through it.
const (
	risTau2Floor = 0.6
	risTau2Width = 0.1
)

// risSmoothFloor returns the smooth maximum of x and risTau2Floor,
//
//	f(x) = F + (d + sqrt(d^2 + w^2))/2,  d = x - F,
//
// and its derivative: within w^2/(4|d|) of max(x, F).
func risSmoothFloor(x float64) (f, df float64) {
	d := x - risTau2Floor
	q := math.Sqrt(d*d + risTau2Width*risTau2Width)
	return risTau2Floor + (d+q)/2, (1 + d/q) / 2
}

// risProposal returns the shift nu and scale tau of the RIS noise
// distribution eps ~ N(nu, tau^2) of a unit whose pre-activation is
// N(m, v) under q, t = m/sqrt(v), and their derivatives in t: the
// standardized mean of r*(a) ∝ relu(a) N(a; m, v) and the square root of
// its standardized variance floored by risSmoothFloor (see the comment
// above). With Z_{-1} = Phi the Z_k satisfy dZ_k/dt = (k+1) Z_{k-1}, so
//
//	nu' = phi/Z_0 - nu^2,  (Z_1/Z_0)' = 2 - (Z_1/Z_0) nu,  (Z_2/Z_0)' = 3 Z_1/Z_0 - (Z_2/Z_0) nu.
//
// For t < 0 everything is computed scaled by 1/phi(t), through the Mills
// ratio Phi(t)/phi(t) (its asymptotic series below -25), so that nothing
// underflows; below -50 and above 25 the leading terms of the expansions
// in 1/t are used.
func risProposal(t float64) (nu, tau, dnu, dtau float64) {
	var m1, r2, dm1, dr2, tau2, dtau2 float64
	switch {
	case t > 25:
		// Phi = 1, phi = 0 (below 1e-136 of the other terms):
		// Z_0 = t, Z_1 = t^2 + 1, Z_2 = t^3 + 3t.
		nu, dnu = 1/t, -1/(t*t)
		tau2, dtau2 = 1-1/(t*t), 2/(t*t*t)
	case t < -50:
		// With x = -t: nu = x + 2/x - 6/x^3 + O(x^-5) and tau_m^2 = 2/x^2 -
		// 18/x^4 + O(x^-6) (the expansion of the branch below, whose
		// differences of terms of order x^2 lose x^4 times the rounding
		// error).
		x := -t
		u := 1 / (x * x)
		nu, dnu = x+(2-6*u)/x, -(1 - 2*u + 18*u*u)
		tau2, dtau2 = u*(2-18*u), u*(4-72*u)/x
	default:
		var P, p float64 // Phi and phi, both scaled by 1/phi(t) when t < 0
		switch {
		case t >= 0:
			P, p = 0.5*math.Erfc(-t/math.Sqrt2), normPDF(t)
		case t >= -25:
			P, p = 0.5*math.Erfc(-t/math.Sqrt2)/normPDF(t), 1
		default:
			// Phi(-x)/phi(x) = 1/x - 1/x^3 + 3/x^5 - 15/x^7 + 105/x^9 - 945/x^11 + ...,
			// truncated below 1e-14 relative for x > 25.
			x := -t
			u := 1 / (x * x)
			P, p = (1-u*(1-u*(3-u*(15-u*(105-u*945)))))/x, 1
		}
		z0 := t*P + p
		z1 := (t*t+1)*P + t*p
		z2 := (t*t*t+3*t)*P + (t*t+2)*p
		nu = P / z0
		dnu = p/z0 - nu*nu
		m1, r2 = z1/z0, z2/z0
		dm1 = 2 - m1*nu
		dr2 = 3*m1 - r2*nu
		tau2 = r2 - m1*m1
		dtau2 = dr2 - 2*m1*dm1
	}
	f, df := risSmoothFloor(tau2)
	tau = math.Sqrt(f)
	return nu, tau, dnu, df * dtau2 / (2 * tau)
}

// normPDF is the standard normal density.
func normPDF(t float64) float64 { return math.Exp(-0.5*t*t) / math.Sqrt(2*math.Pi) }

// risProposalFunc is risLookup; the gradient tests of the fixed-proposal
// gradient replace it to hold the proposal fixed while they perturb the
// parameters, as that backward pass does.
var risProposalFunc = risLookup

// The proposal's table: risProposal at t = risTableMin + k/risTableScale,
// k = 0..risTableLen-1; beyond it risProposal itself is evaluated.
const (
	risTableMin   = -25.0
	risTableMax   = 25.0
	risTableScale = 32
	risTableLen   = int((risTableMax-risTableMin)*risTableScale) + 1
)

// risTable holds (nu, nu', tau, tau') at each node.
var risTable = func() (tab [risTableLen][4]float64) {
	for k := range tab {
		tab[k][0], tab[k][2], tab[k][1], tab[k][3] = risProposal(risTableMin + float64(k)/risTableScale)
	}
	return tab
}()

// risLookup is risProposal interpolated within [risTableMin, risTableMax]
// by cubic Hermite interpolation of the values and derivatives of its
// table, with the interpolant's own derivatives, so that the proposal RIS
// uses is continuously differentiable and its derivative is exactly the
// one the backward pass applies; outside, it is risProposal. It is within
// 2e-6 of risProposal (TestRISLookup). Both engines use it.
func risLookup(t float64) (nu, tau, dnu, dtau float64) {
	if !(t >= risTableMin && t < risTableMax) { // also NaN
		return risProposal(t)
	}
	const h = 1.0 / risTableScale
	u := (t - risTableMin) * risTableScale
	k := min(int(u), risTableLen-2) // t just below risTableMax can round to u = risTableLen-1
	u -= float64(k)
	a, b := &risTable[k], &risTable[k+1]
	u2 := u * u
	u3 := u2 * u
	h00, h10, h01, h11 := 2*u3-3*u2+1, u3-2*u2+u, -2*u3+3*u2, u3-u2
	d00, d10, d01, d11 := 6*u2-6*u, 3*u2-4*u+1, -6*u2+6*u, 3*u2-2*u
	nu = h00*a[0] + h10*h*a[1] + h01*b[0] + h11*h*b[1]
	dnu = (d00*a[0]+d01*b[0])*risTableScale + d10*a[1] + d11*b[1]
	tau = h00*a[2] + h10*h*a[3] + h01*b[2] + h11*h*b[3]
	dtau = (d00*a[2]+d01*b[2])*risTableScale + d10*a[3] + d11*b[3]
	return nu, tau, dnu, dtau
}

// risUnit is Algorithm 1 for one unit whose pre-activation is N(m, v)
// under q, given M = len(xi) standard normals xi: it returns the estimate
// z of E_q[relu(a)] and its derivatives in m and v,
//
//	z = 1/M sum gamma_k relu(a_k),   a_k = m + s eps_k,  eps_k = nu + tau xi_k,
//
// through (nu, tau)(m/s) as well unless fixed, in which case
//
//	dz/dm = 1/M sum gamma_k 1[a_k > 0],   dz/dv = 1/M sum gamma_k 1[a_k > 0] eps_k / (2 s).
//
// Through the proposal, with dgamma/dnu = -eps gamma, dgamma/dtau =
// (1/tau - eps xi) gamma, da/dnu = s, da/dtau = s xi and dt/dm = 1/s,
// dt/ds = -t/s, the sums A = sum d(gamma relu(a))/dnu and
// B = sum d(gamma relu(a))/dtau add (A nu' + B tau')/s to M dz/dm and
// -(A nu' + B tau') t/s to M dz/ds. With v = 0 the unit is deterministic:
// z = relu(m), dz/dv = 0 (as LRTBackward's zero where sd = 0). NaN inputs
// give NaN outputs.
func risUnit[T float32 | float64](m, v float64, xi []T, fixed bool) (z, dm, dv float64) {
	if math.IsNaN(m + v) {
		return math.NaN(), math.NaN(), math.NaN()
	}
	if !(v > 0) {
		if m > 0 {
			return m, 1, 0
		}
		return 0, 0, 0
	}
	s := math.Sqrt(v)
	inv := 1 / s
	t := m * inv
	nu, tau, dnu, dtau := risProposalFunc(t)
	itau := 1 / tau
	var ds, A, B float64
	for _, x := range xi {
		x := float64(x)
		e := nu + tau*x
		a := m + s*e
		if a > 0 {
			g := tau * math.Exp(0.5*(x*x-e*e))
			ga := g * a
			z += ga
			dm += g
			ds += g * e
			A += g*s - e*ga
			B += (itau-e*x)*ga + g*s*x
		}
	}
	if !fixed {
		c := (A*dnu + B*dtau) * inv
		dm += c
		ds -= c * t
	}
	k := 1 / float64(len(xi))
	return z * k, dm * k, ds * k * 0.5 * inv
}

// risLayer applies risUnit to every unit of a hidden layer: on entry z
// holds the pre-activation means and v their variances (n×Out, row-major)
// and eps holds M standard normals per unit (unit-major: unit i's are
// eps[i*M : (i+1)*M]); on return z holds the first-moment estimates z~,
// dm their derivatives in the means and v their derivatives in the
// variances. Both engines run it, in float64 arithmetic, so they agree
// to the rounding of their inputs.
func risLayer[T float32 | float64](z, v, dm, eps []T, M int, fixed bool) {
	v, dm, eps = v[:len(z)], dm[:len(z)], eps[:len(z)*M]
	for i := range z {
		zi, di, vi := risUnit(float64(z[i]), float64(v[i]), eps[i*M:(i+1)*M], fixed)
		z[i], dm[i], v[i] = T(zi), T(di), T(vi)
	}
}
