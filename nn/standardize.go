package nn

import "math"

// Standardization is the affine map between rewards y and the network's
// output units t,
//
//	t = (y - Shift) / Scale,   y = Shift + Scale * t.
//
// The network fits t; predictions and log-likelihoods are reported in
// reward units. The zero value is the identity: a zero Scale means 1.
type Standardization struct {
	Shift float64
	Scale float64 // zero means 1; must not be negative
}

// scale returns the scale with zero meaning 1; it panics on a negative or
// non-finite scale.
func (s Standardization) scale() float64 {
	switch {
	case s.Scale == 0:
		return 1
	case s.Scale < 0 || math.IsInf(s.Scale, 0) || math.IsNaN(s.Scale):
		panic("nn: standardization scale must be positive and finite")
	}
	return s.Scale
}

// Reward returns Shift + Scale*t, the reward for network output t.
func (s Standardization) Reward(t float64) float64 { return s.Shift + s.scale()*t }

// FitStandardization returns the mean and standard deviation of the
// rewards of v,
//
//	Shift = (1/N) sum_i y_i,   Scale = sqrt((1/N) sum_i (y_i - Shift)^2),
//
// pooled over arms. If the rewards are all equal (or N == 1) Scale is |Shift|,
// or 1 if that is zero too; with no rows it returns the identity.
//
// Both sums are formed on y_i / m with m = max_i |y_i|, so that they
// cannot overflow for any finite rewards (rewards near 1e308 overflow the
// plain sums, issue 16), and the result is always usable: Shift is
// finite and Scale finite and at least MinStandardizationScale. Non-finite
// rewards are the caller's error; they are skipped.
func FitStandardization(v View) Standardization {
	var m float64
	n := 0
	for _, y := range v.y {
		if math.IsNaN(y) || math.IsInf(y, 0) {
			continue
		}
		m = max(m, math.Abs(y))
		n++
	}
	if n == 0 {
		return Standardization{Shift: 0, Scale: 1}
	}
	if m == 0 {
		return Standardization{Shift: 0, Scale: 1}
	}
	var mean float64 // of y_i / m, in [-1, 1]
	for _, y := range v.y {
		if !math.IsNaN(y) && !math.IsInf(y, 0) {
			mean += y / m
		}
	}
	mean /= float64(n)
	var ss float64 // of (y_i/m - mean)^2, each at most 4
	for _, y := range v.y {
		if !math.IsNaN(y) && !math.IsInf(y, 0) {
			d := y/m - mean
			ss += d * d
		}
	}
	sd := math.Sqrt(ss/float64(n)) * m // at most 2m: may overflow only past MaxFloat64/2
	shift := mean * m
	if !(sd > 0) {
		sd = math.Abs(shift)
	}
	sd = min(max(sd, MinStandardizationScale), math.MaxFloat64)
	return Standardization{Shift: shift, Scale: sd}
}

// MinStandardizationScale is the least Scale FitStandardization returns:
// rewards that differ by less are treated as equal, so that the ratio of
// two scales in Restandardize stays far from overflow.
const MinStandardizationScale = 1e-9

// Restandardize rewrites the output layer of a mean-field posterior
// N(mu, diag(sigma^2)) trained under the standardization from so that it
// describes exactly the same distribution of predictions in reward units
// under the standardization to. With r = from.Scale/to.Scale and
// c = (from.Shift - to.Shift)/to.Scale the output layer's parameters map as
//
//	W' = r W,   b' = r b + c,
//
// an affine bijection applied to every weight sample, so for Gaussian
// factors
//
//	mu_W' = r mu_W,   sigma_W' = r sigma_W,
//	mu_b' = r mu_b + c,   sigma_b' = r sigma_b,
//
// and to.Reward(f'(x)) == from.Reward(f(x)) for every sample and context.
// mu and sigma are modified in place; sigma may be nil to rewrite a point
// estimate w. Hidden layers are untouched. The prior, which lives in the
// standardized units, is not transformed: a KL term computed afterwards
// refers to the new units.
func Restandardize(a Arch, mu, sigma []float64, from, to Standardization) {
	a.checkLen(mu, "mu")
	if sigma != nil {
		a.checkLen(sigma, "sigma")
	}
	r := from.scale() / to.scale()
	c := (from.Shift - to.Shift) / to.scale()
	out := a.layers[len(a.layers)-1]
	for i, w := 0, out.Weights(mu); i < len(w); i++ {
		w[i] *= r
	}
	for i, b := 0, out.Bias(mu); i < len(b); i++ {
		b[i] = r*b[i] + c
	}
	if sigma == nil {
		return
	}
	for i, s := 0, sigma[out.W:out.End()]; i < len(s); i++ {
		s[i] *= r
	}
}
