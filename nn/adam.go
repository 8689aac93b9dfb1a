package nn

import "math"

// Adam is the Adam optimizer on a flat parameter vector (Kingma & Ba 2015,
// Algorithm 1). Each Step descends the loss whose gradient g it is given:
//
//	t = t + 1
//	m = Beta1 m + (1 - Beta1) g
//	v = Beta2 v + (1 - Beta2) g∘g
//	x = x - LR * (m / (1 - Beta1^t)) / (sqrt(v / (1 - Beta2^t)) + Eps)
//
// The fields may be changed between steps. To ascend an objective such as
// the ELBO, pass its negated gradient.
type Adam struct {
	LR    float64 // step size alpha; NewAdam's default 1e-3 (Kingma & Ba 2015, Algorithm 1)
	Beta1 float64 // decay of the first moment; default 0.9
	Beta2 float64 // decay of the second moment; default 0.999
	Eps   float64 // added to the root of the second moment; default 1e-8

	m, v []float64
	t    int
}

// NewAdam returns an Adam optimizer for vectors of length n with step size
// lr (1e-3 if lr is zero) and the paper's defaults Beta1 = 0.9,
// Beta2 = 0.999, Eps = 1e-8.
func NewAdam(n int, lr float64) *Adam {
	if n < 0 {
		panic("nn: negative Adam length")
	}
	if lr == 0 {
		lr = 1e-3
	}
	return &Adam{LR: lr, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, m: make([]float64, n), v: make([]float64, n)}
}

// Len returns the length of the vectors a steps.
func (a *Adam) Len() int { return len(a.m) }

// Steps returns the number of steps taken since creation or Reset.
func (a *Adam) Steps() int { return a.t }

// Reset zeroes the moments and the step count.
func (a *Adam) Reset() {
	clear(a.m)
	clear(a.v)
	a.t = 0
}

// Step takes one descent step on x in place given the gradient grad of the
// loss at x. It panics if the lengths differ from Len.
func (a *Adam) Step(x, grad []float64) {
	if len(x) != len(a.m) || len(grad) != len(a.m) {
		panic("nn: Adam.Step length mismatch")
	}
	a.t++
	b1, b2 := a.Beta1, a.Beta2
	c1 := 1 / (1 - math.Pow(b1, float64(a.t)))
	c2 := 1 / (1 - math.Pow(b2, float64(a.t)))
	lr, eps := a.LR, a.Eps
	m := a.m
	v := a.v[:len(m)]
	x, grad = x[:len(m)], grad[:len(m)]
	for i, g := range grad {
		mi := b1*m[i] + (1-b1)*g
		vi := b2*v[i] + (1-b2)*g*g
		m[i], v[i] = mi, vi
		x[i] -= lr * (mi * c1) / (math.Sqrt(vi*c2) + eps)
	}
}
