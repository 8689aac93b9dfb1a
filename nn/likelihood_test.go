package nn

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The method set of posterior.Likelihood, spelled out: posterior's
// Evaluator is an alias of this interface literal, so *Likelihood
// satisfies it without nn importing posterior.
var _ interface {
	NumParams() int
	NumHyper() int
	NumRows() int
	NewEvaluator(maxBatch int) interface {
		ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper []float64, rows []int, rng *rand.Rand) float64
		LogLik(dW, dHyper, w, hyper []float64, rows []int) float64
	}
} = (*Likelihood)(nil)

func TestMisusePanics(t *testing.T) {
	p := newProblem(3, []int{4}, 2, 5, 1)
	n := p.arch.NumParams()
	lik := NewLikelihood(p.arch, p.data, Options{})
	ev := lik.NewEvaluator(4)
	cases := []struct {
		name string
		f    func()
	}{
		{"data of another dimension", func() { NewLikelihood(NewArch(4, nil, 2), p.data, Options{}) }},
		{"data with another number of arms", func() { NewLikelihood(NewArch(3, nil, 3), p.data, Options{}) }},
		{"negative noise variance", func() { NewLikelihood(p.arch, p.data, Options{NoiseVar: -1}) }},
		{"negative scale", func() { NewLikelihood(p.arch, p.data, Options{Standardization: Standardization{Scale: -2}}) }},
		{"unknown estimator", func() { NewLikelihood(p.arch, p.data, Options{Estimator: 7}) }},
		{"short mu", func() {
			ev.ExpectedLogLik(make([]float64, n), make([]float64, n), nil, p.mu[:n-1], p.sigma, nil, nil, seeded(1))
		}},
		{"hyper given with fixed noise", func() { ev.LogLik(nil, nil, p.mu, []float64{0}, nil) }},
		{"row out of range", func() { ev.LogLik(nil, nil, p.mu, nil, []int{5}) }},
		{"zero maxBatch", func() { lik.NewEvaluator(0) }},
		{"arm out of range", func() { NewData(3, 2).Append([]float64{1, 2, 3}, 2, 0) }},
		{"context of the wrong length", func() { NewData(3, 2).Append([]float64{1, 2}, 0, 0) }},
		{"zero hidden width", func() { NewArch(3, []int{0}, 2) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, ok := r.(string)
				if !ok || !strings.HasPrefix(msg, "nn: ") {
					t.Errorf("recovered %v, want a panic with an \"nn: \" message", r)
				}
			}()
			c.f()
		})
	}
}
