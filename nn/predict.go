package nn

import (
	"math"
	"math/rand/v2"
)

// Predictor computes network outputs in reward units for batches of
// contexts, for Thompson-sampling decisions. It holds scratch space for one
// goroutine; its methods allocate nothing unless dst is nil.
type Predictor struct {
	net
	w     []float64
	local *localScratch // SampleLocal's, made on first use
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

// SampleLocal draws `draws` independent samples of the network outputs at
// one context x under the mean-field posterior w ~ N(mu, diag(sig2)) and
// writes them, in reward units, into dst (draws×Out, row-major), layer by
// layer with the local reparameterization (Kingma, Salimans & Welling
// 2015, Section 2.3):
//
//	M_l = A_{l-1} mu_W^T + 1 mu_b^T,   V_l = (A_{l-1}∘A_{l-1}) s2_W^T + 1 s2_b^T,
//	Z_l = M_l + sqrt(V_l)∘E_l,  E_l ~ N(0, I),  A_l = relu(Z_l) (hidden layers),
//
// with A_0 the context repeated. For a single context every weight enters
// each draw once and the weights of layer l are independent of A_{l-1},
// so each row is an exact draw of f(x; w), w ~ q, at the cost of two
// matrix products per layer and no per-weight normal draws: the
// predictive draws of mean-field Thompson sampling. The first layer's
// mean and variance are the same for every draw and computed once. Draws
// are made in chunks of the Predictor's batch size; the normals are taken
// from rng layer by layer, row by row within a chunk.
//
// If dst is nil a new slice is allocated; otherwise its length must be
// draws*Out.
func (p *Predictor) SampleLocal(dst, mu, sig2, x []float64, draws int, s Standardization, rng *rand.Rand) []float64 {
	p.arch.checkLen(mu, "mu")
	p.arch.checkLen(sig2, "sig2")
	in, out := p.arch.In(), p.arch.Out()
	if len(x) != in {
		panic("nn: SampleLocal takes one context of the input width")
	}
	if draws < 0 {
		panic("nn: negative number of draws")
	}
	if dst == nil {
		dst = make([]float64, draws*out)
	}
	if len(dst) != draws*out {
		panic("nn: len(dst) must be draws*Out")
	}
	if p.local == nil {
		p.local = newLocalScratch(p.arch, p.max)
	}
	ls := p.local
	transposeWeights(p.arch, p.wT, mu)
	transposeWeights(p.arch, ls.s2T, sig2)
	// The first layer: the same mean and variance for every draw.
	ly0 := p.arch.layers[0]
	Wm, Ws := ly0.Weights(mu), ly0.Weights(sig2)
	copy(ls.m1, ly0.Bias(mu))
	copy(ls.v1, ly0.Bias(sig2))
	for o := range ly0.Out {
		rm, rs := Wm[o*in:(o+1)*in], Ws[o*in:(o+1)*in]
		for i, v := range x {
			if v != 0 {
				ls.m1[o] += rm[i] * v
				ls.v1[o] += rs[i] * v * v
			}
		}
	}
	for o, v := range ls.v1 {
		ls.v1[o] = math.Sqrt(max(v, 0))
	}
	sh, sc := s.Shift, s.scale()
	last := p.last()
	for lo := 0; lo < draws; lo += p.max {
		n := min(p.max, draws-lo)
		z := p.act[0][:n*ly0.Out]
		for r := range n {
			row := z[r*ly0.Out : (r+1)*ly0.Out]
			for o := range row {
				row[o] = ls.m1[o] + ls.v1[o]*rng.NormFloat64()
			}
		}
		if last > 0 {
			relu(z)
		}
		for l := 1; l <= last; l++ {
			ly := p.arch.layers[l]
			a := p.act[l-1][:n*ly.In]
			sq := ls.sq[:n*ly.In]
			for i, v := range a {
				sq[i] = v * v
			}
			z := p.act[l][:n*ly.Out]
			fillRows(z, ly.Bias(mu))
			gemm(noTrans, noTrans, n, ly.Out, ly.In, 1, a, ly.In, ly.Weights(p.wT), ly.Out, 1, z, ly.Out)
			sd := ls.sd[:n*ly.Out]
			fillRows(sd, ly.Bias(sig2))
			gemm(noTrans, noTrans, n, ly.Out, ly.In, 1, sq, ly.In, ly.Weights(ls.s2T), ly.Out, 1, sd, ly.Out)
			for i, v := range sd {
				z[i] += math.Sqrt(max(v, 0)) * rng.NormFloat64()
			}
			if l < last {
				relu(z)
			}
		}
		for i, v := range p.act[last][:n*out] {
			dst[lo*out+i] = sh + sc*v
		}
	}
	return dst
}

// localScratch holds SampleLocal's buffers, made on its first call.
type localScratch struct {
	s2T    []float64 // sig2's weight blocks transposed
	m1, v1 []float64 // the first layer's pre-activation mean and standard deviation
	sq, sd []float64 // max×(widest layer): squared activations, variances
}

func newLocalScratch(a Arch, maxBatch int) *localScratch {
	w := 0
	for _, ly := range a.layers {
		w = max(w, ly.In, ly.Out)
	}
	first := a.layers[0].Out
	return &localScratch{
		s2T: make([]float64, a.n),
		m1:  make([]float64, first), v1: make([]float64, first),
		sq: make([]float64, maxBatch*w), sd: make([]float64, maxBatch*w),
	}
}
