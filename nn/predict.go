package nn

import "math/rand/v2"

// Predictor computes network outputs in reward units for batches of
// contexts, for Thompson-sampling decisions. It holds scratch space for one
// goroutine; its methods allocate nothing unless dst is nil.
type Predictor struct {
	net
	w []float64
}

// NewPredictor returns a Predictor for networks of architecture a that
// processes contexts in chunks of at most maxBatch rows.
func NewPredictor(a Arch, maxBatch int) *Predictor {
	return &Predictor{net: newNet(a, maxBatch, false), w: make([]float64, a.n)}
}

// Predict writes the predicted rewards of every arm for the contexts x
// (row-major, len(x)/In rows) at parameters w into dst,
//
//	dst[i*Out + a] = s.Shift + s.Scale * f_a(x_i; w),
//
// and returns dst. If dst is nil a new slice is allocated; otherwise its
// length must be rows*Out.
func (p *Predictor) Predict(dst, w, x []float64, s Standardization) []float64 {
	p.arch.checkLen(w, "w")
	in, out := p.arch.In(), p.arch.Out()
	if len(x)%in != 0 {
		panic("nn: len(x) is not a multiple of the input width")
	}
	rows := len(x) / in
	if dst == nil {
		dst = make([]float64, rows*out)
	}
	if len(dst) != rows*out {
		panic("nn: len(dst) must be rows*Out")
	}
	sh, sc := s.Shift, s.scale()
	f := p.act[p.last()]
	transposeWeights(p.arch, p.wT, w)
	for lo := 0; lo < rows; lo += p.max {
		hi := min(lo+p.max, rows)
		p.forward(w, p.wT, x[lo*in:hi*in], hi-lo)
		for i, v := range f[:(hi-lo)*out] {
			dst[lo*out+i] = sh + sc*v
		}
	}
	return dst
}

// Sample draws one weight sample w = mu + sigma∘eps, eps ~ N(0, I), from
// the mean-field posterior and writes Predict(dst, w, x, s) into dst: one
// Thompson sample of the rewards of every arm. Averaging several calls
// gives a Monte Carlo estimate of the posterior predictive mean. Sample
// overwrites the Predictor's own weight buffer only.
func (p *Predictor) Sample(dst, mu, sigma, x []float64, s Standardization, rng *rand.Rand) []float64 {
	p.arch.checkLen(mu, "mu")
	p.arch.checkLen(sigma, "sigma")
	for j := range p.w {
		p.w[j] = mu[j] + sigma[j]*rng.NormFloat64()
	}
	return p.Predict(dst, p.w, x, s)
}
