package nn

import (
	"math"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// Predictor computes network outputs in reward units for batches of
// contexts, for Thompson-sampling decisions. It holds scratch space for one
// goroutine; its methods allocate nothing unless dst is nil (SampleLocal
// makes its buffers on its first call).
//
// Predict and SampleLocal run on the float32 fast engine, with the
// forward code of Evaluator32: parameters are converted to the engine
// layout per call (PredictWeights takes them converted once, see
// Weights), sparse contexts gather their non-zero entries, and
// outputs agree with the float64 path to float32 rounding (about 1e-6
// relative). Setting Reference runs them on the float64 reference path.
type Predictor struct {
	net
	w     []float64
	local *localScratch // SampleLocal's, made on first use

	// Reference selects the float64 reference path.
	Reference bool

	fast    net32
	w32     []float32 // the weights (or SampleLocal's means) in the engine layout
	tmp32   []float32 // scratch of Arch.toEngine
	nz      nonzeros  // the current chunk's non-zero entries
	local32 *localScratch32
	noise   noise // SampleLocal's normals on the fast engine
}

// NewPredictor returns a Predictor for networks of architecture a that
// processes contexts in chunks of at most maxBatch rows.
func NewPredictor(a Arch, maxBatch int) *Predictor {
	p := &Predictor{
		net:   newNet(a, maxBatch, false),
		w:     make([]float64, a.n),
		fast:  newNet32(a, maxBatch, false),
		w32:   make([]float32, a.n),
		tmp32: make([]float32, a.n),
		nz: nonzeros{
			off: make([]int, 0, maxBatch+1),
			idx: make([]int32, 0, maxBatch*a.In()),
			val: make([]float32, 0, maxBatch*a.In()),
		},
	}
	for i := range p.fast.rows {
		p.fast.rows[i] = i
	}
	return p
}

// chunk returns the rows of x (row-major, n rows of In) as a View for
// the fast engine's forward code, listing their non-zero entries in p.nz.
func (p *Predictor) chunk(x []float64, n int) View {
	in := p.arch.In()
	p.nz.off, p.nz.idx, p.nz.val = p.nz.off[:0], p.nz.idx[:0], p.nz.val[:0]
	for i := range n {
		p.nz.appendRow(x[i*in : (i+1)*in])
	}
	return View{dim: in, arms: p.arch.Out(), x: x[:n*in], nz: p.nz}
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
	dst = p.predictDst(dst, x)
	if !p.Reference {
		p.arch.toEngine(p.w32, p.tmp32, w)
		return p.predict32(dst, p.w32, x, s)
	}
	return p.predict64(dst, w, x, s)
}

// Weights is a parameter vector made ready for the fast engine once
// (Arch.PrepareWeights), for the many predictions of a posterior sample
// that serves many decisions: Predict converts its parameters to the
// engine's layout on every call, which for one decision on the paper's
// network costs about as much as the forward pass itself.
type Weights struct {
	w   []float64 // canonical, for the reference path
	w32 []float32 // engine layout
}

// PrepareWeights returns w ready for Predictor.PredictWeights. w is
// kept, not copied: it must not change while the Weights are in use.
func (a Arch) PrepareWeights(w []float64) *Weights {
	a.checkLen(w, "w")
	pw := &Weights{w: w, w32: make([]float32, a.n)}
	a.toEngine(pw.w32, make([]float32, a.n), w)
	return pw
}

// Vector returns the canonical parameter vector the Weights were
// prepared from.
func (w *Weights) Vector() []float64 { return w.w }

// PredictWeights is Predict at prepared parameters: the same outputs,
// bit for bit, without converting the parameters (TestPredictWeights).
func (p *Predictor) PredictWeights(dst []float64, w *Weights, x []float64, s Standardization) []float64 {
	p.arch.checkLen(w.w, "w")
	dst = p.predictDst(dst, x)
	if !p.Reference {
		return p.predict32(dst, w.w32, x, s)
	}
	return p.predict64(dst, w.w, x, s)
}

// predictDst checks x and dst for a prediction and returns dst, made if
// nil.
func (p *Predictor) predictDst(dst, x []float64) []float64 {
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
	return dst
}

// predict32 is Predict on the fast engine at w32 (engine layout).
func (p *Predictor) predict32(dst []float64, w32 []float32, x []float64, s Standardization) []float64 {
	in, out := p.arch.In(), p.arch.Out()
	rows := len(x) / in
	sh, sc := s.Shift, s.scale()
	f := p.fast.act[p.last()]
	for lo := 0; lo < rows; lo += p.max {
		hi := min(lo+p.max, rows)
		v := p.chunk(x[lo*in:hi*in], hi-lo)
		p.fast.forward(w32, &v, hi-lo)
		for i, o := range f[:(hi-lo)*out] {
			dst[lo*out+i] = sh + sc*float64(o)
		}
	}
	return dst
}

// predict64 is Predict on the float64 reference path.
func (p *Predictor) predict64(dst, w, x []float64, s Standardization) []float64 {
	in, out := p.arch.In(), p.arch.Out()
	rows := len(x) / in
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
// layer by layer, row by row within a chunk: from rng on the reference
// path, from a kern.RNG seeded with one rng.Uint64 on the fast engine.
//
// If dst is nil a new slice is allocated; otherwise its length must be
// draws*Out.
func (p *Predictor) SampleLocal(dst, mu, sig2, x []float64, draws int, s Standardization, rng *rand.Rand) []float64 {
	dst, _ = p.sampleLocal(dst, nil, mu, sig2, x, draws, s, rng, false)
	return dst
}

// SampleLocalMoments is SampleLocal up to the output layer: for each of
// the draws it samples the hidden layers as SampleLocal does and writes
// the output layer's conditional mean and variance given them, in reward
// units, into mean and vari (draws×Out, row-major):
//
//	mean = shift + scale M_L,   vari = scale^2 V_L,
//
// with M_L, V_L as in SampleLocal for the output layer L. Given the
// hidden activations the outputs are independent Gaussians (every weight
// of the output layer is independent), so SampleLocal's draw r is
// distributed as N(mean_r, vari_r), each output independently: the
// conditional moments Rao-Blackwellise anything computed from the draws'
// outputs (issue 18, finding 2: propensities). The random draws consumed
// are SampleLocal's for the hidden layers, none for the output layer.
//
// Nil mean or vari are allocated; otherwise each must have length
// draws*Out.
func (p *Predictor) SampleLocalMoments(mean, vari, mu, sig2, x []float64, draws int, s Standardization, rng *rand.Rand) ([]float64, []float64) {
	if vari == nil {
		vari = make([]float64, draws*p.arch.Out())
	}
	if len(vari) != draws*p.arch.Out() {
		panic("nn: len(vari) must be draws*Out")
	}
	return p.sampleLocal(mean, vari, mu, sig2, x, draws, s, rng, true)
}

// sampleLocal is SampleLocal, or with moments SampleLocalMoments (vari
// then sized by the caller).
func (p *Predictor) sampleLocal(dst, vari, mu, sig2, x []float64, draws int, s Standardization, rng *rand.Rand, moments bool) ([]float64, []float64) {
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
	if !p.Reference {
		p.sampleLocal32(dst, vari, mu, sig2, x, draws, s, rng, moments)
		return dst, vari
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
	sh, sc := s.Shift, s.scale()
	last := p.last()
	if moments && last == 0 { // a linear model: the moments are the same for every draw
		for r := range draws {
			for o := range ly0.Out {
				dst[r*ly0.Out+o] = sh + sc*ls.m1[o]
				vari[r*ly0.Out+o] = sc * sc * max(ls.v1[o], 0)
			}
		}
		return dst, vari
	}
	for o, v := range ls.v1 {
		ls.v1[o] = math.Sqrt(max(v, 0))
	}
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
		p.widen(0, x, n)
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
			if moments && l == last {
				for i, v := range sd {
					vari[lo*out+i] = sc * sc * max(v, 0)
				}
				break
			}
			for i, v := range sd {
				z[i] += math.Sqrt(max(v, 0)) * rng.NormFloat64()
			}
			if l < last {
				relu(z)
			}
			p.widen(l, x, n)
		}
		for i, v := range p.act[last][:n*out] {
			dst[lo*out+i] = sh + sc*v
		}
	}
	return dst, vari
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

// localScratch32 holds the buffers of SampleLocal on the fast engine.
type localScratch32 struct {
	s2      []float32   // sig2 in the engine layout
	xsq     []float32   // the context squared (dense first layer)
	m1, v1  []float32   // the first layer's pre-activation mean and variance
	sd, eps [][]float32 // per layer, max×Out: variances (then standard deviations), noise
	sq      [][]float32 // per layer >= 1, max×In: squared activations
	one     nonzeros    // the context's non-zero entries
}

func newLocalScratch32(a Arch, maxBatch int) *localScratch32 {
	first := a.layers[0].Out
	ls := &localScratch32{
		s2:  make([]float32, a.n),
		xsq: make([]float32, a.In()),
		m1:  make([]float32, first), v1: make([]float32, first),
		sd: make([][]float32, len(a.layers)), eps: make([][]float32, len(a.layers)),
		sq: make([][]float32, len(a.layers)),
		one: nonzeros{
			off: make([]int, 0, 2),
			idx: make([]int32, 0, a.In()),
			val: make([]float32, 0, a.In()),
		},
	}
	for l, ly := range a.layers {
		ls.sd[l] = make([]float32, maxBatch*ly.Out)
		ls.eps[l] = make([]float32, maxBatch*ly.Out)
		if l > 0 {
			ls.sq[l] = make([]float32, maxBatch*ly.In)
		}
	}
	return ls
}

// sampleLocal32 is SampleLocal on the fast engine, with the forward code
// of Evaluator32's local reparameterization (lrtFirst, lrtMoments,
// lrtSample), drawing its normals as Evaluator32 does: from a kern.RNG
// seeded with one rng.Uint64, or (p.noise.reference, for tests) in the
// float64 path's order from rng.
func (p *Predictor) sampleLocal32(dst, vari, mu, sig2, x []float64, draws int, s Standardization, rng *rand.Rand, moments bool) {
	if p.local32 == nil {
		p.local32 = newLocalScratch32(p.arch, p.max)
	}
	ls := p.local32
	nt := &p.fast
	p.arch.toEngine(p.w32, p.tmp32, mu)
	p.arch.toEngine(ls.s2, p.tmp32, sig2)
	p.noise.start(rng)
	// The first layer: the same mean and variance for every draw.
	ls.one.off, ls.one.idx, ls.one.val = ls.one.off[:0], ls.one.idx[:0], ls.one.val[:0]
	ls.one.appendRow(x)
	one := View{dim: len(x), arms: p.arch.Out(), x: x, nz: ls.one}
	sparse := nt.sparseInput(&one, 1, ls.xsq)
	nt.lrtFirst(ls.m1, ls.v1, &one, 1, sparse, p.w32, ls.s2, ls.xsq)
	sh, sc := s.Shift, s.scale()
	last, out := p.last(), p.arch.Out()
	for lo := 0; lo < draws; lo += p.max {
		n := min(p.max, draws-lo)
		for l, ly := range p.arch.layers {
			z, sd := nt.act[l][:n*ly.Out], ls.sd[l][:n*ly.Out]
			if l == 0 {
				fillRows(z, ls.m1)
				fillRows(sd, ls.v1)
			} else {
				lrtMoments(z, sd, nt.act[l-1][:n*ly.In], ls.sq[l][:n*ly.In], p.w32, ls.s2, ly, n)
			}
			if moments && l == last {
				for i, v := range sd {
					vari[lo*out+i] = sc * sc * max(float64(v), 0)
				}
				break
			}
			lrtSample(z, sd, ls.eps[l][:n*ly.Out], &p.noise)
			if l < last {
				kern.Relu(z)
			}
			nt.widen(l, x, nil, n)
		}
		for i, v := range nt.act[last][:n*out] {
			dst[lo*out+i] = sh + sc*float64(v)
		}
	}
}
