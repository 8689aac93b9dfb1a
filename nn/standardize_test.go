package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// restandardizeTol bounds the relative change of predictions and
// log-likelihoods in reward units under an exact reparameterization: a few
// roundings of numbers of order 1 to 100.
const restandardizeTol = 1e-12

func TestRestandardizeKeepsPredictionsInRewardUnits(t *testing.T) {
	cases := []struct {
		name     string
		hidden   []int
		from, to Standardization
	}{
		{"identity to mushroom scale", []int{8, 6}, Standardization{}, Standardization{Shift: -7.5, Scale: 16}},
		{"rescale only", []int{8, 6}, Standardization{Shift: 0, Scale: 2}, Standardization{Shift: 0, Scale: 0.3}},
		{"shift and scale", []int{5}, Standardization{Shift: 3, Scale: 4}, Standardization{Shift: -12, Scale: 19}},
		{"linear model", nil, Standardization{Shift: -1, Scale: 0.5}, Standardization{Shift: 2, Scale: 7}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newProblem(6, c.hidden, 2, 30, 8)
			mu, sigma := clone(p.mu), clone(p.sigma)
			pr := NewPredictor(p.arch, 7)
			pr.Reference = true // the identity holds to float64 rounding
			before := pr.Sample(nil, mu, sigma, p.data.x, c.from, seeded(5))
			lik := func(s Standardization) *Likelihood {
				return NewLikelihood(p.arch, p.data, Options{Estimator: LocalReparam, NoiseVar: 9, Standardization: s})
			}
			n := p.arch.NumParams()
			ellBefore := lik(c.from).NewEvaluator(8).ExpectedLogLik(make([]float64, n), make([]float64, n), nil, mu, sigma, nil, nil, seeded(6))

			Restandardize(p.arch, mu, sigma, c.from, c.to)

			after := pr.Sample(nil, mu, sigma, p.data.x, c.to, seeded(5))
			for i := range before {
				if relErr(after[i], before[i], 1) > restandardizeTol {
					t.Errorf("prediction %d: %.17g before, %.17g after", i, before[i], after[i])
				}
			}
			ellAfter := lik(c.to).NewEvaluator(8).ExpectedLogLik(make([]float64, n), make([]float64, n), nil, mu, sigma, nil, nil, seeded(6))
			if relErr(ellAfter, ellBefore, 1) > restandardizeTol {
				t.Errorf("LocalReparam expected log-likelihood with the same noise: %.17g before, %.17g after", ellBefore, ellAfter)
			}
			for l := range p.arch.NumLayers() - 1 {
				ly := p.arch.Layer(l)
				for j := ly.W; j < ly.End(); j++ {
					if mu[j] != p.mu[j] || sigma[j] != p.sigma[j] {
						t.Fatalf("hidden parameter %d changed", j)
					}
				}
			}
		})
	}
}

func TestRestandardizePointEstimate(t *testing.T) {
	p := newProblem(4, []int{3}, 3, 10, 2)
	from, to := Standardization{Shift: 1, Scale: 2}, Standardization{Shift: -4, Scale: 11}
	pr := NewPredictor(p.arch, 16)
	pr.Reference = true // the identity holds to float64 rounding
	before := pr.Predict(nil, p.mu, p.data.x, from)
	w := clone(p.mu)
	Restandardize(p.arch, w, nil, from, to)
	after := pr.Predict(nil, w, p.data.x, to)
	for i := range before {
		if relErr(after[i], before[i], 1) > restandardizeTol {
			t.Errorf("prediction %d: %.17g before, %.17g after", i, before[i], after[i])
		}
	}
	lb := NewLikelihood(p.arch, p.data, Options{Estimator: Deterministic, Standardization: from}).NewEvaluator(4).LogLik(nil, nil, p.mu, nil, nil)
	la := NewLikelihood(p.arch, p.data, Options{Estimator: Deterministic, Standardization: to}).NewEvaluator(4).LogLik(nil, nil, w, nil, nil)
	if relErr(la, lb, 1) > restandardizeTol {
		t.Errorf("log-likelihood in reward units: %.17g before, %.17g after", lb, la)
	}
}

func TestFitStandardization(t *testing.T) {
	cases := []struct {
		name string
		y    []float64
		want Standardization
	}{
		{"no rows", nil, Standardization{0, 1}},
		{"one row", []float64{-35}, Standardization{-35, 35}},
		{"all zero", []float64{0, 0}, Standardization{0, 1}},
		{"mean and population sd", []float64{5, -35, 0, 10}, Standardization{-5, math.Sqrt((100 + 900 + 25 + 225) / 4.0)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := NewView(1, 1, make([]float64, len(c.y)), make([]int, len(c.y)), c.y)
			got := FitStandardization(v)
			if relErr(got.Shift, c.want.Shift, 1) > 1e-15 || relErr(got.Scale, c.want.Scale, 1) > 1e-15 {
				t.Errorf("FitStandardization(%v) = %+v, want %+v", c.y, got, c.want)
			}
		})
	}
}

// TestFitStandardizationExtremeRewards checks that every finite reward
// set gives a finite, positive scale that Restandardize accepts (issue
// 16, finding 1: two rewards of 1e308 overflowed the variance, and the
// infinite scale made Restandardize panic in the trainer). The expected
// values are the closed forms of the mean and population sd.
func TestFitStandardizationExtremeRewards(t *testing.T) {
	cases := []struct {
		name      string
		y         []float64
		shift, sd float64
	}{
		{"two rewards of 1e308", []float64{1e308, 1e308}, 1e308, 1e308},
		{"1e308 after 1, 2, 3", []float64{1, 2, 3, 1e308}, 0.25e308, math.Sqrt(3) * 0.25e308},
		{"opposite extremes", []float64{-math.MaxFloat64, math.MaxFloat64}, 0, math.MaxFloat64},
		{"tiny differences", []float64{0, 1e-300}, 0.5e-300, MinStandardizationScale},
		{"negative", []float64{-1e300, -3e300}, -2e300, 1e300},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := NewView(1, 1, make([]float64, len(c.y)), make([]int, len(c.y)), c.y)
			got := FitStandardization(v)
			if math.IsInf(got.Shift, 0) || math.IsNaN(got.Shift) || !(got.Scale >= MinStandardizationScale) || math.IsInf(got.Scale, 0) {
				t.Fatalf("FitStandardization(%v) = %+v, want a finite shift and a finite scale >= %g", c.y, got, MinStandardizationScale)
			}
			tol := 1e-12
			if relErr(got.Shift, c.shift, 1e-300) > tol || relErr(got.Scale, c.sd, 1e-300) > tol {
				t.Errorf("FitStandardization(%v) = %+v, want {%g %g}", c.y, got, c.shift, c.sd)
			}
			a := NewArch(1, []int{2}, 1)
			mu, sigma := make([]float64, a.NumParams()), make([]float64, a.NumParams())
			for i := range mu {
				mu[i], sigma[i] = 0.1, 0.01
			}
			Restandardize(a, mu, sigma, Standardization{Shift: 2, Scale: 1}, got) // must not panic
		})
	}
}

// TestBanditRewardsTrainWithoutTuning fits a network to mushroom-like
// rewards (eat: +5 if edible, -35 if poisonous; pass: 0) with the default
// Adam step size and FitStandardization, and checks the predictions. The
// rewards are noiseless so that the fit can be checked context by context.
func TestBanditRewardsTrainWithoutTuning(t *testing.T) {
	if testing.Short() {
		t.Skip("training run")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	const dim, rows = 6, 400
	d := NewData(dim, 2)
	x := make([]float64, dim)
	for range rows {
		for k := range x {
			x[k] = float64(rng.IntN(2))
		}
		poisonous := x[0] == 1
		arm := rng.IntN(2) // 0: pass, 1: eat
		y := 0.0
		if arm == 1 {
			y = 5
			if poisonous {
				y = -35
			}
		}
		d.Append(x, arm, y)
	}
	data := d.View()
	std := FitStandardization(data)
	a := NewArch(dim, []int{16, 16}, 2)
	lik := NewLikelihood(a, data, Options{Estimator: Deterministic, NoiseVar: 1, Standardization: std})
	ev := lik.NewEvaluator(64)
	w := make([]float64, a.NumParams())
	a.InitHe(w, rng)
	g := make([]float64, len(w))
	opt := NewAdam(len(w), 0)
	batch := make([]int, 64)
	for range 3000 {
		for i := range batch {
			batch[i] = rng.IntN(rows)
		}
		ev.LogLik(g, nil, w, nil, batch)
		for j := range g {
			g[j] = -g[j] / float64(len(batch)) // descend the mean negative log-likelihood
		}
		opt.Step(w, g)
	}
	pr := NewPredictor(a, 2)
	edible := []float64{0, 1, 0, 1, 1, 0}
	poison := []float64{1, 1, 0, 1, 1, 0}
	got := pr.Predict(nil, w, append(edible, poison...), std)
	// 3000 steps of Adam at LR 1e-3 bring the fit within a reward unit
	// (1/40 of the range) on this noiseless problem.
	want := []float64{0, 5, 0, -35}
	const tol = 1.0
	for i := range want {
		if math.Abs(got[i]-want[i]) > tol {
			t.Errorf("prediction %d = %.2f, want %.0f ± %g", i, got[i], want[i], tol)
		}
	}
	t.Logf("predicted rewards: edible pass %.2f eat %.2f; poisonous pass %.2f eat %.2f (standardization %+v)", got[0], got[1], got[2], got[3], std)
}
