package nn

import "math"

// GGNDiag writes into dst (length NumParams; allocated when nil) the
// diagonal of the generalized Gauss-Newton matrix of the negative
// log-likelihood at w, the precision that Laplace's method adds to the
// prior's (Khan 2018, Section 1, with the Gauss-Newton approximation of
// the Hessian, Graves 2011):
//
//	G = sum_i J_i^T h_i J_i,   J_i = d f_{a_i}(x_i; w) / dw,
//
// with h_i the curvature of -log p(y_i | f) in the played arm's output f:
// Scale^2/s2_{a_i} for a Gaussian likelihood (s2_a the arm's noise
// variance, NoiseVars), p_i (1 - p_i) with p_i = sigmoid(f) for a
// Bernoulli one (its exact Hessian, which does not depend on y_i),
// only the played arm's output entering each row. For a weight W_l[o,k]
// of layer l the row's derivative is g_{i,o} a_{i,k}, with g_i the
// backpropagated derivative of the played output with respect to the
// layer's pre-activations and a_i its input, so
//
//	diag(G) on W_l = (G_l∘G_l)^T (A_{l-1}∘A_{l-1}),   on b_l: 1^T (G_l∘G_l),
//
// where G_l starts from sqrt(h_i) at the played output,
//
// computed batch by batch with the reference path's forward pass and
// the same backward recursion G_{l-1} = (G_l W_l)∘1[A_{l-1} > 0]. Where
// the residuals are zero, G is the Hessian of -log p(y | x, w) exactly
// (TestGGNDiagFiniteDifference). It runs in float64 and allocates its
// scratch space.
func (l *Likelihood) GGNDiag(dst, w, hyper []float64) []float64 {
	a := l.arch
	a.checkLen(w, "w")
	if dst == nil {
		dst = make([]float64, a.n)
	}
	a.checkLen(dst, "dst")
	clear(dst)
	s2 := l.NoiseVars(nil, hyper)
	lam := make([]float64, len(s2)) // sqrt(Scale^2/s2_a)
	for k, v := range s2 {
		lam[k] = l.opt.Standardization.scale() / math.Sqrt(v)
	}
	const maxBatch = 256
	nt := newNet(a, maxBatch, true)
	transposeWeights(a, nt.wT, w)
	widest := 0
	for _, ly := range a.layers {
		widest = max(widest, ly.In, ly.Out)
	}
	gsq := make([]float64, maxBatch*widest)
	asq := make([]float64, maxBatch*widest)
	d := &l.data
	rows := d.Len()
	k := a.Out()
	for lo := 0; lo < rows; lo += maxBatch {
		hi := min(lo+maxBatch, rows)
		n := hi - lo
		x := d.x[lo*d.dim : hi*d.dim]
		nt.forward(w, nt.wT, x, n)
		g := nt.grad[nt.last()][:n*k]
		clear(g)
		f := nt.act[nt.last()]
		for i, arm := range d.arm[lo:hi] {
			if l.opt.Family == Bernoulli {
				p := sigmoid1(f[i*k+arm])
				g[i*k+arm] = math.Sqrt(p * (1 - p))
			} else {
				g[i*k+arm] = lam[arm]
			}
		}
		for li := nt.last(); li >= 0; li-- {
			ly := a.layers[li]
			in := nt.input(li, x)[:n*ly.In]
			g := nt.grad[li][:n*ly.Out]
			gs, as := gsq[:n*ly.Out], asq[:n*ly.In]
			for i, v := range g {
				gs[i] = v * v
			}
			for i, v := range in {
				as[i] = v * v
			}
			gemm(trans, noTrans, ly.Out, ly.In, n, 1, gs, ly.Out, as, ly.In, 1, ly.Weights(dst), ly.In)
			colSum(ly.Bias(dst), gs, ly.Out, 1)
			if li > 0 {
				gp := nt.grad[li-1][:n*ly.In]
				gemm(noTrans, noTrans, n, ly.In, ly.Out, 1, g, ly.Out, ly.Weights(w), ly.In, 0, gp, ly.In)
				reluMask(gp, in)
			}
		}
	}
	return dst
}

// Features writes the activations of the last hidden layer,
// a_{L-1}(x) = relu(W_{L-1} a_{L-2} + b_{L-1}), for the rows of x
// (row-major, len(x)/In rows) at parameters w into dst (rows×H, H the
// width of the last hidden layer, or In for a network without hidden
// layers, whose features are the contexts themselves) and returns dst,
// allocated when nil. It runs the reference path's forward pass in
// float64: the features of last-layer Laplace and NeuralLinear, whose
// output layer is a linear model on them.
func (p *Predictor) Features(dst, w, x []float64) []float64 {
	a := p.arch
	a.checkLen(w, "w")
	in := a.In()
	if len(x)%in != 0 {
		panic("nn: len(x) is not a multiple of the input width")
	}
	rows := len(x) / in
	h := a.layers[p.last()].In
	if dst == nil {
		dst = make([]float64, rows*h)
	}
	if len(dst) != rows*h {
		panic("nn: len(dst) must be rows*H")
	}
	if p.last() == 0 {
		copy(dst, x)
		return dst
	}
	transposeWeights(a, p.wT, w)
	for lo := 0; lo < rows; lo += p.max {
		hi := min(lo+p.max, rows)
		p.forward(w, p.wT, x[lo*in:hi*in], hi-lo)
		copy(dst[lo*h:hi*h], p.act[p.last()-1][:(hi-lo)*h])
	}
	return dst
}

// Rows returns the contexts (row-major), played arms and rewards of v.
// The slices are v's own storage: the caller must not modify them.
func (v View) Rows() (x []float64, arms []int, y []float64) { return v.x, v.arm, v.y }
