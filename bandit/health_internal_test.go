package bandit

import (
	"math"
	mrand "math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/nn"
)

// predictionTol is the float32 fast engine's rounding of a prediction
// (nn.Predictor: about 1e-6 relative) carried through a log density.
const predictionTol = 1e-5

// linearPosterior is a network without hidden layers, f_a(x) = W_a x +
// b_a on one input and two arms: parameters W_0, W_1, b_0, b_1.
func linearPosterior() (nn.Arch, []float64) {
	return nn.NewArch(1, nil, 2), []float64{1, -2, 0, 0.5}
}

// Held-out figures of a point posterior (S = 1) under the Bernoulli
// likelihood, against values computed by hand (python, printed to 16
// digits) from f = W_a x + b_a, p = sigmoid(f):
//
//	row (x, arm, y)   f      p = sigmoid(f)  log p(y)   bin
//	(1, 0, 1)         1      0.7311          -0.3133    7
//	(2, 1, 0)        -3.5    0.0293          -0.0298    0
//	(0, 0, 0)         0      0.5             -0.6931    5
//	(-1, 1, 1)        2.5    0.9241          -0.0789    9
//	(1.2, 0, 0)       1.2    0.7685          -1.4633    7
//
// mean log-likelihood -0.5156662975962737; ECE = 1/5 (0.2689 + 0.0293 +
// 0.5 + 0.0759) + 2/5 |1/2 - (0.7311 + 0.7685)/2| = 0.22095075458032445.
func TestHeldOutBernoulliClosedForm(t *testing.T) {
	arch, w := linearPosterior()
	v := nn.NewView(1, 2, []float64{1, 2, 0, -1, 1.2}, []int{0, 1, 0, 1, 0}, []float64{1, 0, 0, 1, 0})
	lik := nn.NewLikelihood(arch, v, nn.Options{Family: nn.Bernoulli})
	pr := predictive{arch: arch, lik: lik, mu: w, draws: 1}
	scores := scoreRows(nil, nn.NewPredictor(arch, 4), pr, v, []int{0, 1, 2, 3, 4}, mrand.New(mrand.NewPCG(1, 2)))
	ll, ece := summarize(scores)
	if want := -0.5156662975962737; math.Abs(ll-want) > predictionTol {
		t.Errorf("log-likelihood per reward = %.10g, want %.10g", ll, want)
	}
	if want := 0.22095075458032445; ece == nil || math.Abs(*ece-want) > predictionTol {
		t.Errorf("ECE = %v, want %.10g", ece, want)
	}
	// The same posterior as a mean-field one of zero variance: every
	// draw is the point, whatever S.
	pr.sig2, pr.draws = make([]float64, len(w)), HeldOutDraws
	scores = scoreRows(nil, nn.NewPredictor(arch, 4), pr, v, []int{0, 1, 2, 3, 4}, mrand.New(mrand.NewPCG(1, 2)))
	if ll2, ece2 := summarize(scores); math.Abs(ll2-ll) > predictionTol || ece2 == nil || math.Abs(*ece2-*ece) > predictionTol {
		t.Errorf("zero-variance draws: %g, %v; want the point's %g, %g", ll2, ece2, ll, *ece)
	}
}

// Held-out log-likelihood under the Gaussian likelihood with a learned
// noise s2 = 0.5 and the standardization y = 1 + 2 t, against the closed
// form of a linear network: f_a(x) ~ N(m, v) with m = mu_W x + mu_b and
// v = x^2 s2_W + s2_b, so the prediction 1 + 2 f ~ N(1 + 2m, 4v) and the
// predictive density is N(y | 1 + 2m, s2 + 4v). With zero variances (the
// point) the match is to rounding; with S = 200,000 draws the Monte Carlo
// average of the densities has a relative standard error below 0.5% on
// these rows (the density's coefficient of variation is below 2), so the
// log is within 0.02. The ECE is absent: the rewards are not 0/1.
func TestHeldOutGaussianClosedForm(t *testing.T) {
	arch, w := linearPosterior()
	std := nn.Standardization{Shift: 1, Scale: 2}
	v := nn.NewView(1, 2, []float64{1, 2, -0.5}, []int{0, 1, 0}, []float64{3.2, -4, 0.1})
	lik := nn.NewLikelihood(arch, v, nn.Options{LearnNoise: true, Standardization: std})
	hyper := []float64{math.Log(0.5)}
	sig2 := []float64{0.09, 0.04, 0.25, 0.01}
	closed := func(sig2 []float64) float64 {
		var s float64
		for i := range v.Len() {
			x, a, y := v.X(i)[0], v.Arm(i), v.Y(i)
			m, vv := w[a]*x+w[2+a], x*x*sig2[a]+sig2[2+a]
			s2 := 0.5 + 4*vv
			r := y - (1 + 2*m)
			s += -0.5*math.Log(2*math.Pi*s2) - r*r/(2*s2)
		}
		return s / float64(v.Len())
	}
	for _, c := range []struct {
		name  string
		sig2  []float64
		draws int
		tol   float64
	}{
		{"a point", nil, 1, predictionTol},
		{"a mean-field posterior, 200,000 draws", sig2, 200_000, 0.02},
	} {
		t.Run(c.name, func(t *testing.T) {
			pr := predictive{arch: arch, lik: lik, mu: w, sig2: c.sig2, hyper: hyper, std: std, draws: c.draws}
			scores := scoreRows(nil, nn.NewPredictor(arch, 256), pr, v, []int{0, 1, 2}, mrand.New(mrand.NewPCG(3, 4)))
			s := c.sig2
			if s == nil {
				s = make([]float64, 4)
			}
			ll, ece := summarize(scores)
			if want := closed(s); math.Abs(ll-want) > c.tol {
				t.Errorf("log-likelihood per reward = %.6g, want %.6g within %g", ll, want, c.tol)
			}
			if ece != nil {
				t.Errorf("ECE = %g for rewards that are not 0/1, want none", *ece)
			}
		})
	}
}

// The ECE by hand on rows that share bins and sit on bin edges: p = 0.1
// falls in bin 1, p = 1 in the last; p = 0.05, 0.08 (y 0, 1) share bin
// 0: |1/2 - 0.065| = 0.435; p = 0.1, 0.15 (y 0, 0) share bin 1: 0.125;
// p = 1 (y 1) is exact. ECE = 2/5 0.435 + 2/5 0.125 + 0 = 0.224.
func TestCalibrationErrorByHand(t *testing.T) {
	scores := []rowScore{{p: 0.05, y: 0}, {p: 0.08, y: 1}, {p: 0.1, y: 0}, {p: 0.15, y: 0}, {p: 1, y: 1}}
	if got, want := calibrationError(scores), 0.224; math.Abs(got-want) > 1e-12 {
		t.Errorf("ECE = %.15g, want %g", got, want)
	}
	if got := calibrationError([]rowScore{{p: 0.3, y: 0}, {p: 0.3, y: 1}, {p: 0.7, y: 1}, {p: 0.7, y: 0}, {p: 0.7, y: 1}}); math.Abs(got-(2.0/5*0.2+3.0/5*(0.7-2.0/3))) > 1e-12 {
		t.Errorf("ECE = %.15g, want %.15g", got, 2.0/5*0.2+3.0/5*(0.7-2.0/3))
	}
}

// The spread per layer by hand: a 2-2-1 network (layer 1: 4 weights and
// 2 biases, layer 2: 2 weights and 1 bias). Layer 1's sigmas 0.1, 0.2,
// 0.3, 0.95, 1, 2 against prior sigmas 1 (weights) and 2 (biases):
// median (0.3 + 0.95)/2 = 0.625; at the prior (>= 0.9 of it): 0.95 (of
// 1) and 2 (of 2), 2 of 6. Layer 2's 0.5, 0.7, 3 against 0.5, 0.5 and 3:
// median 0.7; all three at the prior.
func TestLayerSpreadByHand(t *testing.T) {
	arch := nn.NewArch(2, []int{2}, 1)
	sd := []float64{0.1, 0.2, 0.3, 0.95, 1, 2, 0.5, 0.7, 3}
	psd := []float64{1, 1, 1, 1, 2, 2, 0.5, 0.5, 3}
	sig2, pv := make([]float64, len(sd)), make([]float64, len(sd))
	for i := range sd {
		sig2[i], pv[i] = sd[i]*sd[i], psd[i]*psd[i]
	}
	got := layerSpread(arch, sig2, pv)
	want := []LayerHealth{
		{Layer: 1, In: 2, Out: 2, Parameters: 6, MedianSigma: 0.625, AtPriorShare: 2.0 / 6},
		{Layer: 2, In: 2, Out: 1, Parameters: 3, MedianSigma: 0.7, AtPriorShare: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("%d layers, want %d", len(got), len(want))
	}
	for l := range want {
		g, w := got[l], want[l]
		if g.Layer != w.Layer || g.In != w.In || g.Out != w.Out || g.Parameters != w.Parameters ||
			math.Abs(g.MedianSigma-w.MedianSigma) > 1e-12 || math.Abs(g.AtPriorShare-w.AtPriorShare) > 1e-12 {
			t.Errorf("layer %d: %+v, want %+v", l+1, g, w)
		}
	}
}

// rewardVariance is the n-1 sample variance, per arm or over all rows,
// and none with fewer than two rewards: rewards 1, 3 (arm 0) and 10
// (arm 1): all 67/3 (mean 14/3, squares 121/9 + 25/9 + 256/9 = 402/9, / 2),
// arm 0 2, arm 1 none.
func TestRewardVarianceByHand(t *testing.T) {
	v := nn.NewView(1, 2, []float64{0, 0, 0}, []int{0, 0, 1}, []float64{1, 3, 10})
	if s, n := rewardVariance(v, -1); s == nil || math.Abs(*s-67.0/3) > 1e-12 || n != 3 {
		t.Errorf("all: %v over %d, want %g over 3", s, n, 67.0/3)
	}
	if s, n := rewardVariance(v, 0); s == nil || math.Abs(*s-2) > 1e-12 || n != 2 {
		t.Errorf("arm 0: %v over %d, want 2 over 2", s, n)
	}
	if s, n := rewardVariance(v, 1); s != nil || n != 1 {
		t.Errorf("arm 1: %v over %d, want none over 1", s, n)
	}
}

// BestProbabilityOfRecent is P_best (LockInHealth) under the published
// posterior on the newest n decisions' contexts, whatever their shares,
// for tests.
func (a *Agent) BestProbabilityOfRecent(n int) []float64 {
	_, xs, ex, _ := a.health.ring.recentDecisions()
	k := len(xs) - n
	return a.bestProbability(a.model.Load(), xs[k:], ex[k:])
}
