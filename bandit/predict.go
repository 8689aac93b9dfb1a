package bandit

import (
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/refinery-bandits/refinery/nn"
)

// netScratch holds the per-call buffers of single-context predictions
// for one architecture. It belongs to one goroutine at a time (agents
// keep them in a sync.Pool).
type netScratch struct {
	a, b   []float64 // activations, ping-pong, max width
	m1, v1 []float64 // first-layer pre-activation mean and variance
	out    []float64 // one output per arm
	batch  *lrBatch  // made on first use by a mean-field decision
}

func newNetScratch(arch nn.Arch) *netScratch {
	w := arch.In()
	for l := range arch.NumLayers() {
		w = max(w, arch.Layer(l).Out)
	}
	first := arch.Layer(0).Out
	return &netScratch{
		a: make([]float64, w), b: make([]float64, w),
		m1: make([]float64, first), v1: make([]float64, first),
		out: make([]float64, arch.Out()),
	}
}

// forward writes the network outputs f(x; w), in standardized units,
// into s.out and returns it:
//
//	a_0 = x,  a_l = relu(W_l a_{l-1} + b_l),  f = W_L a_{L-1} + b_L
//
// (nn.Arch's layout: W_l row-major Out×In, then b_l).
func forward(arch nn.Arch, w, x []float64, s *netScratch) []float64 {
	in := x
	last := arch.NumLayers() - 1
	for l := range arch.NumLayers() {
		ly := arch.Layer(l)
		W, bias := ly.Weights(w), ly.Bias(w)
		dst := s.a[:ly.Out]
		if l == last {
			dst = s.out
		} else if l%2 == 1 {
			dst = s.b[:ly.Out]
		}
		for o := range ly.Out {
			row := W[o*ly.In : (o+1)*ly.In]
			z := bias[o]
			for i, v := range in {
				z += row[i] * v
			}
			if l != last && z < 0 {
				z = 0
			}
			dst[o] = z
		}
		in = dst
	}
	return s.out
}

// lrPrepare computes the mean and variance of the first layer's
// pre-activations for context x under the mean-field posterior N(mu,
// diag(sig2)) into s.m1 and s.v1; lrSample then draws from them.
func lrPrepare(arch nn.Arch, mu, sig2, x []float64, s *netScratch) {
	ly := arch.Layer(0)
	affineMeanVar(s.m1, s.v1, ly, mu, sig2, x)
}

// affineMeanVar writes the mean and variance of z = W a + b for a fixed
// input a and independent Gaussian weights:
//
//	m_o = mu_b[o] + sum_i mu_W[o,i] a_i,   v_o = s2_b[o] + sum_i s2_W[o,i] a_i^2
func affineMeanVar(m, v []float64, ly nn.Layer, mu, sig2, a []float64) {
	Wm, bm := ly.Weights(mu), ly.Bias(mu)
	Ws, bs := ly.Weights(sig2), ly.Bias(sig2)
	for o := range ly.Out {
		rm, rs := Wm[o*ly.In:(o+1)*ly.In], Ws[o*ly.In:(o+1)*ly.In]
		zm, zv := bm[o], bs[o]
		for i, x := range a {
			if x == 0 {
				continue
			}
			zm += rm[i] * x
			zv += rs[i] * x * x
		}
		m[o], v[o] = zm, zv
	}
}

// lrSample draws the network outputs at one context x for one weight
// sample w ~ N(mu, diag(sig2)) into s.out, layer by layer with the local
// reparameterization (Kingma, Salimans & Welling 2015, Section 2.3):
//
//	z_l ~ N(M_l, V_l),  M_l = mu_W a_{l-1} + mu_b,  V_l = s2_W a_{l-1}^2 + s2_b,
//	a_l = relu(z_l)
//
// For a single context every weight enters once, and the weights of
// layer l are independent of a_{l-1}, so this draws from exactly the
// distribution of f(x; w), w ~ q, at the cost of two matrix-vector
// products per layer and no per-weight normal draws. lrPrepare must have
// been called for x.
func lrSample(arch nn.Arch, mu, sig2 []float64, s *netScratch, rng *rand.Rand) []float64 {
	last := arch.NumLayers() - 1
	z := s.a[:len(s.m1)]
	if last == 0 {
		z = s.out
	}
	for o := range s.m1 {
		v := s.m1[o] + math.Sqrt(s.v1[o])*rng.NormFloat64()
		if last != 0 && v < 0 {
			v = 0
		}
		z[o] = v
	}
	in := z
	for l := 1; l <= last; l++ {
		ly := arch.Layer(l)
		dst := s.b[:ly.Out]
		if l == last {
			dst = s.out
		} else if l%2 == 0 {
			dst = s.a[:ly.Out]
		}
		Wm, bm := ly.Weights(mu), ly.Bias(mu)
		Ws, bs := ly.Weights(sig2), ly.Bias(sig2)
		for o := range ly.Out {
			rm, rs := Wm[o*ly.In:(o+1)*ly.In], Ws[o*ly.In:(o+1)*ly.In]
			zm, zv := bm[o], bs[o]
			for i, a := range in {
				zm += rm[i] * a
				zv += rs[i] * a * a
			}
			v := zm + math.Sqrt(zv)*rng.NormFloat64()
			if l != last && v < 0 {
				v = 0
			}
			dst[o] = v
		}
		in = dst
	}
	return s.out
}

// lrBatch holds the buffers of lrSampleBatch for d draws.
type lrBatch struct {
	d        int
	a, sq, m []float64 // d × max width: activations, their squares, means
	v        []float64 // d × max width: variances
	out      []float64 // d × Out
}

func newLRBatch(arch nn.Arch, d int) *lrBatch {
	w := 0
	for l := range arch.NumLayers() {
		w = max(w, arch.Layer(l).Out, arch.Layer(l).In)
	}
	return &lrBatch{
		d: d,
		a: make([]float64, d*w), sq: make([]float64, d*w), m: make([]float64, d*w), v: make([]float64, d*w),
		out: make([]float64, d*arch.Out()),
	}
}

// lrSampleBatch draws d independent samples of the network outputs at
// the context prepared by lrPrepare, as lrSample does one, with the
// products of each layer batched into two matrix products (gonum's
// Dgemm):
//
//	M = A mu_W^T + mu_b,  V = (A∘A) s2_W^T + s2_b,  Z = M + sqrt(V)∘E
//
// for the d×In activations A of the previous layer. It returns the d×Out
// outputs, row-major, in standardized units; the slice is b's.
func lrSampleBatch(arch nn.Arch, mu, sig2 []float64, s *netScratch, b *lrBatch, rng *rand.Rand) []float64 {
	last := arch.NumLayers() - 1
	d := b.d
	// Layer 0: the pre-activations' mean and variance are the same for
	// every draw.
	h := len(s.m1)
	first := b.a[:d*h]
	if last == 0 {
		first = b.out
	}
	for r := range d {
		row := first[r*h : (r+1)*h]
		for o := range h {
			v := s.m1[o] + math.Sqrt(s.v1[o])*rng.NormFloat64()
			if last != 0 && v < 0 {
				v = 0
			}
			row[o] = v
		}
	}
	for l := 1; l <= last; l++ {
		ly := arch.Layer(l)
		in, out := ly.In, ly.Out
		A := b.a[:d*in]
		sq := b.sq[:d*in]
		for i, x := range A {
			sq[i] = x * x
		}
		M, V := b.m[:d*out], b.v[:d*out]
		gemmNT(M, A, ly.Weights(mu), d, in, out)
		gemmNT(V, sq, ly.Weights(sig2), d, in, out)
		dst := b.a[:d*out]
		if l == last {
			dst = b.out
		}
		bm, bs := ly.Bias(mu), ly.Bias(sig2)
		for r := range d {
			for o := range out {
				i := r*out + o
				z := M[i] + bm[o] + math.Sqrt(V[i]+bs[o])*rng.NormFloat64()
				if l != last && z < 0 {
					z = 0
				}
				dst[i] = z
			}
		}
	}
	return b.out
}

// gemmNT writes C = A W^T for A d×in and W out×in, both row-major.
func gemmNT(c, a, w []float64, d, in, out int) {
	blas64.Gemm(blas.NoTrans, blas.Trans, 1,
		blas64.General{Rows: d, Cols: in, Stride: in, Data: a},
		blas64.General{Rows: out, Cols: in, Stride: in, Data: w},
		0, blas64.General{Rows: d, Cols: out, Stride: out, Data: c})
}
