package nn

import "math"

// Reparameterized importance sampling (RIS; Long, Tian, Zhang & Xu 2024,
// "Reparameterized Importance Sampling for Robust Variational Bayesian
// Neural Networks", ICML; seed 001) propagates through each hidden layer
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
// reparameterization does. The input z~_{l-1} is deterministic given the
// parameters, so f depends on a unit's weight row w_j only through its
// pre-activation a_j = w_j z~_{l-1} + b_j, which under q is exactly
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
// expansion is exact away from the kink (the moments of a·1[a>0]a^k are
// polynomial there) and degenerate across it (h = h'' = 0 for m < 0), so
// we take the moments of r*(a) ∝ relu(a) N(a; m, v) exactly: with s =
// sqrt(v), t = m/s, Phi and phi the standard normal CDF and density,
//
//	Z_k = E_q[relu(a) a^k] / s^(k+1):
//	Z_0 = t Phi + phi,  Z_1 = (t^2+1) Phi + t phi,  Z_2 = (t^3+3t) Phi + (t^2+2) phi,
//	mu^ = m + s nu,   nu = Z_1/Z_0 - t = Phi/Z_0,
//	sigma^2^ = v tau^2,  tau^2 = Z_2/Z_0 - (Z_1/Z_0)^2,
//
// which for t >> 1 reduce to Eq. 15's mu^ = m + v/m, sigma^2^ = v - v^2/m^2.
// tau^2 is below 1 for every t, and an importance sampler whose Gaussian
// proposal has less than half the target's variance has infinite
// variance (the ratio q^2/r is not integrable), which the matched tau^2
// reaches for t below about 0.3; tau^2 is therefore clamped to
// [risTau2Floor, 1].
//
// Reparameterization (Proposition 2, Eq. 17). The proposal sample is the
// reparameterization of q with shifted, scaled noise,
//
//	a = m + s eps,  eps = nu + tau xi,  xi ~ N(0, 1)  (Algorithm 1, lines 4-5),
//	gamma = q(a)/r(a) = N(eps; 0, 1) / N(eps; nu, tau^2) = tau exp((xi^2 - eps^2)/2)  (line 6),
//	z~ = 1/M sum_m gamma_m relu(a_m)  (line 9),
//
// with (nu, tau) treated as constants of the noise distribution in the
// backward pass: da/dm = 1, da/ds = eps, as in Section 4.2 ("RIS:
// dw/dmu = I, dw/dsigma = eps"). The estimate is unbiased for any
// proposal, so stopping the gradient there keeps the gradient unbiased
// for the moment's: E[gamma 1[a>0] (1, eps)] = d/d(m, s) E_q[relu(a)].
//
// Only hidden layers propagate moments: the linear output layer, whose
// "non-linearity" is the Gaussian likelihood, is sampled by local
// reparameterization from its Gaussian marginal given z~_{L-1}, so the
// expected log-likelihood keeps its expectation over the output layer.
// The objective RIS estimates is therefore the paper's, not the ELBO's
// expected log-likelihood: the data term of the network whose hidden
// layers output their means, sum_i E_{q_L}[log p(y_i | W_L z~_{L-1}(x_i))],
// in which the hidden layers' variances act only through the means they
// shift. nn's tests check the estimate of every z~_l against brute-force
// Monte Carlo over the weights and against the closed form
// E_q[relu(a)] = s (t Phi(t) + phi(t)).

// risTau2Floor is the least proposal variance tau^2, as a fraction of the
// pre-activation's variance v. Importance weights q/r with a Gaussian
// proposal of variance tau^2 v have a finite second moment only for
// tau^2 > 1/2; above the floor the moment-matched tau^2 is used. 0.6
// gave the lowest variance of the moment estimate among 0.6, 0.7, 0.8 and
// 1 at every t = m/s in [-3, 3] (numerical quadrature of E_r[(gamma
// relu(a))^2]; at t = 0 the relative variance is 0.10, against 2.14 for
// one plain sample of relu(a)).
const risTau2Floor = 0.6

// risProposal returns the shift nu and scale tau of the RIS noise
// distribution eps ~ N(nu, tau^2) of a unit whose pre-activation is
// N(m, v) under q, t = m/sqrt(v): the standardized mean and standard
// deviation of the Gaussian that matches the first two moments of
// r*(a) ∝ relu(a) N(a; m, v), tau^2 clamped to [risTau2Floor, 1] (see
// the comment above). Both engines call it in float64, so they use the
// same proposal.
func risProposal(t float64) (nu, tau float64) {
	var z0, z1, z2 float64
	switch {
	case t > 1e4:
		// Phi = 1 and phi = 0 to float64 precision: nu = 1/t, tau^2 = 1 - 1/t^2.
		return 1 / t, 1
	case t < -25:
		// Mills-ratio asymptotics, Phi(t)/phi(t) = 1/x - 1/x^3 + 3/x^5 - ...
		// for x = -t: nu = x + 2/x + O(x^-3), tau^2 = 2/x^2 + ... below the floor.
		x := -t
		return x + 2/x, math.Sqrt(risTau2Floor)
	case t < 0:
		// Scaled by 1/phi(t), which cancels: Phi and phi underflow together.
		r := 0.5 * math.Erfc(-t/math.Sqrt2) / normPDF(t)
		z0 = t*r + 1
		z1 = (t*t+1)*r + t
		z2 = (t*t*t+3*t)*r + t*t + 2
		nu = r / z0
	default:
		P, p := 0.5*math.Erfc(-t/math.Sqrt2), normPDF(t)
		z0 = t*P + p
		z1 = (t*t+1)*P + t*p
		z2 = (t*t*t+3*t)*P + (t*t+2)*p
		nu = P / z0
	}
	m1 := z1 / z0
	tau2 := z2/z0 - m1*m1
	if !(tau2 > risTau2Floor) { // also NaN
		tau2 = risTau2Floor
	}
	return nu, math.Sqrt(min(tau2, 1))
}

// risProposalFunc is risProposal; the gradient tests replace it to hold
// the proposal fixed while they perturb the parameters, as the backward
// pass does.
var risProposalFunc = risProposal

// normPDF is the standard normal density.
func normPDF(t float64) float64 { return math.Exp(-0.5*t*t) / math.Sqrt(2*math.Pi) }

// risUnit is Algorithm 1 for one unit whose pre-activation is N(m, v)
// under q, given M = len(xi) standard normals xi: it returns the estimate
// z of E_q[relu(a)] and its derivatives in m and v with the proposal held
// fixed,
//
//	z = 1/M sum gamma_k relu(a_k),   dz/dm = 1/M sum gamma_k 1[a_k > 0],
//	dz/dv = 1/M sum gamma_k 1[a_k > 0] eps_k / (2 s),
//
// with a_k = m + s eps_k, eps_k = nu + tau xi_k. With v = 0 the unit is
// deterministic: z = relu(m), dz/dv = 0 (as LRTBackward's zero where
// sd = 0). NaN inputs give NaN outputs.
func risUnit[T float32 | float64](m, v float64, xi []T) (z, dm, dv float64) {
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
	nu, tau := risProposalFunc(m / s)
	for _, x := range xi {
		x := float64(x)
		e := nu + tau*x
		a := m + s*e
		if a > 0 {
			g := tau * math.Exp(0.5*(x*x-e*e))
			z += g * a
			dm += g
			dv += g * e
		}
	}
	k := 1 / float64(len(xi))
	return z * k, dm * k, dv * k / (2 * s)
}

// risLayer applies risUnit to every unit of a hidden layer: on entry z
// holds the pre-activation means and v their variances (n×Out, row-major)
// and eps holds M standard normals per unit (unit-major: unit i's are
// eps[i*M : (i+1)*M]); on return z holds the first-moment estimates z~,
// dm their derivatives in the means and v their derivatives in the
// variances. Both engines run it, in float64 arithmetic, so they agree
// to the rounding of their inputs.
func risLayer[T float32 | float64](z, v, dm, eps []T, M int) {
	v, dm, eps = v[:len(z)], dm[:len(z)], eps[:len(z)*M]
	for i := range z {
		zi, di, vi := risUnit(float64(z[i]), float64(v[i]), eps[i*M:(i+1)*M])
		z[i], dm[i], v[i] = T(zi), T(di), T(vi)
	}
}
