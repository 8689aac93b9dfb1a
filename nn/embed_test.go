package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// A network embedded in a wider one (more inputs, more outputs) predicts
// exactly what it did on its old outputs for every context whose new
// inputs are zero, and its new parameters are what dst held.
func TestEmbedKeepsThePredictions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		hidden []int
		skip   bool
	}{{nil, false}, {[]int{5}, false}, {[]int{6, 3}, false}, {[]int{5}, true}, {[]int{6, 3}, true}} {
		hidden := c.hidden
		a, b := NewArch(4, hidden, 2), NewArch(7, hidden, 3)
		if c.skip {
			a, b = a.WithSkip(), b.WithSkip()
		}
		inputs := []int{0, 1, 3, 6} // inputs 2, 4 and 5 of b are new
		p := make([]float64, a.NumParams())
		for i := range p {
			p[i] = rng.NormFloat64()
		}
		const fill = 12345.0
		dst := make([]float64, b.NumParams())
		for i := range dst {
			dst[i] = fill
		}
		a.Embed(b, inputs, dst, p)
		// Every parameter of a lands once; the rest keep the fill.
		kept := 0
		for _, v := range dst {
			if v != fill {
				kept++
			}
		}
		if kept != a.NumParams() {
			t.Errorf("hidden %v: %d parameters copied, want %d", hidden, kept, a.NumParams())
		}
		// Predictions: a on x against b on x's image, with the new
		// parameters set to random values (they must not matter).
		for i, v := range dst {
			if v == fill {
				dst[i] = rng.NormFloat64()
			}
		}
		pa, pb := NewPredictor(a, 1), NewPredictor(b, 1)
		pa.Reference, pb.Reference = true, true
		s := Standardization{Shift: 0.5, Scale: 2}
		for range 20 {
			x := make([]float64, 4)
			xb := make([]float64, 7)
			for i := range x {
				x[i] = rng.NormFloat64()
				xb[inputs[i]] = x[i]
			}
			fa := pa.Predict(nil, p, x, s)
			fb := pb.Predict(nil, dst, xb, s)
			for o := range fa {
				if math.Abs(fa[o]-fb[o]) > 1e-12*(1+math.Abs(fa[o])) {
					t.Errorf("hidden %v: output %d = %g embedded, %g before", hidden, o, fb[o], fa[o])
				}
			}
		}
	}
}
