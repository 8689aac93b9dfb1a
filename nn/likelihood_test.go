package nn

import (
	"math"
	"math/rand/v2"
	"slices"
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

// TestLikelihoodFamiliesClosedForm checks LogLik of a network without
// hidden layers, f = W x + b, against the closed forms of each family
// written out row by row: the logistic log-likelihood, and Gaussian
// densities with one noise variance per arm; and LogHyperPrior against
// the inverse-gamma density of v = s2/Scale^2 with its Jacobian.
func TestLikelihoodFamiliesClosedForm(t *testing.T) {
	p := newProblem(4, nil, 3, 25, 21)
	w := p.mu
	a := p.arch
	ly := a.Layer(0)
	out := func(i, arm int) float64 {
		f := w[ly.B+arm]
		for j := range ly.In {
			f += w[ly.W+arm*ly.In+j] * p.data.x[i*ly.In+j]
		}
		return f
	}
	t.Run("bernoulli", func(t *testing.T) {
		b := p.binary()
		lik := NewLikelihood(a, b.data, Options{Family: Bernoulli})
		got := lik.NewEvaluator(7).LogLik(nil, nil, w, nil, nil)
		var want float64
		for i := range b.data.Len() {
			f := out(i, b.data.arm[i])
			pr := 1 / (1 + math.Exp(-f))
			if b.data.y[i] == 1 {
				want += math.Log(pr)
			} else {
				want += math.Log(1 - pr)
			}
		}
		if relErr(got, want, 1) > 1e-12 {
			t.Errorf("LogLik = %.15g, want %.15g", got, want)
		}
	})
	t.Run("gaussian with a noise variance per arm", func(t *testing.T) {
		std := Standardization{Shift: 2, Scale: 3}
		prior := InvGamma{Shape: 2, Rate: 0.5}
		lik := NewLikelihood(a, p.data, Options{LearnNoise: true, NoisePerArm: true, NoisePrior: prior, Standardization: std})
		hyper := []float64{math.Log(4), math.Log(0.5), math.Log(30)}
		got := lik.NewEvaluator(7).LogLik(nil, nil, w, hyper, nil)
		var want float64
		for i := range p.data.Len() {
			arm := p.data.arm[i]
			s2 := math.Exp(hyper[arm])
			r := p.data.y[i] - (std.Shift + std.Scale*out(i, arm))
			want += -0.5*math.Log(2*math.Pi*s2) - r*r/(2*s2)
		}
		if relErr(got, want, 1) > 1e-12 {
			t.Errorf("LogLik = %.15g, want %.15g", got, want)
		}
		var wantPrior float64
		for _, h := range hyper {
			v := math.Exp(h) / (std.Scale * std.Scale)
			lg, _ := math.Lgamma(prior.Shape)
			// log IG(v; a, b) + log |dv/dh| with dv/dh = v.
			wantPrior += prior.Shape*math.Log(prior.Rate) - lg - (prior.Shape+1)*math.Log(v) - prior.Rate/v + math.Log(v)
		}
		dh := make([]float64, 3)
		if gotPrior := lik.LogHyperPrior(dh, hyper); relErr(gotPrior, wantPrior, 1) > 1e-12 {
			t.Errorf("LogHyperPrior = %.15g, want %.15g", gotPrior, wantPrior)
		}
		checkGrad(t, "LogHyperPrior", func() float64 { return lik.LogHyperPrior(nil, hyper) }, hyper, dh, gradTol)
	})
	t.Run("gaussian with a noise variance linear in the context", func(t *testing.T) {
		std := Standardization{Shift: 2, Scale: 3}
		prior := InvGamma{Shape: 2, Rate: 0.5}
		lik := NewLikelihood(a, p.data, Options{LearnNoise: true, NoiseContext: true, NoisePrior: prior, Standardization: std})
		hyper := contextHyper(a, 8)
		if lik.NumHyper() != 3*(4+1) {
			t.Fatalf("NumHyper %d, want arms x (inputs + 1) = 15", lik.NumHyper())
		}
		got := lik.NewEvaluator(7).LogLik(nil, nil, w, hyper, nil)
		var want float64
		for i := range p.data.Len() {
			arm := p.data.arm[i]
			ls := hyper[arm*5]
			for j := range 4 {
				ls += hyper[arm*5+1+j] * p.data.x[i*4+j]
			}
			s2 := math.Exp(ls)
			r := p.data.y[i] - (std.Shift + std.Scale*out(i, arm))
			want += -0.5*math.Log(2*math.Pi*s2) - r*r/(2*s2)
		}
		if relErr(got, want, 1) > 1e-12 {
			t.Errorf("LogLik = %.15g, want %.15g", got, want)
		}
		var wantPrior float64
		lg, _ := math.Lgamma(prior.Shape)
		for k, h := range hyper {
			if k%5 != 0 { // a slope: N(0, NoiseSlopeVar)
				wantPrior += -0.5*math.Log(2*math.Pi*NoiseSlopeVar) - h*h/(2*NoiseSlopeVar)
				continue
			}
			v := math.Exp(h) / (std.Scale * std.Scale)
			wantPrior += prior.Shape*math.Log(prior.Rate) - lg - (prior.Shape+1)*math.Log(v) - prior.Rate/v + math.Log(v)
		}
		dh := make([]float64, len(hyper))
		if gotPrior := lik.LogHyperPrior(dh, hyper); relErr(gotPrior, wantPrior, 1) > 1e-12 {
			t.Errorf("LogHyperPrior = %.15g, want %.15g", gotPrior, wantPrior)
		}
		checkGrad(t, "LogHyperPrior", func() float64 { return lik.LogHyperPrior(nil, hyper) }, hyper, dh, gradTol)
		for arm := range 3 {
			x := p.data.X(0)
			ls := hyper[arm*5]
			for j := range 4 {
				ls += hyper[arm*5+1+j] * x[j]
			}
			if got := lik.ContextNoiseVar(arm, x, hyper); relErr(got, math.Exp(ls), 1) > 1e-14 {
				t.Errorf("ContextNoiseVar(%d) = %g, want %g", arm, got, math.Exp(ls))
			}
		}
		// Below the floor the variance is the floor's, and the row's
		// log-likelihood is flat in the hyperparameters.
		low := slices.Clone(hyper)
		for arm := range 3 {
			low[arm*5] = -40
		}
		floor := ContextNoiseFloor * std.Scale * std.Scale
		if got := lik.ContextNoiseVar(0, p.data.X(0), low); relErr(got, floor, 1) > 1e-14 {
			t.Errorf("ContextNoiseVar below the floor = %g, want the floor %g", got, floor)
		}
		dLow := make([]float64, len(low))
		lik.NewEvaluator(7).LogLik(nil, dLow, w, low, nil)
		if maxAbs(dLow) != 0 {
			t.Errorf("below the floor the log-likelihood moves with the hyperparameters: %v", dLow)
		}
	})
}

// contextHyper returns hyperparameters of a context noise
// (Options.NoiseContext) for arch: per arm an intercept log s2 between
// log 3 and log 7 and slopes of standard deviation 0.2.
func contextHyper(arch Arch, seed uint64) []float64 {
	rng := seeded(seed)
	d := arch.In()
	h := make([]float64, arch.Out()*(d+1))
	for a := range arch.Out() {
		h[a*(d+1)] = math.Log(3 + 4*rng.Float64())
		for j := 1; j <= d; j++ {
			h[a*(d+1)+j] = 0.2 * rng.NormFloat64()
		}
	}
	return h
}
