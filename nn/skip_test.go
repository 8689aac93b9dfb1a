package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// A network with a skip connection is the network without it plus a
// linear model of the inputs: split the output layer's weight rows into
// their hidden-unit columns (the plain network's output layer) and their
// input columns (a linear model without bias), and the outputs add up,
// on both engines, for dense and one-hot contexts.
func TestSkipIsTheNetworkPlusALinearModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, hidden := range [][]int{{5}, {6, 3}} {
		const in, out = 4, 3
		skip := NewArch(in, hidden, out).WithSkip()
		plain, lin := NewArch(in, hidden, out), NewArch(in, nil, out)
		if !skip.Skip() || plain.Skip() || skip.SkipFrom() != hidden[len(hidden)-1] || skip.Layer(skip.NumLayers()-1).In != hidden[len(hidden)-1]+in {
			t.Fatalf("hidden %v: Skip %v, SkipFrom %d, output layer In %d", hidden, skip.Skip(), skip.SkipFrom(), skip.Layer(skip.NumLayers()-1).In)
		}
		if NewArch(in, nil, out).WithSkip().Skip() || skip.Equal(plain) || !skip.Equal(plain.WithSkip()) {
			t.Fatalf("hidden %v: a linear model took a skip connection, or Equal ignores it", hidden)
		}
		w := make([]float64, skip.NumParams())
		for i := range w {
			w[i] = rng.NormFloat64()
		}
		wp, wl := make([]float64, plain.NumParams()), make([]float64, lin.NumParams())
		last := skip.NumLayers() - 1
		copy(wp[:plain.Layer(last).W], w[:skip.Layer(last).W]) // the hidden layers
		ls, lp, ll := skip.Layer(last), plain.Layer(last), lin.Layer(0)
		h := skip.SkipFrom()
		for o := range out {
			copy(wp[lp.W+o*lp.In:lp.W+(o+1)*lp.In], w[ls.W+o*ls.In:ls.W+o*ls.In+h])
			copy(wl[ll.W+o*ll.In:ll.W+(o+1)*ll.In], w[ls.W+o*ls.In+h:ls.W+(o+1)*ls.In])
		}
		copy(lp.Bias(wp), ls.Bias(w)) // the linear model's bias stays zero
		for _, oneHot := range []bool{false, true} {
			x := make([]float64, 7*in)
			for i := range x {
				if oneHot {
					x[i] = float64(rng.IntN(2))
				} else {
					x[i] = rng.NormFloat64()
				}
			}
			std := Standardization{Shift: 0.5, Scale: 2}
			for _, ref := range []bool{true, false} {
				ps, pp, pl := NewPredictor(skip, 3), NewPredictor(plain, 3), NewPredictor(lin, 3)
				ps.Reference, pp.Reference, pl.Reference = ref, ref, ref
				fs := ps.Predict(nil, w, x, std)
				fp := pp.Predict(nil, wp, x, std)
				fl := pl.Predict(nil, wl, x, Standardization{Scale: 2})
				tol := 1e-12
				if !ref {
					tol = 1e-5
				}
				for i := range fs {
					if want := fp[i] + fl[i]; math.Abs(fs[i]-want) > tol*(1+math.Abs(want)) {
						t.Errorf("hidden %v one-hot %v reference %v: output %d = %g, the network plus the linear model %g", hidden, oneHot, ref, i, fs[i], want)
					}
				}
			}
		}
	}
}
