package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// fastTol is the tolerance of the fast engine against the float64
// reference on the same noise draws, relative to the largest gradient
// entry (and to |value| for the log-likelihood). float32 rounds each
// operation to 6e-8 relative; the products sum at most ~120 terms and the
// backward pass chains three layers, so errors of a few 1e-7 of the
// largest entry are expected (the worst seen in these tests is logged).
// A flipped ReLU decision or a wrong index costs orders of magnitude more.
// RIS computes its proposal and importance weights in float64 on both
// engines (risLayer) from inputs that differ by float32 rounding; the
// weights' exponent (xi^2 - eps^2)/2 amplifies a relative input error
// delta to about eps^2 delta, with |eps| of a few units for the units
// that are active, so the same tolerance holds (the worst seen is logged).
const fastTol = 1e-5

// round32 returns x rounded to float32, so that the reference evaluates
// the engine's inputs exactly.
func round32(x []float64) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(float32(v))
	}
	return y
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// compareGrad reports the worst |got - want| relative to max |want| and
// fails beyond fastTol.
func compareGrad(t *testing.T, name string, got, want []float64) {
	t.Helper()
	scale := math.Max(maxAbs(want), 1e-30)
	worst, at := 0.0, 0
	for j := range want {
		if e := math.Abs(got[j]-want[j]) / scale; e > worst {
			worst, at = e, j
		}
	}
	if worst > fastTol {
		t.Errorf("%s[%d]: fast %.8g, reference %.8g: error %.3g of the largest entry %.3g > %g", name, at, got[at], want[at], worst, scale, fastTol)
	}
	t.Logf("%s: worst error %.3g of the largest entry", name, worst)
}

func TestEngineLayoutRoundTrip(t *testing.T) {
	a := NewArch(5, []int{4, 3}, 2)
	src := make([]float64, a.NumParams())
	for j := range src {
		src[j] = float64(j)
	}
	e := make([]float32, a.NumParams())
	a.ToEngine(e, src)
	ly := a.Layer(1) // W is 3×4 at ly.W; engine element (i, o) is W[o][i]
	if got, want := e[ly.W+2*ly.Out+1], float32(src[ly.W+1*ly.In+2]); got != want {
		t.Errorf("engine W_T[2][1] = %v, want W[1][2] = %v", got, want)
	}
	e2 := make([]float32, a.NumParams())
	a.toEngine(e2, make([]float32, a.NumParams()), src)
	for j := range e {
		if e2[j] != e[j] {
			t.Fatalf("toEngine(x)[%d] = %v, ToEngine(x)[%d] = %v", j, e2[j], j, e[j])
		}
	}
	back := make([]float64, a.NumParams())
	a.FromEngine(back, e)
	for j := range src {
		if back[j] != src[j] {
			t.Fatalf("FromEngine(ToEngine(x))[%d] = %v, want %v", j, back[j], src[j])
		}
	}
}

// TestFastEngineMatchesReference evaluates every estimator on both
// engines with the same seed and reference noise, hence the same noise
// draws, on dense and
// one-hot contexts (the first layer's dense and gathered paths), on all
// rows (several chunks) and on a minibatch with repeated rows.
func TestFastEngineMatchesReference(t *testing.T) {
	problems := []struct {
		name string
		p    problem
	}{
		{"dense contexts", newProblem(7, []int{9, 8}, 3, 50, 11)},
		{"one-hot contexts", newProblem(30, []int{20, 10}, 2, 50, 12).oneHot(4)},
		{"linear model", newProblem(6, nil, 2, 30, 13)},
		{"the bandit network", newProblem(117, []int{100, 100}, 2, 64, 6).oneHot(2)},
		{"skip connection", newSkipProblem(7, []int{9, 8}, 3, 50, 14)},
		{"skip connection on one-hot contexts", newSkipProblem(117, []int{100}, 2, 64, 15).oneHot(3)},
	}
	for _, pc := range problems {
		for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS, risFixed} {
			for _, model := range []string{"gaussian", "bernoulli", "context noise"} {
				t.Run(pc.name+"/"+estName(est)+"/"+model, func(t *testing.T) {
					p := pc.p
					a := p.arch
					n := a.NumParams()
					opt := Options{Estimator: est, RISSamples: 2, LearnNoise: true, Standardization: Standardization{Shift: 1, Scale: 2}, ReferenceNoise: true}
					nh := 1
					switch model {
					case "bernoulli":
						p = p.binary()
						opt.Family, opt.Standardization = Bernoulli, Standardization{}
						nh = 0
					case "context noise":
						opt.NoiseContext = true
						p.hyper = contextHyper(a, 5)
						nh = len(p.hyper)
					}
					if est == risFixed {
						opt.Estimator, opt.RISFixedProposal = RIS, true
					}
					lik := NewLikelihood(a, p.data, opt)
					mu, sigma := round32(p.mu), round32(p.sigma)
					mu32, sig32 := make([]float32, n), make([]float32, n)
					a.ToEngine(mu32, mu)
					a.ToEngine(sig32, sigma)
					ref := lik.NewEvaluator(16)
					fast := lik.NewEvaluator32(16)
					for _, rows := range [][]int{nil, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4}} {
						dMu, dSigma, dHyper := make([]float64, n), make([]float64, n), make([]float64, nh)
						want := ref.ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, p.hyper[:nh], rows, seeded(7))
						fMu, fSigma, fHyper := make([]float32, n), make([]float32, n), make([]float64, nh)
						got := fast.ExpectedLogLik(fMu, fSigma, fHyper, mu32, sig32, p.hyper[:nh], rows, seeded(7))
						if e := relErr(got, want, 1); e > fastTol {
							t.Errorf("rows %v: value fast %.10g, reference %.10g, relative error %.3g", rows, got, want, e)
						}
						for k := range nh {
							if relErr(fHyper[k], dHyper[k], 1) > fastTol {
								t.Errorf("rows %v: dHyper[%d] fast %.10g, reference %.10g", rows, k, fHyper[k], dHyper[k])
							}
						}
						gMu, gSigma := make([]float64, n), make([]float64, n)
						a.FromEngine(gMu, fMu)
						a.FromEngine(gSigma, fSigma)
						compareGrad(t, "dMu", gMu, dMu)
						if est != Deterministic {
							compareGrad(t, "dSigma", gSigma, dSigma)
						} else if maxAbs(gSigma) != 0 {
							t.Errorf("Deterministic: dSigma not zero")
						}
					}
				})
			}
		}
	}
}

func TestFastEngineAllocatesNothing(t *testing.T) {
	for _, p := range []problem{newProblem(7, []int{9, 8}, 3, 50, 11), newProblem(30, []int{20}, 2, 50, 12).oneHot(4), newSkipProblem(30, []int{20}, 2, 50, 12).oneHot(4)} {
		n := p.arch.NumParams()
		mu, sig := make([]float32, n), make([]float32, n)
		p.arch.ToEngine(mu, p.mu)
		p.arch.ToEngine(sig, p.sigma)
		dMu, dSigma, dHyper := make([]float32, n), make([]float32, n), make([]float64, 1)
		rows := []int{4, 8, 15, 16, 23, 42, 4, 1, 2, 3}
		rng := seeded(1)
		for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
			ev := NewLikelihood(p.arch, p.data, Options{Estimator: est, LearnNoise: true}).NewEvaluator32(8)
			if got := testing.AllocsPerRun(20, func() { ev.ExpectedLogLik(dMu, dSigma, dHyper, mu, sig, p.hyper, rows, rng) }); got != 0 {
				t.Errorf("%v: %v allocations per call, want 0", est, got)
			}
		}
	}
}

func TestFastEngineEmptyRowsGiveZero(t *testing.T) {
	p := newProblem(3, []int{4}, 2, 5, 1)
	n := p.arch.NumParams()
	mu, sig := make([]float32, n), make([]float32, n)
	p.arch.ToEngine(mu, p.mu)
	p.arch.ToEngine(sig, p.sigma)
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
		ev := NewLikelihood(p.arch, p.data, Options{Estimator: est, LearnNoise: true}).NewEvaluator32(4)
		dMu, dSigma, dHyper := make([]float32, n), make([]float32, n), []float64{7}
		for j := range dMu {
			dMu[j], dSigma[j] = 1, 1
		}
		if v := ev.ExpectedLogLik(dMu, dSigma, dHyper, mu, sig, p.hyper, []int{}, seeded(1)); v != 0 || dHyper[0] != 0 {
			t.Errorf("%v: value %v, dHyper %v on no rows, want 0, 0", est, v, dHyper[0])
		}
		for j := range dMu {
			if dMu[j] != 0 || dSigma[j] != 0 {
				t.Fatalf("%v: gradient %d is (%v, %v) on no rows, want zero", est, j, dMu[j], dSigma[j])
			}
		}
	}
}

func TestViewNonzeros(t *testing.T) {
	d := NewData(4, 2)
	d.Append([]float64{0, 1.5, 0, -2}, 0, 1)
	v0 := d.View()
	d.Append([]float64{0, 0, 0, 0}, 1, 2)
	d.Append([]float64{3, 0, 0, 0}, 1, 2)
	v := d.View()
	for _, c := range []struct {
		v    View
		row  int
		cols []int32
		vals []float32
	}{
		{v0, 0, []int32{1, 3}, []float32{1.5, -2}},
		{v, 0, []int32{1, 3}, []float32{1.5, -2}},
		{v, 1, nil, nil},
		{v, 2, []int32{0}, []float32{3}},
		{v.Prefix(3), 2, []int32{0}, []float32{3}},
		{NewView(4, 2, []float64{0, 0, 7, 0}, []int{1}, []float64{0}), 0, []int32{2}, []float32{7}},
	} {
		cols, vals := c.v.Nonzeros(c.row)
		if len(cols) != len(c.cols) || len(vals) != len(c.vals) {
			t.Errorf("row %d: Nonzeros = %v, %v, want %v, %v", c.row, cols, vals, c.cols, c.vals)
			continue
		}
		for k := range cols {
			if cols[k] != c.cols[k] || vals[k] != c.vals[k] {
				t.Errorf("row %d: Nonzeros = %v, %v, want %v, %v", c.row, cols, vals, c.cols, c.vals)
			}
		}
	}
}

// TestFastPredictorMatchesReference runs Predict and SampleLocal (with
// the same seed, hence the same normals) on both engines, for dense and
// one-hot contexts in several chunks, and requires agreement to 1e-5 of
// the largest output in standardized units (float32 rounding through
// three layers is about 1e-7 of it).
func TestFastPredictorMatchesReference(t *testing.T) {
	for _, pc := range []struct {
		name string
		p    problem
	}{
		{"dense contexts", newProblem(7, []int{9, 8}, 3, 50, 11)},
		{"one-hot contexts", newProblem(117, []int{100, 100}, 2, 50, 6).oneHot(2)},
		{"linear model", newProblem(6, nil, 2, 30, 13)},
		{"skip connection", newSkipProblem(7, []int{9}, 3, 50, 14)},
		{"skip connection on one-hot contexts", newSkipProblem(117, []int{100}, 2, 50, 15).oneHot(3)},
	} {
		t.Run(pc.name, func(t *testing.T) {
			p := pc.p
			std := Standardization{Shift: 2, Scale: 3}
			fast, ref := NewPredictor(p.arch, 16), NewPredictor(p.arch, 16)
			ref.Reference = true
			fast.noise.reference = true
			mu := round32(p.mu)
			sig2 := make([]float64, len(mu))
			for j, s := range round32(p.sigma) {
				sig2[j] = float64(float32(s * s))
			}
			compare := func(what string, got, want []float64) {
				t.Helper()
				scale := 0.0
				for _, v := range want {
					scale = math.Max(scale, math.Abs(v-std.Shift)/std.Scale)
				}
				worst := 0.0
				for i := range want {
					worst = math.Max(worst, math.Abs(got[i]-want[i])/std.Scale/scale)
				}
				if worst > fastTol {
					t.Errorf("%s: worst difference %.3g of the largest output, want <= %g", what, worst, fastTol)
				}
				t.Logf("%s: worst difference %.3g of the largest output", what, worst)
			}
			compare("Predict", fast.Predict(nil, mu, p.data.x, std), ref.Predict(nil, mu, p.data.x, std))
			x := p.data.X(3)
			compare("SampleLocal", fast.SampleLocal(nil, mu, sig2, x, 40, std, seeded(9)), ref.SampleLocal(nil, mu, sig2, x, 40, std, seeded(9)))
			fm, fv := fast.SampleLocalMoments(nil, nil, mu, sig2, x, 40, std, seeded(9))
			rm, rv := ref.SampleLocalMoments(nil, nil, mu, sig2, x, 40, std, seeded(9))
			compare("SampleLocalMoments mean", fm, rm)
			for i := range rv { // variances in squared standardized units
				if d := math.Abs(fv[i]-rv[i]) / (std.Scale * std.Scale); d > fastTol*math.Max(1, rv[i]/(std.Scale*std.Scale)) {
					t.Errorf("SampleLocalMoments variance %d: %g fast, %g reference", i, fv[i], rv[i])
				}
			}
		})
	}
}

func TestFastPredictorAllocatesNothing(t *testing.T) {
	p := newProblem(117, []int{100, 100}, 2, 50, 6).oneHot(2)
	pr := NewPredictor(p.arch, 16)
	sig2 := make([]float64, len(p.sigma))
	for j, s := range p.sigma {
		sig2[j] = s * s
	}
	dst := make([]float64, 40*p.arch.Out())
	rng := seeded(1)
	pr.SampleLocal(dst, p.mu, sig2, p.data.X(0), 40, Standardization{}, rng) // makes its buffers
	if got := testing.AllocsPerRun(20, func() { pr.Predict(dst, p.mu, p.data.x[:40*p.arch.In()], Standardization{}) }); got != 0 {
		t.Errorf("Predict: %v allocations per call, want 0", got)
	}
	if got := testing.AllocsPerRun(20, func() { pr.SampleLocal(dst, p.mu, sig2, p.data.X(1), 40, Standardization{}, rng) }); got != 0 {
		t.Errorf("SampleLocal: %v allocations per call, want 0", got)
	}
}

// TestPredictWeights: predicting at prepared weights gives Predict's
// outputs bit for bit, on both engines, for dense and one-hot contexts,
// allocates nothing, and still does after the Predictor has predicted at
// other parameters (the prepared weights are the caller's, not the
// Predictor's buffer).
func TestPredictWeights(t *testing.T) {
	for _, p := range []problem{
		newProblem(7, []int{9, 8}, 3, 50, 11),
		newProblem(117, []int{100, 100}, 2, 50, 6).oneHot(2),
	} {
		std := Standardization{Shift: 2, Scale: 3}
		other := make([]float64, len(p.mu))
		for i := range other {
			other[i] = -p.mu[i]
		}
		w := p.arch.PrepareWeights(p.mu)
		if &w.Vector()[0] != &p.mu[0] {
			t.Fatal("Vector is not the vector the weights were prepared from")
		}
		for _, reference := range []bool{false, true} {
			pr := NewPredictor(p.arch, 16)
			pr.Reference = reference
			want := pr.Predict(nil, p.mu, p.data.x, std)
			pr.Predict(nil, other, p.data.x, std)
			got := pr.PredictWeights(nil, w, p.data.x, std)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("reference %v: output %d: PredictWeights %v, Predict %v", reference, i, got[i], want[i])
				}
			}
			dst := make([]float64, 40*p.arch.Out())
			if n := testing.AllocsPerRun(20, func() { pr.PredictWeights(dst, w, p.data.x[:40*p.arch.In()], std) }); n != 0 {
				t.Errorf("reference %v: PredictWeights: %v allocations per call, want 0", reference, n)
			}
		}
	}
}

// TestSparseTScatterGradMatchesScatterAxpy checks the first layer's sparse
// weight gradient, by input with kern.GatherAxpy, bit for bit against the
// kern.ScatterAxpy of every batch row that it replaces, for the means
// and the squared values, on a batch with repeated rows, an empty row and
// inputs no row uses.
func TestSparseTScatterGradMatchesScatterAxpy(t *testing.T) {
	const in, out = 40, 37
	rng := rand.New(rand.NewPCG(41, 42))
	d := NewData(in, 2)
	x := make([]float64, in)
	for r := range 30 {
		clear(x)
		if r != 7 {
			for range 1 + rng.IntN(12) {
				x[rng.IntN(in-3)] = rng.NormFloat64()
			}
		}
		d.Append(x, 0, 0)
	}
	v := d.View()
	rows := []int{3, 7, 3, 29, 0, 12, 12, 5, 18, 22, 3}
	g := make([]float32, len(rows)*out)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	tr := newSparseT(in, len(rows))
	tr.build(&v, rows, true)
	for _, squared := range []bool{false, true} {
		want := make([]float32, in*out)
		for i := range want {
			want[i] = float32(rng.NormFloat64())
		}
		got := append([]float32(nil), want...)
		sq := make([]float32, in)
		for i, r := range rows {
			cols, vals := v.nz.row(r)
			if squared {
				vals = squareInto(sq, vals)
			}
			kern.ScatterAxpy(want, out, cols, vals, g[i*out:(i+1)*out])
		}
		tr.scatterGrad(got, g, out, squared)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("squared=%v: dW[%d] = %g, want %g", squared, i, got[i], want[i])
			}
		}
	}
}
