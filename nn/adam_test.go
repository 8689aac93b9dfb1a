package nn

import (
	"math"
	"testing"
)

// quadGrad writes the gradient of f(x) = 1/2 sum_i a_i (x_i - c_i)^2.
func quadGrad(g, x, a, c []float64) {
	for i := range x {
		g[i] = a[i] * (x[i] - c[i])
	}
}

func TestAdamConvergesOnAQuadratic(t *testing.T) {
	// Curvatures spanning four orders of magnitude: Adam's per-coordinate
	// scaling makes the steps insensitive to them.
	a := []float64{1e-2, 0.3, 1, 10, 100}
	c := []float64{1, -2, 0.5, 3, -0.25}
	x := make([]float64, len(a))
	g := make([]float64, len(a))
	opt := NewAdam(len(x), 0.05)
	for range 5000 {
		quadGrad(g, x, a, c)
		opt.Step(x, g)
	}
	// With a constant step size Adam ends in a neighbourhood of the
	// minimum whose size scales with LR; 1e-3 is ample after 5000 steps.
	const tol = 1e-3
	for i := range x {
		if math.Abs(x[i]-c[i]) > tol {
			t.Errorf("x[%d] = %g after 5000 steps, want %g ± %g", i, x[i], c[i], tol)
		}
	}
	if opt.Steps() != 5000 {
		t.Errorf("Steps() = %d, want 5000", opt.Steps())
	}
}

func TestAdamFirstStepIsLRTimesSign(t *testing.T) {
	// With bias correction, m̂ = g and v̂ = g^2 after one step, so each
	// coordinate moves by LR * g/(|g| + Eps) (Kingma & Ba 2015, Sec. 2.1).
	opt := NewAdam(3, 0)
	if opt.LR != 1e-3 || opt.Beta1 != 0.9 || opt.Beta2 != 0.999 || opt.Eps != 1e-8 {
		t.Fatalf("defaults %+v, want LR 1e-3, Beta1 0.9, Beta2 0.999, Eps 1e-8", *opt)
	}
	x := []float64{0, 0, 0}
	g := []float64{4, -0.01, 0}
	opt.Step(x, g)
	for i, want := range []float64{-1e-3 * 4 / (4 + 1e-8), 1e-3 * 0.01 / (0.01 + 1e-8), 0} {
		if relErr(x[i], want, 1e-300) > 1e-12 {
			t.Errorf("x[%d] = %g after one step, want %g", i, x[i], want)
		}
	}
}

func TestAdamResetStartsOver(t *testing.T) {
	a := []float64{1, 2, 3}
	c := []float64{1, 1, 1}
	run := func(opt *Adam) []float64 {
		x := []float64{0, 0, 0}
		g := make([]float64, 3)
		for range 10 {
			quadGrad(g, x, a, c)
			opt.Step(x, g)
		}
		return x
	}
	opt := NewAdam(3, 0.1)
	run(opt)
	opt.Reset()
	if opt.Steps() != 0 {
		t.Fatalf("Steps() = %d after Reset, want 0", opt.Steps())
	}
	got, want := run(opt), run(NewAdam(3, 0.1))
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("after Reset x[%d] = %v, a fresh Adam gives %v", i, got[i], want[i])
		}
	}
}

func TestAdamAllocatesNothing(t *testing.T) {
	x := make([]float64, 1000)
	g := make([]float64, 1000)
	for i := range g {
		g[i] = float64(i) - 500
	}
	opt := NewAdam(len(x), 0)
	if got := testing.AllocsPerRun(100, func() { opt.Step(x, g) }); got != 0 {
		t.Errorf("Step: %v allocations, want 0", got)
	}
}
