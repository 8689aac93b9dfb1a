package nn

import (
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// The fast engine evaluates the same estimators as the float64 evaluator
// in float32 on the kernels of nn/kern. Its parameter vectors use the
// engine layout: the canonical flat offsets of Arch.Layer, with every
// weight block stored transposed (In×Out, W_T[i*Out + o] = W[o*In + i]) so
// that each layer's products are row-major kernel calls, A W_T, without a
// transposition per iteration. Arch.ToEngine and Arch.FromEngine convert.
// Storage is float32; the residuals, the log-likelihood and its
// hyperparameter gradient are accumulated in float64.

// ToEngine writes the canonical float64 vector src (length NumParams) into
// dst in the engine layout, rounded to float32.
func (a Arch) ToEngine(dst []float32, src []float64) {
	if len(dst) != a.n || len(src) != a.n {
		panic("nn: ToEngine lengths must be Arch.NumParams")
	}
	for _, ly := range a.layers {
		w := src[ly.W : ly.W+ly.In*ly.Out]
		d := dst[ly.W : ly.W+ly.In*ly.Out]
		for o := range ly.Out {
			for i, v := range w[o*ly.In : (o+1)*ly.In] {
				d[i*ly.Out+o] = float32(v)
			}
		}
		for j := ly.B; j < ly.End(); j++ {
			dst[j] = float32(src[j])
		}
	}
}

// toEngine is ToEngine through scratch space tmp (length NumParams): one
// linear conversion to float32, then kern.Transpose of each weight block,
// about twice as fast as ToEngine's strided conversion.
func (a Arch) toEngine(dst, tmp []float32, src []float64) {
	if len(dst) != a.n || len(src) != a.n || len(tmp) != a.n {
		panic("nn: toEngine lengths must be Arch.NumParams")
	}
	for j, v := range src {
		tmp[j] = float32(v)
	}
	for _, ly := range a.layers {
		kern.Transpose(ly.Weights32(dst), ly.Weights32(tmp), ly.Out, ly.In)
		copy(ly.Bias32(dst), ly.Bias32(tmp))
	}
}

// FromEngine writes the engine-layout vector src into dst in the canonical
// layout; it inverts ToEngine up to float32 rounding.
func (a Arch) FromEngine(dst []float64, src []float32) {
	if len(dst) != a.n || len(src) != a.n {
		panic("nn: FromEngine lengths must be Arch.NumParams")
	}
	for _, ly := range a.layers {
		s := src[ly.W : ly.W+ly.In*ly.Out]
		d := dst[ly.W : ly.W+ly.In*ly.Out]
		for o := range ly.Out {
			row := d[o*ly.In : (o+1)*ly.In]
			for i := range row {
				row[i] = float64(s[i*ly.Out+o])
			}
		}
		for j := ly.B; j < ly.End(); j++ {
			dst[j] = float64(src[j])
		}
	}
}

// Evaluator32 is the fast engine's evaluator for one goroutine: the same
// estimate as Evaluator.ExpectedLogLik on float32 vectors in the layout
// ToEngine writes. Its normals come from a kern.RNG seeded with one
// rng.Uint64 per call; under Options.ReferenceNoise they are the float64
// evaluator's own draws from rng (the same calls in the same order), so
// that both engines see the same noise:
//
//	ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper, rows, rng)
//
// overwrites dMu and dSigma (engine layout) and dHyper (float64) with the
// gradients and returns the estimate. ToEngine and FromEngine convert
// canonical float64 vectors to and from its layout. It allocates nothing.
// Like Evaluator it is an alias of an interface literal, so that posterior
// can name it without nn naming posterior.
type Evaluator32 = interface {
	ExpectedLogLik(dMu, dSigma []float32, dHyper []float64, mu, sigma []float32, hyper []float64, rows []int, rng *rand.Rand) float64
	ToEngine(dst []float32, src []float64)
	FromEngine(dst []float64, src []float32)
}

// NewEvaluator32 returns the fast engine's scratch space for batches of at
// most maxBatch rows.
func (l *Likelihood) NewEvaluator32(maxBatch int) Evaluator32 {
	return newEvaluator32(l, maxBatch)
}

// noise is the fast engine's source of standard normals for one call: a
// kern.RNG seeded with one draw of the caller's rng, or, when reference
// is set, the caller's rng.NormFloat64 itself (the float64 path's draws).
type noise struct {
	reference bool
	rng       *rand.Rand
	gen       kern.RNG
}

// start begins a call that draws from rng.
func (z *noise) start(rng *rand.Rand) {
	z.rng = rng
	if !z.reference {
		z.gen.Seed(rng.Uint64())
	}
}

// fill writes standard normals into dst.
func (z *noise) fill(dst []float32) {
	if !z.reference {
		z.gen.Normals(dst)
		return
	}
	for i := range dst {
		dst[i] = float32(z.rng.NormFloat64())
	}
}

// net32 holds the buffers of a float32 forward and backward pass through an
// Arch for batches of at most max rows. It is the forward code of the
// fast evaluator and of the Predictor's float32 path.
type net32 struct {
	arch Arch
	max  int
	act  [][]float32 // act[l]: output of layer l, max×Out_l (ReLU applied for hidden layers)
	grad [][]float32 // grad[l]: gradient w.r.t. layer l's pre-activation; nil without backward
	x    []float32   // dense first-layer input, max×In
	xsq  []float32   // its square, for the variance products
	wC   []float32   // canonical (Out×In) copies of the weight blocks of layers >= 1
	rows []int       // data rows of the current batch
	vsq  []float32   // a sparse row's squared values, In
	tr   sparseT     // the batch's sparse input by input (backward only)
}

func newNet32(a Arch, maxBatch int, backward bool) net32 {
	if a.NumLayers() == 0 {
		panic("nn: zero Arch; use NewArch")
	}
	if maxBatch < 1 {
		panic("nn: maxBatch must be positive")
	}
	nt := net32{
		arch: a, max: maxBatch,
		act:  make([][]float32, len(a.layers)),
		x:    make([]float32, maxBatch*a.In()),
		wC:   make([]float32, a.n),
		rows: make([]int, maxBatch),
		vsq:  make([]float32, a.In()),
	}
	if backward {
		nt.grad = make([][]float32, len(a.layers))
		nt.tr = newSparseT(a.In(), maxBatch)
	}
	for l := range a.layers {
		nt.act[l] = make([]float32, maxBatch*a.actSize(l))
		if backward {
			nt.grad[l] = make([]float32, maxBatch*a.actSize(l))
		}
	}
	return nt
}

// widen is net.widen on the fast engine: row i's context is row rows[i]
// of x (In wide), or x itself for every row when rows is nil.
func (nt *net32) widen(l int, x []float64, rows []int, n int) {
	if nt.arch.skipLayer(l) {
		widenSkip(nt.act[l], n, nt.arch.layers[l].Out, nt.arch.layers[l+1].In, x, rows)
	}
}

// pack is net.pack on the fast engine.
func (nt *net32) pack(l int, n int) {
	if nt.arch.skipLayer(l - 1) {
		packSkip(nt.grad[l-1], n, nt.arch.layers[l-1].Out, nt.arch.layers[l].In)
	}
}

func (nt *net32) last() int { return len(nt.arch.layers) - 1 }

// canonical writes into dst the canonical (Out×In) copies of the weight
// blocks of layers >= 1 of the engine-layout vector wE, which the backward
// products G W need.
func (nt *net32) canonical(dst, wE []float32) {
	for _, ly := range nt.arch.layers[1:] {
		kern.Transpose(ly.Weights32(dst), ly.Weights32(wE), ly.In, ly.Out)
	}
}

// Weights32 is Weights for a float32 vector.
func (l Layer) Weights32(p []float32) []float32 { return p[l.W : l.W+l.Out*l.In] }

// Bias32 is Bias for a float32 vector.
func (l Layer) Bias32(p []float32) []float32 { return p[l.B : l.B+l.Out] }

// sparseInput reports whether the first layer of the batch in nt.rows
// should gather the rows' non-zero entries (at most half the entries are
// non-zero) rather than multiply the dense contexts, which it then
// converts into nt.x (and their squares into xsq when it is not nil).
func (nt *net32) sparseInput(d *View, n int, xsq []float32) bool {
	in := nt.arch.In()
	nnz := 0
	for _, r := range nt.rows[:n] {
		nnz += d.nz.off[r+1] - d.nz.off[r]
	}
	if 2*nnz <= n*in {
		return true
	}
	for i, r := range nt.rows[:n] {
		dst := nt.x[i*in : (i+1)*in]
		for j, v := range d.x[r*in : (r+1)*in] {
			dst[j] = float32(v)
		}
	}
	if xsq != nil {
		kern.Square(xsq[:n*in], nt.x[:n*in])
	}
	return false
}

// affine sets z = 1 b^T + A W_T for the n rows of A (n×In) and a layer's
// engine-layout weights W_T (In×Out) and bias b.
func affine(z, a []float32, wT, b []float32, n int, ly Layer) {
	fillRows(z, b)
	kern.Sgemm(n, ly.Out, ly.In, a, ly.In, 1, wT, ly.Out, z, ly.Out)
}

// gatherAffine is affine for the first layer with a sparse input: row i of
// z is b plus the sum over the non-zero entries (c, v) of data row
// rows[i] of v^p times row c of W_T (kern.GatherAxpy), p = 1 for the means
// and 2 for the variances of the local reparameterization trick; sq is
// scratch for the squared values, of length at least In.
func gatherAffine(z []float32, d *View, rows []int, wT, b []float32, ly Layer, squared bool, sq []float32) {
	for i, r := range rows {
		zi := z[i*ly.Out : (i+1)*ly.Out]
		copy(zi, b)
		cols, vals := d.nz.row(r)
		if squared {
			vals = squareInto(sq, vals)
		}
		kern.GatherAxpy(zi, wT, ly.Out, cols, vals)
	}
}

// sparseT is the transpose of a batch's sparse first-layer input
// (compressed sparse columns): for every input c, the positions i in the
// batch of the data rows with a non-zero entry (c, v), and v (and v*v in
// sq), ordered by i and, within a row, by entry.
type sparseT struct {
	start []int32 // In+1 offsets into pos, val and sq
	pos   []int32
	val   []float32
	sq    []float32
}

// newSparseT allocates a sparseT for batches of up to maxBatch rows of in
// inputs with at most half the entries non-zero (sparseInput's bound).
func newSparseT(in, maxBatch int) sparseT {
	m := maxBatch * in / 2
	return sparseT{start: make([]int32, in+1), pos: make([]int32, m), val: make([]float32, m), sq: make([]float32, m)}
}

// build fills s with the non-zero entries of data rows rows of d by a
// counting sort on the input, and sq with their squares when squared.
func (s *sparseT) build(d *View, rows []int, squared bool) {
	start, pos, val := s.start, s.pos, s.val // locals: stores into pos would reload s's fields
	clear(start)
	for _, r := range rows {
		cols, _ := d.nz.row(r)
		for _, c := range cols {
			start[c+1]++
		}
	}
	for c := 1; c < len(start); c++ {
		start[c] += start[c-1]
	}
	// start[c] is now where input c's entries begin; it advances past
	// them as they are placed, and is shifted back after.
	for i, r := range rows {
		cols, vals := d.nz.row(r)
		vals = vals[:len(cols)]
		for k, c := range cols {
			p := start[c]
			pos[p], val[p] = int32(i), vals[k]
			start[c] = p + 1
		}
	}
	copy(start[1:], start)
	start[0] = 0
	if squared {
		nnz := start[len(start)-1]
		sq := s.sq[:nnz]
		for p, v := range val[:nnz] {
			sq[p] = v * v
		}
	}
}

// scatterGrad is the first layer's weight gradient for a sparse input
// (s built from the batch): dW_T += x^T G, adding v^p times row i of G
// into row c of dW_T for every non-zero entry (c, v) of the batch's row i,
// p = 1 for the means and 2 (squared) for the variances of the local
// reparameterization trick. It runs by input (kern.GatherAxpyRows): a
// gather of the rows of G into row c of dW_T, which stays in registers.
// That adds the same rounded products in the same order (i, then entry)
// as a kern.ScatterAxpy of every data row into dW_T, bit for bit; but the
// scatter read and wrote random rows of dW_T (46.8 kB for the paper's
// 117x100 layer, more than Zen 3's 32 kB L1), where the gather only reads
// G (25.6 kB at batch 64), and is faster (bench/kern.md measures both).
func (s *sparseT) scatterGrad(dwT, g []float32, out int, squared bool) {
	v := s.val
	if squared {
		v = s.sq
	}
	kern.GatherAxpyRows(dwT, out, out, g, out, s.start, s.pos, v)
}

// squareInto writes v∘v into dst and returns it (len(v) entries).
func squareInto(dst, v []float32) []float32 {
	dst = dst[:len(v)]
	for k, x := range v {
		dst[k] = x * x
	}
	return dst
}

// colSum32 adds the rows of the n×k matrix g into dst.
func colSum32(dst, g []float32, k int) {
	for i := 0; i < len(g); i += k {
		kern.Saxpy(1, g[i:i+k], dst)
	}
}

// forward is net.forward in float32 for the n data rows in nt.rows of d
// at the engine-layout point w:
//
//	Z_l = A_{l-1} W_l^T + 1 b_l^T,   A_l = relu(Z_l) for hidden layers,
//
// leaving f = Z_L in act[last]; the first layer gathers the non-zero
// entries of sparse contexts. It reports whether it did.
func (nt *net32) forward(w []float32, d *View, n int) bool {
	last := nt.last()
	sparse := nt.sparseInput(d, n, nil)
	for l, ly := range nt.arch.layers {
		z := nt.act[l][:n*ly.Out]
		switch {
		case l == 0 && sparse:
			gatherAffine(z, d, nt.rows[:n], ly.Weights32(w), ly.Bias32(w), ly, false, nil)
		case l == 0:
			affine(z, nt.x[:n*ly.In], ly.Weights32(w), ly.Bias32(w), n, ly)
		default:
			affine(z, nt.act[l-1][:n*ly.In], ly.Weights32(w), ly.Bias32(w), n, ly)
		}
		if l < last {
			kern.Relu(z)
		}
		nt.widen(l, d.x, nt.rows[:n], n)
	}
	return sparse
}

// backward is net.backward in float32: given G_L in grad[last] it adds
//
//	dW_l += G_l^T A_{l-1} (engine layout: A_{l-1}^T G_l),   db_l += G_l^T 1,
//	G_{l-1} = (G_l W_l) ∘ 1[A_{l-1} > 0]
//
// into dw, which the caller clears before the first batch. nt.wC holds
// the canonical weights of layers >= 1.
func (nt *net32) backward(dw []float32, d *View, n int, sparse bool) {
	for l := nt.last(); l >= 0; l-- {
		ly := nt.arch.layers[l]
		g := nt.grad[l][:n*ly.Out]
		colSum32(ly.Bias32(dw), g, ly.Out)
		if l == 0 && sparse {
			nt.tr.build(d, nt.rows[:n], false)
			nt.tr.scatterGrad(ly.Weights32(dw), g, ly.Out, false)
			continue
		}
		var in []float32
		if l > 0 {
			in = nt.act[l-1][:n*ly.In]
		} else {
			in = nt.x[:n*ly.In]
		}
		kern.Sgemm(ly.In, ly.Out, n, in, 1, ly.In, g, ly.Out, ly.Weights32(dw), ly.Out)
		if l > 0 {
			gp := nt.grad[l-1][:n*ly.In]
			clear(gp)
			kern.Sgemm(n, ly.In, ly.Out, g, ly.Out, 1, ly.Weights32(nt.wC), ly.In, gp, ly.In)
			kern.ReluMask(gp, in)
			nt.pack(l, n)
		}
	}
}

// evaluator32 implements Evaluator32.
type evaluator32 struct {
	lik *Likelihood
	net32
	noise noise
	out   outTerm

	// WeightReparam: the weight sample and its noise (engine layout).
	w, eps []float32

	// LocalReparam: s2 = sigma∘sigma (engine layout) and s2C its canonical
	// weight blocks; per layer the noise E (overwritten by dL/dV), sd =
	// sqrt(V) and sq = A∘A of the layer's input (layers >= 1); tmp holds
	// dL/dV s2_W.
	s2, s2C      []float32
	leps, sd, sq [][]float32
	tmp          []float32

	// RIS: as in evaluator, dz holds dz~/dM of each hidden layer, sd
	// dz~/dV, and leps RISSamples normals per unit; ris is the number of
	// samples per unit (0 for the other estimators).
	dz  [][]float32
	ris int
}

func newEvaluator32(lik *Likelihood, maxBatch int) *evaluator32 {
	a := lik.arch
	e := &evaluator32{lik: lik, net32: newNet32(a, maxBatch, true), noise: noise{reference: lik.opt.ReferenceNoise}, out: newOutTerm(lik)}
	switch lik.opt.Estimator {
	case WeightReparam:
		e.w = make([]float32, a.n)
		e.eps = make([]float32, a.n)
	case LocalReparam, RIS:
		e.s2 = make([]float32, a.n)
		e.s2C = make([]float32, a.n)
		e.xsq = make([]float32, maxBatch*a.In())
		e.leps = make([][]float32, len(a.layers))
		e.sd = make([][]float32, len(a.layers))
		e.sq = make([][]float32, len(a.layers))
		if lik.opt.Estimator == RIS {
			e.ris = lik.opt.RISSamples
			e.dz = make([][]float32, len(a.layers)-1)
		}
		maxIn := 0
		for l, ly := range a.layers {
			k := 1
			if e.ris > 0 && l < len(a.layers)-1 {
				k = e.ris
				e.dz[l] = make([]float32, maxBatch*ly.Out)
			}
			e.leps[l] = make([]float32, maxBatch*ly.Out*k)
			e.sd[l] = make([]float32, maxBatch*ly.Out)
			if l > 0 {
				e.sq[l] = make([]float32, maxBatch*ly.In)
				maxIn = max(maxIn, ly.In)
			}
		}
		e.tmp = make([]float32, maxBatch*maxIn)
	}
	return e
}

// ToEngine implements Evaluator32.
func (e *evaluator32) ToEngine(dst []float32, src []float64) { e.arch.ToEngine(dst, src) }

// FromEngine implements Evaluator32.
func (e *evaluator32) FromEngine(dst []float64, src []float32) { e.arch.FromEngine(dst, src) }

// batch sets nt.rows to positions [lo, hi) of rows (or the data rows
// lo..hi-1 if rows is nil) and returns their number.
func (e *evaluator32) batch(rows []int, lo, hi int) int {
	nrows := e.lik.data.Len()
	for i := lo; i < hi; i++ {
		r := i
		if rows != nil {
			r = rows[i]
			if r < 0 || r >= nrows {
				panic("nn: row index out of range")
			}
		}
		e.rows[i-lo] = r
	}
	return hi - lo
}

// outGrad is evaluator.outGrad on act[last] and grad[last] in float32,
// with the sums accumulated in float64.
func (e *evaluator32) outGrad(n int) {
	k := e.arch.Out()
	last := e.last()
	f, g := e.act[last], e.grad[last]
	d := &e.lik.data
	for i, r := range e.rows[:n] {
		row := g[i*k : (i+1)*k]
		clear(row)
		a := d.arm[r]
		row[a] = float32(e.out.row(d.y[r], a, float64(f[i*k+a]), d.X(r)))
	}
}

// ExpectedLogLik implements Evaluator32.
func (e *evaluator32) ExpectedLogLik(dMu, dSigma []float32, dHyper []float64, mu, sigma []float32, hyper []float64, rows []int, rng *rand.Rand) float64 {
	a := e.arch
	for _, v := range [][]float32{dMu, dSigma, mu, sigma} {
		if len(v) != a.n {
			panic("nn: Evaluator32 vector length does not match Arch.NumParams")
		}
	}
	if len(hyper) != e.lik.NumHyper() || len(dHyper) != e.lik.NumHyper() {
		panic("nn: len(hyper) and len(dHyper) must be NumHyper")
	}
	e.out.start(hyper)
	clear(dMu)
	clear(dSigma)
	switch e.lik.opt.Estimator {
	case Deterministic:
		e.canonical(e.wC, mu)
		return e.pointLogLik(dMu, dHyper, mu, rows)
	case WeightReparam:
		// w = mu + sigma∘eps; dMu = g, dSigma = g∘eps.
		e.noise.start(rng)
		e.sampleWeights(mu, sigma)
		ll := e.pointLogLik(dMu, dHyper, e.w, rows)
		kern.Mul(dSigma, dMu, e.eps, 1)
		return ll
	default:
		e.noise.start(rng)
		return e.localReparam(dMu, dSigma, dHyper, mu, sigma, rows)
	}
}

// pointLogLik is the log-likelihood at the engine-layout point w and its
// gradient added into dw (cleared by the caller); wC holds w's canonical
// weights.
func (e *evaluator32) pointLogLik(dw []float32, dHyper []float64, w []float32, rows []int) float64 {
	n := e.numRows(rows)
	d := &e.lik.data
	for lo := 0; lo < n; lo += e.max {
		m := e.batch(rows, lo, min(lo+e.max, n))
		sparse := e.forward(w, d, m)
		e.outGrad(m)
		e.backward(dw, d, m, sparse)
	}
	return e.out.finish(dHyper)
}

func (e *evaluator32) numRows(rows []int) int {
	if rows == nil {
		return e.lik.data.Len()
	}
	return len(rows)
}

// sampleWeights draws eps ~ N(0, I) and sets w = mu + sigma∘eps in the
// engine layout and wC to w's canonical weights. With reference noise
// the normals are drawn in the order of the canonical flat vector, as
// evaluator.sampleWeights draws them.
func (e *evaluator32) sampleWeights(mu, sigma []float32) {
	if !e.noise.reference {
		e.noise.fill(e.eps)
		kern.AddMul(e.w, mu, sigma, e.eps)
		e.canonical(e.wC, e.w)
		return
	}
	rng := e.noise.rng
	for _, ly := range e.arch.layers {
		w, ep := ly.Weights32(e.w), ly.Weights32(e.eps)
		m, s := ly.Weights32(mu), ly.Weights32(sigma)
		wc := ly.Weights32(e.wC)
		for o := range ly.Out {
			for i := range ly.In {
				z := float32(rng.NormFloat64())
				t := i*ly.Out + o
				v := m[t] + s[t]*z
				ep[t], w[t] = z, v
				wc[o*ly.In+i] = v
			}
		}
		w, ep = ly.Bias32(e.w), ly.Bias32(e.eps)
		m, s = ly.Bias32(mu), ly.Bias32(sigma)
		for i := range w {
			z := float32(rng.NormFloat64())
			ep[i], w[i] = z, m[i]+s[i]*z
		}
	}
}

// localReparam is evaluator.localReparam on the fast engine: dSigma first
// accumulates dL/d(sigma^2), then is multiplied by 2 sigma.
func (e *evaluator32) localReparam(dMu, dSigma []float32, dHyper []float64, mu, sigma []float32, rows []int) float64 {
	kern.Square(e.s2, sigma)
	e.canonical(e.wC, mu)
	e.canonical(e.s2C, e.s2)
	n := e.numRows(rows)
	d := &e.lik.data
	for lo := 0; lo < n; lo += e.max {
		m := e.batch(rows, lo, min(lo+e.max, n))
		sparse := e.forwardLocal(mu, d, m)
		e.outGrad(m)
		e.backwardLocal(dMu, dSigma, d, m, sparse)
	}
	kern.Mul(dSigma, sigma, dSigma, 2) // d/dsigma = 2 sigma d/d(sigma^2)
	return e.out.finish(dHyper)
}

// forwardLocal is evaluator.forwardLocal on the fast engine (Kingma,
// Salimans & Welling 2015, Sec. 2.3):
//
//	M_l = A_{l-1} mu_W^T + 1 mu_b^T,
//	V_l = (A_{l-1}∘A_{l-1}) (sigma_W∘sigma_W)^T + 1 (sigma_b∘sigma_b)^T,
//	Z_l = M_l + sqrt(V_l)∘E_l,   A_l = relu(Z_l) for hidden layers,
//
// with E_l drawn row by row (as the float64 evaluator draws it, with
// reference noise), or under RIS, for hidden layers, A_l = risLayer's
// first-moment estimate from M_l, V_l and RISSamples normals per unit. It
// reports whether the first layer took the sparse path.
func (e *evaluator32) forwardLocal(mu []float32, d *View, n int) bool {
	last := e.last()
	sparse := e.sparseInput(d, n, e.xsq)
	for l, ly := range e.arch.layers {
		z := e.act[l][:n*ly.Out]
		sd := e.sd[l][:n*ly.Out]
		if l == 0 {
			e.lrtFirst(z, sd, d, n, sparse, mu, e.s2, e.xsq)
		} else {
			lrtMoments(z, sd, e.act[l-1][:n*ly.In], e.sq[l][:n*ly.In], mu, e.s2, ly, n)
		}
		if e.ris > 0 && l < last {
			eps := e.leps[l][:n*ly.Out*e.ris]
			e.noise.fill(eps)
			risLayer(z, sd, e.dz[l][:n*ly.Out], eps, e.ris, e.lik.opt.RISFixedProposal)
			e.widen(l, d.x, e.rows[:n], n)
			continue
		}
		lrtSample(z, sd, e.leps[l][:n*ly.Out], &e.noise)
		if l < last {
			kern.Relu(z)
		}
		e.widen(l, d.x, e.rows[:n], n)
	}
	return sparse
}

// lrtFirst writes the first layer's pre-activation means M and variances
// V for the n rows in nt.rows of d into z and v, by gathering their
// non-zero entries when sparse and otherwise from nt.x and its square
// xsq (see sparseInput); mu and s2 are the engine-layout means and
// variances of the weights.
func (nt *net32) lrtFirst(z, v []float32, d *View, n int, sparse bool, mu, s2, xsq []float32) {
	ly := nt.arch.layers[0]
	if sparse {
		gatherAffine(z, d, nt.rows[:n], ly.Weights32(mu), ly.Bias32(mu), ly, false, nil)
		gatherAffine(v, d, nt.rows[:n], ly.Weights32(s2), ly.Bias32(s2), ly, true, nt.vsq)
		return
	}
	affine(z, nt.x[:n*ly.In], ly.Weights32(mu), ly.Bias32(mu), n, ly)
	affine(v, xsq[:n*ly.In], ly.Weights32(s2), ly.Bias32(s2), n, ly)
}

// lrtMoments writes the pre-activation means and variances of layer ly
// (not the first) for the n rows of its input a into z and v, with sq
// receiving a∘a.
func lrtMoments(z, v, a, sq, mu, s2 []float32, ly Layer, n int) {
	kern.Square(sq, a)
	affine(z, a, ly.Weights32(mu), ly.Bias32(mu), n, ly)
	affine(v, sq, ly.Weights32(s2), ly.Bias32(s2), n, ly)
}

// lrtSample draws eps (row-major) from nz and sets v = sqrt(v) and
// z = z + v∘eps (kern.LRTForward), leaving the noise in eps.
func lrtSample(z, v, eps []float32, nz *noise) {
	nz.fill(eps)
	kern.LRTForward(z, v, eps)
}

// backwardLocal is evaluator.backwardLocal on the fast engine: with
// D_l = G_l∘E_l / (2 sqrt(V_l)) it adds
//
//	dmu_W += G_l^T A_{l-1},   ds2_W += D_l^T (A_{l-1}∘A_{l-1}),   (and the biases)
//	G_{l-1} = (G_l mu_W + 2 A_{l-1}∘(D_l s2_W)) ∘ 1[A_{l-1} > 0]
//
// into dMu and dS2 (engine layout, cleared by the caller). Under RIS a
// hidden layer's first step is evaluator.backwardLocal's:
// D_l = G_l∘(dz~/dV), G_l <- G_l∘(dz~/dM).
func (e *evaluator32) backwardLocal(dMu, dS2 []float32, d *View, n int, sparse bool) {
	for l := e.last(); l >= 0; l-- {
		ly := e.arch.layers[l]
		g := e.grad[l][:n*ly.Out]
		dv := e.leps[l][:n*ly.Out]
		if e.ris > 0 && l < e.last() {
			kern.Mul(dv, g, e.sd[l][:n*ly.Out], 1)
			kern.Mul(g, g, e.dz[l][:n*ly.Out], 1)
		} else {
			kern.LRTBackward(dv, g, e.sd[l][:n*ly.Out])
		}
		colSum32(ly.Bias32(dMu), g, ly.Out)
		colSum32(ly.Bias32(dS2), dv, ly.Out)
		if l == 0 && sparse {
			e.tr.build(d, e.rows[:n], true)
			e.tr.scatterGrad(ly.Weights32(dMu), g, ly.Out, false)
			e.tr.scatterGrad(ly.Weights32(dS2), dv, ly.Out, true)
			continue
		}
		var in, sq []float32
		if l > 0 {
			in, sq = e.act[l-1][:n*ly.In], e.sq[l][:n*ly.In]
		} else {
			in, sq = e.x[:n*ly.In], e.xsq[:n*ly.In]
		}
		kern.Sgemm(ly.In, ly.Out, n, in, 1, ly.In, g, ly.Out, ly.Weights32(dMu), ly.Out)
		kern.Sgemm(ly.In, ly.Out, n, sq, 1, ly.In, dv, ly.Out, ly.Weights32(dS2), ly.Out)
		if l > 0 {
			gp := e.grad[l-1][:n*ly.In]
			clear(gp)
			kern.Sgemm(n, ly.In, ly.Out, g, ly.Out, 1, ly.Weights32(e.wC), ly.In, gp, ly.In)
			t := e.tmp[:n*ly.In]
			clear(t)
			kern.Sgemm(n, ly.In, ly.Out, dv, ly.Out, 1, ly.Weights32(e.s2C), ly.In, t, ly.In)
			kern.ReluBackward(gp, in, t)
			e.pack(l, n)
		}
	}
}
