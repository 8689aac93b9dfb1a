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
