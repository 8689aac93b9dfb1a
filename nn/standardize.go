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
func FitStandardization(v View) Standardization {
	n := v.Len()
	if n == 0 {
		return Standardization{Shift: 0, Scale: 1}
	}
	var mean float64
	for _, y := range v.y {
		mean += y
	}
	mean /= float64(n)
	var ss float64
	for _, y := range v.y {
		ss += (y - mean) * (y - mean)
	}
	sd := math.Sqrt(ss / float64(n))
	if !(sd > 0) {
		sd = math.Abs(mean)
		if sd == 0 {
			sd = 1
		}
	}
	return Standardization{Shift: mean, Scale: sd}
}

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
