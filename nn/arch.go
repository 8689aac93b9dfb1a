package nn

import (
	"math"
	"math/rand/v2"
)

// Layer is the place of one affine layer z = W a + b in the flat parameter
// vector of an Arch. The weight block W is Out×In, row-major, at
// p[W : W+Out*In]; the bias block b follows it at p[B : B+Out].
type Layer struct {
	In, Out int // input and output width
	W, B    int // offsets of the weight and bias blocks
}

// Size returns the number of parameters of the layer, Out*In + Out.
func (l Layer) Size() int { return l.Out*l.In + l.Out }

// End returns the offset one past the layer's last parameter.
func (l Layer) End() int { return l.B + l.Out }

// Weights returns the weight block of p, a slice of p (not a copy).
func (l Layer) Weights(p []float64) []float64 { return p[l.W : l.W+l.Out*l.In] }

// Bias returns the bias block of p, a slice of p (not a copy).
func (l Layer) Bias(p []float64) []float64 { return p[l.B : l.B+l.Out] }

// Arch is a multilayer perceptron: In inputs, hidden layers with ReLU
// activations, and a linear output layer with one unit per arm,
//
//	a_0 = x,  a_l = relu(W_l a_{l-1} + b_l) for l = 1..L-1,  f = W_L a_{L-1} + b_L.
//
// With no hidden layers it is the linear model f = W x + b. Its parameters
// live in one flat []float64 whose layout Layer describes: layer 0 first,
// each layer's weight block followed by its bias block. An Arch is
// immutable and may be shared.
//
// An Arch made by WithSkip also feeds the inputs to the output layer
// beside the last hidden layer (a skip connection, the "wide and deep"
// network of Cheng et al. 2016):
//
//	f = W_L [a_{L-1}; x] + b_L,
//
// a linear model per arm plus the network. The output layer's input is
// then the concatenation: Layer(L).In = H + In, its first H columns
// weigh the hidden units and the last In the inputs (SkipFrom).
type Arch struct {
	layers []Layer
	n      int
	skip   bool
}

// NewArch returns the architecture with in inputs, the given hidden widths
// (nil or empty for a linear model) and out outputs. It panics if a width is
// not positive.
func NewArch(in int, hidden []int, out int) Arch {
	if in < 1 || out < 1 {
		panic("nn: input and output widths must be positive")
	}
	widths := make([]int, 0, len(hidden)+2)
	widths = append(widths, in)
	for _, h := range hidden {
		if h < 1 {
			panic("nn: hidden widths must be positive")
		}
		widths = append(widths, h)
	}
	widths = append(widths, out)
	return newArch(widths, false)
}

// newArch lays out the layers of the widths, the output layer taking the
// inputs too when skip.
func newArch(widths []int, skip bool) Arch {
	a := Arch{layers: make([]Layer, len(widths)-1), skip: skip}
	for l := range a.layers {
		li := Layer{In: widths[l], Out: widths[l+1], W: a.n}
		if skip && l == len(a.layers)-1 {
			li.In += widths[0]
		}
		li.B = li.W + li.In*li.Out
		a.layers[l] = li
		a.n = li.End()
	}
	return a
}

// WithSkip returns the architecture with the same widths whose output
// layer also takes the inputs (see Arch). A network without hidden layers
// is linear already and is returned as it is.
func (a Arch) WithSkip() Arch {
	if len(a.layers) < 2 || a.skip {
		return a
	}
	widths := []int{a.In()}
	for _, ly := range a.layers {
		widths = append(widths, ly.Out)
	}
	return newArch(widths, true)
}

// Skip reports whether the output layer takes the inputs too (WithSkip).
func (a Arch) Skip() bool { return a.skip }

// SkipFrom returns the first column of the output layer's weight rows
// that weighs an input rather than a hidden unit: the last hidden width
// under WithSkip, and Layer(L).In (no such column) otherwise.
func (a Arch) SkipFrom() int {
	last := a.layers[len(a.layers)-1]
	if !a.skip {
		return last.In
	}
	return last.In - a.In()
}

// NumParams returns the length of the flat parameter vector.
func (a Arch) NumParams() int { return a.n }

// NumLayers returns the number of affine layers, len(hidden)+1.
func (a Arch) NumLayers() int { return len(a.layers) }

// Layer returns the layout of affine layer l, 0 <= l < NumLayers(); layer
// NumLayers()-1 is the output layer.
func (a Arch) Layer(l int) Layer { return a.layers[l] }

// In returns the input width.
func (a Arch) In() int { return a.layers[0].In }

// Out returns the output width, the number of arms.
func (a Arch) Out() int { return a.layers[len(a.layers)-1].Out }

// Hidden returns the hidden widths in a new slice.
func (a Arch) Hidden() []int {
	h := make([]int, len(a.layers)-1)
	for l := range h {
		h[l] = a.layers[l].Out
	}
	return h
}

// Equal reports whether a and b have the same widths and skip connection.
func (a Arch) Equal(b Arch) bool {
	if len(a.layers) != len(b.layers) || a.skip != b.skip {
		return false
	}
	for l := range a.layers {
		if a.layers[l] != b.layers[l] {
			return false
		}
	}
	return true
}

// in returns how many of layer l's input columns are the network's
// inputs: all of the first layer's, the last In of a skip connection's
// output layer, none otherwise.
func (a Arch) in(l int) int {
	if l == 0 || a.skip && l == len(a.layers)-1 {
		return a.In()
	}
	return 0
}

func (a Arch) checkLen(p []float64, what string) {
	if len(p) != a.n {
		panic("nn: length of " + what + " does not match Arch.NumParams")
	}
}

// InitHe writes He-style initial values into dst, of length NumParams:
// biases zero and weights drawn as
//
//	W_ij ~ N(0, 2/In)  for layers followed by a ReLU (He et al. 2015, Sec. 2.2),
//	W_ij ~ N(0, 1/In)  for the linear output layer,
//
// so that activations keep their scale through the ReLU layers and the
// output starts with about unit variance, the scale of standardized rewards.
// It is meant for the means of a mean-field posterior or a point estimate.
func (a Arch) InitHe(dst []float64, rng *rand.Rand) {
	a.checkLen(dst, "dst")
	last := len(a.layers) - 1
	for l, ly := range a.layers {
		v := 2.0
		if l == last {
			v = 1.0
		}
		sd := math.Sqrt(v / float64(ly.In))
		for i, w := 0, ly.Weights(dst); i < len(w); i++ {
			w[i] = sd * rng.NormFloat64()
		}
		clear(ly.Bias(dst))
	}
}

// Embed writes the parameters p of network a into dst, laid out for
// network b: the same hidden widths, at least as many inputs and at
// least as many outputs. Input i of a becomes input inputs[i] of b
// (inputs must be distinct and in range); output o stays output o. Every
// other element of dst (the weights of b's other inputs, and the
// weights and biases of its outputs from a.Out() on) is left as it is,
// for the caller to fill first (the prior, for a posterior that grows).
//
// On a context x of a, and its image x' in b (x'[inputs[i]] = x[i],
// zero elsewhere), b's first a.Out() outputs under dst equal a's under p
// exactly: the new inputs are zero, the new outputs are not read.
func (a Arch) Embed(b Arch, inputs []int, dst, p []float64) {
	a.checkLen(p, "p")
	b.checkLen(dst, "dst")
	if len(a.layers) != len(b.layers) || a.skip != b.skip || len(inputs) != a.In() || b.Out() < a.Out() {
		panic("nn: Embed needs the same hidden layers and skip connection, one input index per input of a, and at least a's outputs")
	}
	for l := range a.layers {
		if l > 0 && a.layers[l].In-a.in(l) != b.layers[l].In-b.in(l) || l < len(a.layers)-1 && a.layers[l].Out != b.layers[l].Out {
			panic("nn: Embed needs the same hidden widths")
		}
	}
	for _, j := range inputs {
		if j < 0 || j >= b.In() {
			panic("nn: Embed input index out of range")
		}
	}
	for l, la := range a.layers {
		lb := b.layers[l]
		// Columns from skip on weigh the inputs (all of them in the first
		// layer, those of the skip connection in the output layer).
		skip := la.In - a.in(l)
		for o := range la.Out {
			for i := range la.In {
				j := i
				if i >= skip {
					j = lb.In - b.In() + inputs[i-skip]
				}
				dst[lb.W+o*lb.In+j] = p[la.W+o*la.In+i]
			}
			dst[lb.B+o] = p[la.B+o]
		}
	}
}

// widenSkip turns the n rows of the last hidden layer's output, h wide at
// the start of a, into the output layer's input under a skip connection
// (Arch.WithSkip): rows of w = h + In, [a_{L-1}; x], in place. Row i's
// context is row rows[i] of x (In wide), or row i when rows is nil, or x
// itself for every row when x is a single context.
func widenSkip[T float32 | float64](a []T, n, h, w int, x []float64, rows []int) {
	in := w - h
	one := rows == nil && len(x) == in
	// From the last row back: row i's new place starts at i*w >= i*h, past
	// the rows not moved yet.
	for i := n - 1; i >= 0; i-- {
		copy(a[i*w:i*w+h], a[i*h:(i+1)*h])
		r := i
		switch {
		case rows != nil:
			r = rows[i]
		case one:
			r = 0
		}
		dst := a[i*w+h : (i+1)*w]
		for j, v := range x[r*in : (r+1)*in] {
			dst[j] = T(v)
		}
	}
}

// packSkip is widenSkip's adjoint for the backward pass: it keeps the
// first h columns of the n rows of g (w wide), packed at g's start, the
// gradient with respect to the last hidden layer's output. The columns of
// the inputs are dropped (the contexts take no gradient).
func packSkip[T float32 | float64](g []T, n, h, w int) {
	for i := 1; i < n; i++ {
		copy(g[i*h:(i+1)*h], g[i*w:i*w+h])
	}
}

// actSize returns the length per row of the activation buffer of layer
// l: its width, or the output layer's input width for the last hidden
// layer of a skip connection, which widenSkip fills in place.
func (a Arch) actSize(l int) int {
	if l+1 < len(a.layers) {
		return a.layers[l+1].In
	}
	return a.layers[l].Out
}

// skipLayer reports whether layer l's output is widened into the output
// layer's input (the last hidden layer under a skip connection).
func (a Arch) skipLayer(l int) bool { return a.skip && l == len(a.layers)-2 }
