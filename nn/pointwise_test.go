package nn

import (
	"math"
	"testing"
)

// LogDensity of each row, from the reference path's prediction, is
// Evaluator.LogLik of that row alone: for both families, a shared and a
// per-arm and a context noise, and a standardization other than the identity. The
// tolerance is float64 rounding through a forward pass of a few hundred
// operations.
func TestLogDensityIsLogLikPerRow(t *testing.T) {
	const tol = 1e-10
	base := newProblem(3, []int{5, 4}, 3, 12, 11)
	std := Standardization{Shift: 1.5, Scale: 2.5}
	for _, c := range []struct {
		name  string
		p     problem
		opt   Options
		hyper []float64
	}{
		{"a Gaussian of one learned noise", base, Options{LearnNoise: true, Standardization: std}, []float64{math.Log(3.7)}},
		{"a Gaussian of per-arm noises", base, Options{LearnNoise: true, NoisePerArm: true, Standardization: std}, []float64{math.Log(0.5), 0, math.Log(7)}},
		{"a Gaussian of fixed noise", base, Options{NoiseVar: 2}, nil},
		{"a Gaussian of context noises", base, Options{LearnNoise: true, NoiseContext: true, Standardization: std}, contextHyper(base.arch, 4)},
		{"a Bernoulli", base.binary(), Options{Family: Bernoulli}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			lik := NewLikelihood(c.p.arch, c.p.data, c.opt)
			ev := lik.NewEvaluator(4)
			pr := NewPredictor(c.p.arch, 4)
			pr.Reference = true
			out := c.p.arch.Out()
			for i := range c.p.data.Len() {
				pred := pr.Predict(nil, c.p.mu, c.p.data.X(i), c.opt.Standardization)
				a := c.p.data.Arm(i)
				got := lik.LogDensity(c.p.data.Y(i), a, pred[a], c.p.data.X(i), c.hyper)
				want := ev.LogLik(nil, nil, c.p.mu, c.hyper, []int{i})
				if math.Abs(got-want) > tol*max(1, math.Abs(want)) {
					t.Errorf("row %d: LogDensity = %.12g, LogLik = %.12g", i, got, want)
				}
				if len(pred) != out {
					t.Fatalf("prediction of %d arms, want %d", len(pred), out)
				}
			}
		})
	}
}
