package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// problem is a small random regression problem for tests.
type problem struct {
	arch  Arch
	data  View
	mu    []float64
	sigma []float64
	hyper []float64
}

// newProblem returns rows rows of random contexts of dimension in, arms
// chosen at random among out, rewards on the scale of the bandit rewards,
// and a random mean-field posterior.
func newProblem(in int, hidden []int, out, rows int, seed uint64) problem {
	return newProblemOf(NewArch(in, hidden, out), rows, seed)
}

// newSkipProblem is newProblem on the network whose output layer also
// takes the inputs (Arch.WithSkip).
func newSkipProblem(in int, hidden []int, out, rows int, seed uint64) problem {
	return newProblemOf(NewArch(in, hidden, out).WithSkip(), rows, seed)
}

func newProblemOf(a Arch, rows int, seed uint64) problem {
	rng := rand.New(rand.NewPCG(seed, 1))
	in, out := a.In(), a.Out()
	x := make([]float64, rows*in)
	for i := range x {
		x[i] = rng.NormFloat64()
	}
	arm := make([]int, rows)
	y := make([]float64, rows)
	for i := range y {
		arm[i] = rng.IntN(out)
		y[i] = 5 - 20*rng.Float64()
	}
	mu := make([]float64, a.NumParams())
	a.InitHe(mu, rng)
	sigma := make([]float64, a.NumParams())
	for j := range mu {
		mu[j] += 0.1 * rng.NormFloat64() // non-zero biases too
		sigma[j] = 0.05 + 0.3*rng.Float64()
	}
	return problem{arch: a, data: NewView(in, out, x, arm, y), mu: mu, sigma: sigma, hyper: []float64{math.Log(3.7)}}
}

// binary replaces p's rewards by 0/1 rewards, one in three a 1.
func (p problem) binary() problem {
	y := make([]float64, p.data.Len())
	for i := range y {
		if i%3 == 1 {
			y[i] = 1
		}
	}
	p.data = NewView(p.data.dim, p.data.arms, p.data.x, p.data.arm, y)
	return p
}

// oneHot replaces the contexts of p by one-hot vectors, the encoding of
// the mushroom attributes, which sends the first layer's weight gradient
// through its transposed (sparse) path.
func (p problem) oneHot(seed uint64) problem {
	rng := rand.New(rand.NewPCG(seed, 3))
	x := make([]float64, len(p.data.x))
	d := p.data.dim
	for i := range p.data.Len() {
		x[i*d+rng.IntN(d)] = 1
	}
	p.data = NewView(d, p.data.arms, x, p.data.arm, p.data.y)
	return p
}

// relErr is |a-b| / max(|a|, |b|, floor): a relative error that does not
// blow up when both values are tiny.
func relErr(a, b, floor float64) float64 {
	return math.Abs(a-b) / math.Max(math.Max(math.Abs(a), math.Abs(b)), floor)
}

func seeded(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

func clone(x []float64) []float64 { return append([]float64(nil), x...) }

// checkGrad compares the analytic gradient grad of f with the five-point
// central difference
//
//	f'(x) ≈ (f(x-2h) - 8 f(x-h) + 8 f(x+h) - f(x+2h)) / (12 h),
//
// coordinate by coordinate. Its truncation error is O(h^4), so h = 1e-4
// keeps both truncation and rounding (eps*|f|/h ≈ 1e-10 for |f| ≈ 100)
// far below the tolerance even for gradient entries of order 1e-4.
func checkGrad(t *testing.T, name string, f func() float64, x, grad []float64, tol float64) {
	t.Helper()
	worst := 0.0
	for j := range x {
		old := x[j]
		h := 1e-4 * math.Max(1, math.Abs(old))
		at := func(d float64) float64 { x[j] = old + d; return f() }
		fd := (at(-2*h) - 8*at(-h) + 8*at(h) - at(2*h)) / (12 * h)
		x[j] = old
		e := relErr(grad[j], fd, gradFloor)
		worst = math.Max(worst, e)
		if e > tol {
			t.Errorf("%s[%d]: analytic %.10g, central difference %.10g, relative error %.3g > %g", name, j, grad[j], fd, e, tol)
		}
	}
	t.Logf("%s: %d coordinates, worst relative error %.3g", name, len(x), worst)
}
