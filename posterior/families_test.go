package posterior_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// TestNoHiddenLayerIsBayesianLogisticRegression trains the mean-field
// posterior of a network without hidden layers under the Bernoulli
// likelihood, f = w x + b and p(y = 1) = sigmoid(f), which is Bayesian
// logistic regression with the prior N(0, 1) on w and b, and compares
// it with the exact posterior by brute-force quadrature on a 241 x 241
// grid over +-6 standard deviations of the Laplace approximation. With
// centred inputs the exact posterior is nearly Gaussian and nearly
// uncorrelated, so the mean-field optimum must match its marginal means
// to a tenth of a posterior standard deviation and its marginal
// variances to 12%.
func TestNoHiddenLayerIsBayesianLogisticRegression(t *testing.T) {
	const n = 300
	rng := rand.New(rand.NewPCG(5, 5))
	arch := nn.NewArch(1, nil, 1)
	data := nn.NewData(1, 1)
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range n {
		x := rng.NormFloat64()
		y := 0.0
		if rng.Float64() < nn.Sigmoid(1.5*x-0.5) {
			y = 1
		}
		xs[i], ys[i] = x, y
		data.Append([]float64{x}, 0, y)
	}
	logPost := func(w, b float64) float64 {
		lp := -0.5 * (w*w + b*b)
		for i, x := range xs {
			f := w*x + b
			lp += ys[i]*f - math.Max(f, 0) - math.Log1p(math.Exp(-math.Abs(f)))
		}
		return lp
	}
	// Exact moments by quadrature on a grid around the MAP, found by
	// Newton's method.
	w, b := 0.0, 0.0
	var hww, hbb, hwb float64
	for range 50 {
		gw, gb := -w, -b
		hww, hbb, hwb = 1, 1, 0
		for i, x := range xs {
			p := nn.Sigmoid(w*x + b)
			gw += (ys[i] - p) * x
			gb += ys[i] - p
			v := p * (1 - p)
			hww += v * x * x
			hbb += v
			hwb += v * x
		}
		det := hww*hbb - hwb*hwb
		w += (hbb*gw - hwb*gb) / det
		b += (hww*gb - hwb*gw) / det
	}
	sw, sb := math.Sqrt(hbb/(hww*hbb-hwb*hwb)), math.Sqrt(hww/(hww*hbb-hwb*hwb))
	const k = 241
	ref := logPost(w, b)
	var z, mw, mb, vw, vb float64
	for i := range k {
		wi := w + sw*(-6+12*float64(i)/(k-1))
		for j := range k {
			bj := b + sb*(-6+12*float64(j)/(k-1))
			p := math.Exp(logPost(wi, bj) - ref)
			z += p
			mw += p * wi
			mb += p * bj
			vw += p * wi * wi
			vb += p * bj * bj
		}
	}
	mw, mb = mw/z, mb/z
	vw, vb = vw/z-mw*mw, vb/z-mb*mb
	posterior.ForEngines(t, func(t *testing.T, reference bool) {
		checkLogistic(t, reference, arch, data, [4]float64{mw, mb, vw, vb})
	})
}

func checkLogistic(t *testing.T, reference bool, arch nn.Arch, data *nn.Data, exact [4]float64) {
	const n = 300
	rng := rand.New(rand.NewPCG(5, 6))
	mw, mb, vw, vb := exact[0], exact[1], exact[2], exact[3]
	lik := nn.NewLikelihood(arch, data.View(), nn.Options{Family: nn.Bernoulli})
	q := posterior.NewMeanField(arch.NumParams(), 0, ones(arch.NumParams(), 1), 0.1)
	tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{BatchSize: n, LR: 0.02, FinalLR: 1e-5, Reference: reference})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), q, 30000, rng); err != nil {
		t.Fatal(err)
	}
	sig := q.Sigma(nil)
	// nn's layout: the weight, then the bias.
	for _, c := range []struct {
		name         string
		mu, sd       float64
		exact, exVar float64
	}{
		{"w", q.Mu[0], sig[0], mw, vw},
		{"b", q.Mu[1], sig[1], mb, vb},
	} {
		if d := math.Abs(c.mu - c.exact); d > 0.1*math.Sqrt(c.exVar) {
			t.Errorf("mean of %s = %.4f, exact posterior mean %.4f (sd %.4f)", c.name, c.mu, c.exact, math.Sqrt(c.exVar))
		}
		if rel := math.Abs(c.sd*c.sd-c.exVar) / c.exVar; rel > 0.12 {
			t.Errorf("variance of %s = %.5f, exact posterior variance %.5f (relative error %.3f)", c.name, c.sd*c.sd, c.exVar, rel)
		}
	}
}

// TestNoisePriorSetsTheNoiseVariance trains a linear model (no hidden
// layer) with a learned noise variance under an inverse-gamma prior
// IG(a, b) on it: at the optimum of the trainer's objective the noise
// variance is the mode of its conditional given q,
//
//	s2 = (E_q[sum_i (y_i - f_i)^2]/2 + b) / (n/2 + a),
//
// (standardization the identity) where for a linear model E_q[(y - x.w -
// c)^2] = (y - x.mu - mu_c)^2 + x^2 sigma_w^2 + sigma_c^2 exactly. With
// few, noisy rows the prior must visibly move s2 away from the maximum
// likelihood value E_q[ss]/n.
func TestNoisePriorSetsTheNoiseVariance(t *testing.T) {
	const n = 12
	rng := rand.New(rand.NewPCG(9, 2))
	arch := nn.NewArch(1, nil, 1)
	data := nn.NewData(1, 1)
	xs, ys := make([]float64, n), make([]float64, n)
	for i := range n {
		xs[i] = rng.NormFloat64()
		ys[i] = 0.7*xs[i] + 0.4*rng.NormFloat64()
		data.Append([]float64{xs[i]}, 0, ys[i])
	}
	prior := nn.InvGamma{Shape: 3, Rate: 1}
	lik := nn.NewLikelihood(arch, data.View(), nn.Options{Estimator: nn.LocalReparam, LearnNoise: true, NoisePrior: prior})
	q := posterior.NewMeanField(arch.NumParams(), 1, ones(arch.NumParams(), 1), 0.1)
	tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{BatchSize: n, LR: 0.01, FinalLR: 1e-5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), q, 40000, rng); err != nil {
		t.Fatal(err)
	}
	sig := q.Sigma(nil)
	var ess float64
	for i, x := range xs {
		r := ys[i] - x*q.Mu[0] - q.Mu[1]
		ess += r*r + x*x*sig[0]*sig[0] + sig[1]*sig[1]
	}
	want := (ess/2 + prior.Rate) / (n/2 + prior.Shape)
	got := math.Exp(q.Hyper[0])
	if rel := math.Abs(got-want) / want; rel > 0.03 {
		t.Errorf("noise variance %.5f, want the conditional mode %.5f (relative error %.3f)", got, want, rel)
	}
	if ml := ess / n; math.Abs(got-ml)/ml < 0.2 {
		t.Errorf("noise variance %.5f is within 20%% of the maximum-likelihood %.5f: the prior had no visible effect", got, ml)
	}
}

// A noise linear in the context (nn.Options.NoiseContext) learns a noise
// that differs between contexts: one arm, a one-hot context of two
// groups whose rewards have noise variance 0.1 and 4 about the same
// linear mean. The linear model's mean-field posterior trained with it
// must find both variances (within 15%, with 400 rows a group and the
// weak priors, on both engines).
func TestContextNoiseLearnsEachContextsNoise(t *testing.T) {
	posterior.ForEngines(t, func(t *testing.T, reference bool) {
		const n = 800
		rng := rand.New(rand.NewPCG(4, 4))
		arch := nn.NewArch(2, nil, 1)
		data := nn.NewData(2, 1)
		want := [2]float64{0.1, 4}
		for i := range n {
			g := i % 2
			x := []float64{0, 0}
			x[g] = 1
			data.Append(x, 0, 1+2*float64(g)+math.Sqrt(want[g])*rng.NormFloat64())
		}
		lik := nn.NewLikelihood(arch, data.View(), nn.Options{LearnNoise: true, NoiseContext: true, NoisePrior: nn.InvGamma{Shape: 1, Rate: 0.1}})
		q := posterior.NewMeanField(arch.NumParams(), lik.NumHyper(), ones(arch.NumParams(), 10), 0.1)
		tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{BatchSize: 64, LR: 0.01, FinalLR: 1e-4, Reference: reference})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Run(context.Background(), q, 20000, rng); err != nil {
			t.Fatal(err)
		}
		for g := range 2 {
			x := []float64{0, 0}
			x[g] = 1
			got := lik.ContextNoiseVar(0, x, q.Hyper)
			if rel := math.Abs(got-want[g]) / want[g]; rel > 0.15 {
				t.Errorf("group %d: noise variance %.4f, want %.4f (relative error %.3f)", g, got, want[g], rel)
			}
			t.Logf("group %d: noise variance %.4f, generating %.4f", g, got, want[g])
		}
	})
}
