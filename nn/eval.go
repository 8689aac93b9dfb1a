package nn

import (
	"math"
	"math/rand/v2"
)

// net holds the buffers of a forward and backward pass through an Arch at
// a point w for batches of at most max rows.
type net struct {
	arch Arch
	max  int
	act  [][]float64 // act[l]: output of layer l, max×Out_l; ReLU applied for hidden layers
	grad [][]float64 // grad[l]: gradient with respect to the pre-activation of layer l; nil without backward
	wT   []float64   // weight blocks transposed (In×Out, at the same offsets); biases unused
	tT   []float64   // In_0×Out_0 scratch for the first layer's transposed weight gradient
}

func newNet(a Arch, maxBatch int, backward bool) net {
	if a.NumLayers() == 0 {
		panic("nn: zero Arch; use NewArch")
	}
	if maxBatch < 1 {
		panic("nn: maxBatch must be positive")
	}
	nt := net{arch: a, max: maxBatch, act: make([][]float64, len(a.layers)), wT: make([]float64, a.n)}
	if backward {
		nt.grad = make([][]float64, len(a.layers))
		nt.tT = make([]float64, a.layers[0].In*a.layers[0].Out)
	}
	for l := range a.layers {
		nt.act[l] = make([]float64, maxBatch*a.actSize(l))
		if backward {
			nt.grad[l] = make([]float64, maxBatch*a.actSize(l))
		}
	}
	return nt
}

// widen makes the output of layer l the output layer's input [a_l; x]
// when l is the last hidden layer of a skip connection (widenSkip), for
// the n rows of the batch whose contexts are x.
func (nt *net) widen(l int, x []float64, n int) {
	if nt.arch.skipLayer(l) {
		widenSkip(nt.act[l], n, nt.arch.layers[l].Out, nt.arch.layers[l+1].In, x, nil)
	}
}

// pack keeps, of the gradient G_{l-1} the output layer l passed down
// (rows of its input width), the columns of the hidden units (packSkip).
func (nt *net) pack(l int, n int) {
	if nt.arch.skipLayer(l - 1) {
		packSkip(nt.grad[l-1], n, nt.arch.layers[l-1].Out, nt.arch.layers[l].In)
	}
}

func (nt *net) last() int { return len(nt.arch.layers) - 1 }

// input returns the input of layer l for a batch whose contexts are x.
func (nt *net) input(l int, x []float64) []float64 {
	if l == 0 {
		return x
	}
	return nt.act[l-1]
}

// forward computes, for the n rows of x (row-major n×In),
//
//	Z_l = A_{l-1} W_l^T + 1 b_l^T,   A_l = relu(Z_l) for hidden layers,
//
// leaving f = Z_L in act[last] (n×Out). wT must hold the transposed weight
// blocks of w (see transposeWeights): the product is then the
// non-transposed A_{l-1} (W_l^T), whose Gemm kernel skips the zero entries
// of A_{l-1}, that is the inactive ReLU units and the zeros of one-hot
// contexts.
func (nt *net) forward(w, wT, x []float64, n int) {
	last := nt.last()
	for l, ly := range nt.arch.layers {
		in := nt.input(l, x)
		z := nt.act[l][:n*ly.Out]
		fillRows(z, ly.Bias(w))
		gemm(noTrans, noTrans, n, ly.Out, ly.In, 1, in, ly.In, ly.Weights(wT), ly.Out, 1, z, ly.Out)
		if l < last {
			relu(z)
		}
		nt.widen(l, x, n)
	}
}

// backward takes G_L = d/df in grad[last] and computes, layer by layer
// from the top,
//
//	dW_l = beta dW_l + G_l^T A_{l-1},   db_l = beta db_l + G_l^T 1,
//	G_{l-1} = (G_l W_l) ∘ 1[A_{l-1} > 0],
//
// skipping the gradient with respect to the contexts (l = 0). The Gemm
// kernels skip the zero entries of G_l; for the first layer the product is
// taken as (x^T G_0)^T when the contexts are sparser than G_0 (see
// weightGrad).
func (nt *net) backward(dw, w, x []float64, n int, beta float64) {
	for l := nt.last(); l >= 0; l-- {
		ly := nt.arch.layers[l]
		in := nt.input(l, x)
		g := nt.grad[l][:n*ly.Out]
		nt.weightGrad(l, ly.Weights(dw), g, in, n, beta)
		colSum(ly.Bias(dw), g, ly.Out, beta)
		if l > 0 {
			gp := nt.grad[l-1][:n*ly.In]
			gemm(noTrans, noTrans, n, ly.In, ly.Out, 1, g, ly.Out, ly.Weights(w), ly.In, 0, gp, ly.In)
			reluMask(gp, in[:n*ly.In])
			nt.pack(l, n)
		}
	}
}

// weightGrad sets dW = beta dW + G^T A for layer l (dW Out×In, G n×Out,
// A n×In). gonum's Gemm skips zero entries of its first operand only, so
// for the first layer, whose input may be sparse (one-hot contexts), it
// computes T = A^T G (In×Out) instead when A has fewer non-zeros per
// output than G per input, and adds T^T into dW.
func (nt *net) weightGrad(l int, dW, g, a []float64, n int, beta float64) {
	ly := nt.arch.layers[l]
	a = a[:n*ly.In]
	if l > 0 || nt.tT == nil || nnz(a)*ly.Out+ly.In*ly.Out >= nnz(g)*ly.In {
		gemm(trans, noTrans, ly.Out, ly.In, n, 1, g, ly.Out, a, ly.In, beta, dW, ly.In)
		return
	}
	nt.weightGradT(ly, dW, g, a, n, beta)
}

// weightGradT is weightGrad through T = A^T G.
func (nt *net) weightGradT(ly Layer, dW, g, a []float64, n int, beta float64) {
	t := nt.tT
	gemm(trans, noTrans, ly.In, ly.Out, n, 1, a, ly.In, g, ly.Out, 0, t, ly.Out)
	for o := range ly.Out {
		row := dW[o*ly.In : (o+1)*ly.In]
		if beta == 0 {
			for i := range row {
				row[i] = t[i*ly.Out+o]
			}
		} else {
			for i := range row {
				row[i] += t[i*ly.Out+o]
			}
		}
	}
}

// nnz returns the number of non-zero entries of a.
func nnz(a []float64) int {
	k := 0
	for _, v := range a {
		if v != 0 {
			k++
		}
	}
	return k
}

// transposeWeights writes the transpose of every weight block of w into
// the same block of wT: wT[W + i*Out + o] = w[W + o*In + i].
func transposeWeights(a Arch, wT, w []float64) {
	for _, ly := range a.layers {
		transposeBlock(ly.Weights(wT), ly.Weights(w), ly.Out, ly.In)
	}
}

// transposeBlock sets dst (c×r) to the transpose of src (r×c).
func transposeBlock[T float32 | float64](dst, src []T, r, c int) {
	src, dst = src[:r*c], dst[:r*c]
	for o := range r {
		row := src[o*c : (o+1)*c]
		for i, v := range row {
			dst[i*r+o] = v
		}
	}
}

// fillRows sets every row of the row-major matrix z (len(b) columns) to b.
func fillRows[T float32 | float64](z, b []T) {
	for i := 0; i < len(z); i += len(b) {
		copy(z[i:i+len(b)], b)
	}
}

// colSum sets dst = beta*dst + the column sums of the row-major matrix g
// with k columns; beta is 0 or 1.
func colSum(dst, g []float64, k int, beta float64) {
	if beta == 0 {
		clear(dst)
	}
	for i := 0; i < len(g); i += k {
		row := g[i : i+k]
		for j, v := range row {
			dst[j] += v
		}
	}
}

// relu sets z = max(z, 0) elementwise, without branches: the signs of
// pre-activations are random, and a mispredicted branch per entry costs
// more than the arithmetic.
func relu(z []float64) {
	for i, v := range z {
		z[i] = max(v, 0)
	}
}

// active returns g if a > 0 and 0 otherwise, for a >= 0 or NaN (an output
// of relu), without branches: a > 0 exactly when its bits are not zero.
func active(g, a float64) float64 {
	b := math.Float64bits(a)
	m := -((b | -b) >> 63) // all ones if b != 0
	return math.Float64frombits(math.Float64bits(g) & m)
}

// reluMask zeroes g where the activation a = relu(z) is zero (z <= 0).
func reluMask(g, a []float64) {
	a = a[:len(g)]
	for i, v := range a {
		g[i] = active(g[i], v)
	}
}

// evaluator implements Evaluator.
type evaluator struct {
	lik *Likelihood
	net
	out outTerm

	// Gathered batch.
	xb []float64
	ab []int
	yb []float64

	// WeightReparam: the weight sample and its noise.
	w, eps []float64

	// LocalReparam and RIS: s2 = sigma∘sigma; per layer the noise E
	// (overwritten by dL/dV in the backward pass; RISSamples per unit in
	// RIS's hidden layers), sd = sqrt(V) (RIS's hidden layers: dz~/dV),
	// sq = A∘A of the layer's input; tmp holds dL/dV s2_W. RIS: dz holds
	// dz~/dM of each hidden layer and ris the number of samples per unit
	// (0 for the other estimators).
	s2, s2T      []float64
	leps, sd, sq [][]float64
	dz           [][]float64
	tmp          []float64
	ris          int
}

func newEvaluator(lik *Likelihood, maxBatch int) *evaluator {
	a := lik.arch
	e := &evaluator{
		lik: lik,
		net: newNet(a, maxBatch, true),
		out: newOutTerm(lik),
		xb:  make([]float64, maxBatch*a.In()),
		ab:  make([]int, maxBatch),
		yb:  make([]float64, maxBatch),
	}
	switch lik.opt.Estimator {
	case WeightReparam:
		e.w = make([]float64, a.n)
		e.eps = make([]float64, a.n)
	case LocalReparam, RIS:
		e.s2 = make([]float64, a.n)
		e.s2T = make([]float64, a.n)
		e.leps = make([][]float64, len(a.layers))
		e.sd = make([][]float64, len(a.layers))
		e.sq = make([][]float64, len(a.layers))
		if lik.opt.Estimator == RIS {
			e.ris = lik.opt.RISSamples
			e.dz = make([][]float64, len(a.layers)-1)
		}
		maxIn := 0
		for l, ly := range a.layers {
			k := 1
			if e.ris > 0 && l < len(a.layers)-1 {
				k = e.ris
				e.dz[l] = make([]float64, maxBatch*ly.Out)
			}
			e.leps[l] = make([]float64, maxBatch*ly.Out*k)
			e.sd[l] = make([]float64, maxBatch*ly.Out)
			e.sq[l] = make([]float64, maxBatch*ly.In)
			if l > 0 {
				maxIn = max(maxIn, ly.In)
			}
		}
		e.tmp = make([]float64, maxBatch*maxIn)
	}
	return e
}

// numRows returns the number of rows selected by rows.
func (e *evaluator) numRows(rows []int) int {
	if rows == nil {
		return e.lik.data.Len()
	}
	return len(rows)
}

// batch returns the contexts, arms and rewards of positions [lo, hi) of
// rows, or of the dataset's rows lo..hi-1 if rows is nil (without copying).
func (e *evaluator) batch(rows []int, lo, hi int) (x []float64, arms []int, ys []float64) {
	d := &e.lik.data
	if rows == nil {
		return d.x[lo*d.dim : hi*d.dim], d.arm[lo:hi], d.y[lo:hi]
	}
	n := hi - lo
	for i, r := range rows[lo:hi] {
		if r < 0 || r >= len(d.y) {
			panic("nn: row index out of range")
		}
		copy(e.xb[i*d.dim:(i+1)*d.dim], d.x[r*d.dim:(r+1)*d.dim])
		e.ab[i] = d.arm[r]
		e.yb[i] = d.y[r]
	}
	return e.xb[:n*d.dim], e.ab[:n], e.yb[:n]
}

// outGrad reads f from act[last] and writes d log p / df into grad[last]
// for the rows of the batch (contexts x, played arms, rewards ys;
// outTerm.row), zero for the arms not played, adding the rows to e.out.
func (e *evaluator) outGrad(x []float64, arms []int, ys []float64) {
	k := e.arch.Out()
	last := e.last()
	f, g := e.act[last], e.grad[last]
	d := e.arch.In()
	for i, y := range ys {
		row := g[i*k : (i+1)*k]
		clear(row)
		a := arms[i]
		row[a] = e.out.row(y, a, f[i*k+a], x[i*d:(i+1)*d])
	}
}

func (e *evaluator) checkHyper(dHyper, hyper []float64) {
	if len(hyper) != e.lik.NumHyper() || dHyper != nil && len(dHyper) != e.lik.NumHyper() {
		panic("nn: len(hyper) and len(dHyper) must be NumHyper")
	}
	e.out.start(hyper)
}

// LogLik implements Evaluator.
func (e *evaluator) LogLik(dW, dHyper, w, hyper []float64, rows []int) float64 {
	e.arch.checkLen(w, "w")
	if dW != nil {
		e.arch.checkLen(dW, "dW")
	}
	e.checkHyper(dHyper, hyper)
	transposeWeights(e.arch, e.wT, w)
	return e.pointLogLik(dW, dHyper, w, rows)
}

// pointLogLik is LogLik after the checks, with wT holding the transposed
// weights of w.
func (e *evaluator) pointLogLik(dW, dHyper, w []float64, rows []int) float64 {
	n := e.numRows(rows)
	if n == 0 && dW != nil {
		clear(dW)
	}
	for lo := 0; lo < n; lo += e.max {
		hi := min(lo+e.max, n)
		x, arms, ys := e.batch(rows, lo, hi)
		e.forward(w, e.wT, x, hi-lo)
		e.outGrad(x, arms, ys)
		if dW != nil {
			beta := 1.0
			if lo == 0 {
				beta = 0
			}
			e.backward(dW, w, x, hi-lo, beta)
		}
	}
	return e.out.finish(dHyper)
}

// ExpectedLogLik implements Evaluator.
func (e *evaluator) ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper []float64, rows []int, rng *rand.Rand) float64 {
	a := e.arch
	a.checkLen(dMu, "dMu")
	a.checkLen(dSigma, "dSigma")
	a.checkLen(mu, "mu")
	a.checkLen(sigma, "sigma")
	if len(dHyper) != e.lik.NumHyper() {
		panic("nn: len(dHyper) must be NumHyper")
	}
	e.checkHyper(dHyper, hyper)
	switch e.lik.opt.Estimator {
	case Deterministic:
		clear(dSigma)
		transposeWeights(e.arch, e.wT, mu)
		return e.pointLogLik(dMu, dHyper, mu, rows)
	case WeightReparam:
		// w = mu + sigma∘eps (Blundell et al. 2015, Sec. 3.2, with
		// sigma given directly rather than as softplus(rho));
		// dMu = g, dSigma = g∘eps.
		e.sampleWeights(mu, sigma, rng)
		ll := e.pointLogLik(dMu, dHyper, e.w, rows)
		for j, g := range dMu {
			dSigma[j] = g * e.eps[j]
		}
		return ll
	default:
		return e.localReparam(dMu, dSigma, dHyper, mu, sigma, rows, rng)
	}
}

// sampleWeights draws eps ~ N(0, I) in the order of the flat parameter
// vector and sets w = mu + sigma∘eps and wT to w's transposed weights.
func (e *evaluator) sampleWeights(mu, sigma []float64, rng *rand.Rand) {
	for _, ly := range e.arch.layers {
		w, wT, ep := ly.Weights(e.w), ly.Weights(e.wT), ly.Weights(e.eps)
		m, s := ly.Weights(mu), ly.Weights(sigma)
		for o := range ly.Out {
			for i := o * ly.In; i < (o+1)*ly.In; i++ {
				z := rng.NormFloat64()
				v := m[i] + s[i]*z
				ep[i], w[i] = z, v
				wT[(i-o*ly.In)*ly.Out+o] = v
			}
		}
		w, ep = ly.Bias(e.w), ly.Bias(e.eps)
		m, s = ly.Bias(mu), ly.Bias(sigma)
		for i := range w {
			z := rng.NormFloat64()
			ep[i], w[i] = z, m[i]+s[i]*z
		}
	}
}

// squareSigma sets s2 = sigma∘sigma and s2T to its transposed weights.
func (e *evaluator) squareSigma(sigma []float64) {
	for _, ly := range e.arch.layers {
		s2, s2T, s := ly.Weights(e.s2), ly.Weights(e.s2T), ly.Weights(sigma)
		for o := range ly.Out {
			for i := o * ly.In; i < (o+1)*ly.In; i++ {
				v := s[i] * s[i]
				s2[i] = v
				s2T[(i-o*ly.In)*ly.Out+o] = v
			}
		}
		s2, s = ly.Bias(e.s2), ly.Bias(sigma)
		for i, v := range s {
			s2[i] = v * v
		}
	}
}

// localReparam is ExpectedLogLik under LocalReparam and RIS. dSigma first
// accumulates dL/d(sigma^2), then is multiplied by 2 sigma.
func (e *evaluator) localReparam(dMu, dSigma, dHyper, mu, sigma []float64, rows []int, rng *rand.Rand) float64 {
	e.squareSigma(sigma)
	transposeWeights(e.arch, e.wT, mu)
	n := e.numRows(rows)
	if n == 0 {
		clear(dMu)
		clear(dSigma)
	}
	for lo := 0; lo < n; lo += e.max {
		hi := min(lo+e.max, n)
		x, arms, ys := e.batch(rows, lo, hi)
		e.forwardLocal(mu, x, hi-lo, rng)
		e.outGrad(x, arms, ys)
		beta := 1.0
		if lo == 0 {
			beta = 0
		}
		e.backwardLocal(dMu, dSigma, mu, x, hi-lo, beta)
	}
	for j, s := range sigma {
		dSigma[j] *= 2 * s
	}
	return e.out.finish(dHyper)
}

// forwardLocal is the forward pass of the local reparameterization trick
// (Kingma, Salimans & Welling 2015, Sec. 2.3, for a factorized Gaussian
// posterior on the weights and biases), for the n rows of x:
//
//	M_l = A_{l-1} mu_W^T + 1 mu_b^T,
//	V_l = (A_{l-1}∘A_{l-1}) (sigma_W∘sigma_W)^T + 1 (sigma_b∘sigma_b)^T,
//	Z_l = M_l + sqrt(V_l)∘E_l,   E_l ~ N(0, I) drawn row by row,
//	A_l = relu(Z_l) for hidden layers.
//
// Under RIS a hidden layer's output A_l is instead the first-moment
// estimate of risLayer from M_l, V_l and RISSamples normals per unit,
// drawn row by row and unit by unit (ris.go).
func (e *evaluator) forwardLocal(mu, x []float64, n int, rng *rand.Rand) {
	last := e.last()
	for l, ly := range e.arch.layers {
		in := e.input(l, x)[:n*ly.In]
		sq := e.sq[l][:n*ly.In]
		for i, v := range in {
			sq[i] = v * v
		}
		z := e.act[l][:n*ly.Out]
		fillRows(z, ly.Bias(mu))
		gemm(noTrans, noTrans, n, ly.Out, ly.In, 1, in, ly.In, ly.Weights(e.wT), ly.Out, 1, z, ly.Out)
		sd := e.sd[l][:n*ly.Out]
		fillRows(sd, ly.Bias(e.s2))
		gemm(noTrans, noTrans, n, ly.Out, ly.In, 1, sq, ly.In, ly.Weights(e.s2T), ly.Out, 1, sd, ly.Out)
		if e.ris > 0 && l < last {
			ep := e.leps[l][:n*ly.Out*e.ris]
			for i := range ep {
				ep[i] = rng.NormFloat64()
			}
			risLayer(z, sd, e.dz[l][:n*ly.Out], ep, e.ris, e.lik.opt.RISFixedProposal)
			e.widen(l, x, n)
			continue
		}
		ep := e.leps[l][:n*ly.Out]
		for i, v := range sd {
			s := math.Sqrt(v)
			sd[i] = s
			ep[i] = rng.NormFloat64()
			z[i] += s * ep[i]
		}
		if l < last {
			relu(z)
		}
		e.widen(l, x, n)
	}
}

// backwardLocal takes G_L = dL/dZ_L in grad[last] and computes, from the
// top, with D_l = dL/dV_l = G_l∘E_l / (2 sqrt(V_l)) (zero where V_l = 0):
//
//	dmu_W   = beta dmu_W   + G_l^T A_{l-1},        dmu_b   = beta dmu_b   + G_l^T 1,
//	ds2_W   = beta ds2_W   + D_l^T (A_{l-1}∘A_{l-1}), ds2_b = beta ds2_b + D_l^T 1,
//	G_{l-1} = (G_l mu_W + 2 A_{l-1}∘(D_l s2_W)) ∘ 1[A_{l-1} > 0],
//
// where s2 = sigma∘sigma; ds2 is written into dS2. Under RIS, grad[l] of
// a hidden layer holds dL/dz~_l, and the first step is instead
//
//	D_l = G_l∘(dz~_l/dV_l),   G_l <- G_l∘(dz~_l/dM_l),
//
// with the proposal held fixed (ris.go); the mask 1[A_{l-1} > 0] then
// changes nothing, since dz~/dM = dz~/dV = 0 wherever z~ = 0.
func (e *evaluator) backwardLocal(dMu, dS2, mu, x []float64, n int, beta float64) {
	for l := e.last(); l >= 0; l-- {
		ly := e.arch.layers[l]
		in := e.input(l, x)[:n*ly.In]
		sq := e.sq[l][:n*ly.In]
		g := e.grad[l][:n*ly.Out]
		sd := e.sd[l][:n*ly.Out]
		d := e.leps[l][:n*ly.Out]
		if e.ris > 0 && l < e.last() {
			dz := e.dz[l][:n*ly.Out]
			for i, v := range sd {
				d[i] = g[i] * v
				g[i] *= dz[i]
			}
		} else {
			for i, s := range sd {
				if s > 0 {
					d[i] = g[i] * d[i] / (2 * s)
				} else {
					d[i] = 0
				}
			}
		}
		e.weightGrad(l, ly.Weights(dMu), g, in, n, beta)
		colSum(ly.Bias(dMu), g, ly.Out, beta)
		e.weightGrad(l, ly.Weights(dS2), d, sq, n, beta)
		colSum(ly.Bias(dS2), d, ly.Out, beta)
		if l > 0 {
			gp := e.grad[l-1][:n*ly.In]
			gemm(noTrans, noTrans, n, ly.In, ly.Out, 1, g, ly.Out, ly.Weights(mu), ly.In, 0, gp, ly.In)
			t := e.tmp[:n*ly.In]
			gemm(noTrans, noTrans, n, ly.In, ly.Out, 1, d, ly.Out, ly.Weights(e.s2), ly.In, 0, t, ly.In)
			t = t[:len(in)]
			gp = gp[:len(in)]
			for i, v := range in {
				gp[i] = active(gp[i]+2*v*t[i], v)
			}
			e.pack(l, n)
		}
	}
}
