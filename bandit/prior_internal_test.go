package bandit

import (
	"math"
	"testing"
)

// Under the fan-in prior a skip connection's output layer is two blocks:
// the weights on the hidden units take v/H, those on the inputs v, linear
// TS's prior (ModelConfig.Skip); a network without the connection keeps
// v/H there.
func TestPriorVarsOfASkipConnection(t *testing.T) {
	const in, h, arms, v = 6, 4, 3, 2.0
	for _, skip := range []bool{false, true} {
		m := ModelConfig{Hidden: []int{h}, Skip: &skip, PriorVariance: v, Prior: PriorFanIn}
		a := modelArch(m, in, arms)
		if a.Skip() != skip {
			t.Fatalf("skip %v: the architecture has Skip %v", skip, a.Skip())
		}
		pv := priorVars(a, m)
		first, out := a.Layer(0), a.Layer(1)
		for i := first.W; i < first.B; i++ {
			if pv[i] != 2*v/in {
				t.Fatalf("skip %v: first-layer weight %d has variance %g, want 2v/In = %g", skip, i, pv[i], 2*v/in)
			}
		}
		for o := range arms {
			for i := range out.In {
				want := v / h
				if i >= h {
					want = v
				}
				if got := pv[out.W+o*out.In+i]; math.Abs(got-want) > 1e-15 {
					t.Errorf("skip %v: output weight (%d, %d) has variance %g, want %g", skip, o, i, got, want)
				}
			}
			if pv[out.B+o] != v {
				t.Errorf("skip %v: output bias %d has variance %g, want v", skip, o, pv[out.B+o])
			}
		}
		if want := arms * (h + in); skip && out.In*arms != want {
			t.Errorf("skip: output layer has %d weights, want %d", out.In*arms, want)
		}
	}
}

// model.hidden_prior_variance v_h is the hidden layers' v, the output
// layer keeps model.prior_variance's: under "fan-in" 2 v_h/In on a hidden
// layer's weights and v_h on its biases, v/H and v on the output layer's;
// under "fixed" v_h and v; 0 is v everywhere.
func TestPriorVarsOfTheHiddenLayers(t *testing.T) {
	const in, h1, h2, arms, v = 5, 4, 3, 2, 2.0
	for _, c := range []struct {
		prior string
		vh    float64
	}{{PriorFanIn, 8}, {PriorFixed, 8}, {PriorFanIn, 0}, {PriorFixed, 0}} {
		m := ModelConfig{Hidden: []int{h1, h2}, PriorVariance: v, HiddenPriorVariance: c.vh, Prior: c.prior}
		a := modelArch(m, in, arms)
		pv := priorVars(a, m)
		vh := c.vh
		if vh == 0 {
			vh = v
		}
		for l := range a.NumLayers() {
			ly := a.Layer(l)
			lv, g := vh, 2.0
			if l == a.NumLayers()-1 {
				lv, g = v, 1
			}
			w := lv
			if c.prior == PriorFanIn {
				w = g * lv / float64(ly.In)
			}
			for j := ly.W; j < ly.End(); j++ {
				want := w
				if j >= ly.B {
					want = lv
				}
				if math.Abs(pv[j]-want) > 1e-15*want {
					t.Fatalf("%s, v_h %g: layer %d parameter %d has variance %g, want %g", c.prior, c.vh, l, j-ly.W, pv[j], want)
				}
			}
		}
	}
}
