package posterior

import "math"

// Closed forms of Havasi et al. (2021), Appendix A, for one weight with
// prior N(0, sigma^2) written as a sum of independent auxiliary variables
// w = a_1 + ... + a_K, p(a_k) = N(mu_k, sigma_k^2), sum_k sigma_k^2 = sigma^2.
// With b_{k-1} = a_1 + ... + a_{k-1}, m_{k-1} = mu_k + ... + mu_K and
// s_{k-1}^2 = sigma_k^2 + ... + sigma_K^2 (the prior variance not yet
// assigned before step k), and the current posterior q_{k-1}(w) =
// N(nu, rho2). Refinement uses zero prior means mu_k = 0, for which
// m_{k-1} = 0; the functions take the general form.

// auxStep holds the per-weight quantities of step k.
type auxStep struct {
	mu    float64 // mu_k, the prior mean of a_k
	varK  float64 // sigma_k^2, the prior variance of a_k
	sPrev float64 // s_{k-1}^2 = sigma_k^2 + s_k^2
	sK    float64 // s_k^2, the prior variance left after step k
	b     float64 // b_{k-1}
	m     float64 // m_{k-1}
}

// condAux returns the mean and variance of p(a_k | a_{1:k-1}, w)
// (Havasi et al. 2021, Eq. A1):
//
//	N(a_k | mu_k + (w - b_{k-1} - m_{k-1}) sigma_k^2 / s_{k-1}^2,  s_k^2 sigma_k^2 / s_{k-1}^2)
func (s auxStep) condAux(w float64) (mean, variance float64) {
	return s.mu + (w-s.b-s.m)*s.varK/s.sPrev, s.sK * s.varK / s.sPrev
}

// marginalAux returns the mean and variance of q_{k-1}(a_k) =
// integral p(a_k | a_{1:k-1}, w) q_{k-1}(w) dw (Eqs. A2, A3):
//
//	N(a_k | mu_k + (nu - b_{k-1} - m_{k-1}) sigma_k^2 / s_{k-1}^2,
//	        s_k^2 sigma_k^2 / s_{k-1}^2 + rho^2 sigma_k^4 / s_{k-1}^4)
func (s auxStep) marginalAux(nu, rho2 float64) (mean, variance float64) {
	c := s.varK / s.sPrev
	return s.mu + (nu-s.b-s.m)*c, s.sK*c + rho2*c*c
}

// posteriorGivenAux returns the mean and variance of q_{k-1}(w | a_k) =
// p(a_k | a_{1:k-1}, w) q_{k-1}(w) / q_{k-1}(a_k) (Eqs. A4, A5):
//
//	mean     = [(a_k - mu_k) rho^2 s_{k-1}^2 + (b_{k-1} + m_{k-1}) sigma_k^2 rho^2 + nu s_k^2 s_{k-1}^2]
//	           / (sigma_k^2 rho^2 + s_{k-1}^2 s_k^2)
//	variance = rho^2 s_{k-1}^2 s_k^2 / (sigma_k^2 rho^2 + s_{k-1}^2 s_k^2)
//
// At the last step (s_k^2 = 0) it returns the point b_{k-1} + a_k with
// variance 0, and for a point posterior (rho^2 = 0) it returns nu.
func (s auxStep) posteriorGivenAux(a, nu, rho2 float64) (mean, variance float64) {
	den := s.varK*rho2 + s.sPrev*s.sK
	if den == 0 {
		// rho2 == 0 and s_k^2 == 0: a delta posterior with nothing
		// left to refine; nu is the only value consistent with both.
		return nu, 0
	}
	mean = ((a-s.mu)*rho2*s.sPrev + (s.b+s.m)*s.varK*rho2 + nu*s.sK*s.sPrev) / den
	variance = rho2 * s.sPrev * s.sK / den
	return mean, variance
}

// logNormal returns log N(x | m, v).
func logNormal(x, m, v float64) float64 {
	return -0.5*math.Log(2*math.Pi*v) - (x-m)*(x-m)/(2*v)
}
