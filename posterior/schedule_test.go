package posterior_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// scheduleRun trains a mean-field posterior of a network with one hidden
// layer of 16 units, fan-in prior, on a 0/1 bandit problem as a bandit's trainer does:
// the rows arrive one at a time and after each the trainer runs iters
// iterations warm-started from the previous posterior. It returns the
// median standard deviation of each layer and the predictive means of
// the played arm's logit on 64 held-out contexts. The standard
// deviations start at init times the prior's (model.init_sigma).
func scheduleRun(t *testing.T, iters int, sigmaLR, init float64) (med []float64, pred []float64) {
	const n, in = 150, 3
	rng := rand.New(rand.NewPCG(4, 4))
	arch := nn.NewArch(in, []int{16}, 2)
	data := nn.NewData(in, 2)
	xs := make([][]float64, n)
	arms := make([]int, n)
	ys := make([]float64, n)
	for i := range n {
		x := []float64{rng.NormFloat64(), rng.NormFloat64(), 1}
		a := rng.IntN(2)
		f := 1.5 * x[0]
		if a == 1 {
			f = -x[0] + x[1]
		}
		y := 0.0
		if rng.Float64() < nn.Sigmoid(f) {
			y = 1
		}
		xs[i], arms[i], ys[i] = x, a, y
	}
	pv := make([]float64, arch.NumParams())
	for l := range arch.NumLayers() {
		ly := arch.Layer(l)
		for j := ly.W; j < ly.B; j++ {
			pv[j] = 2 / float64(ly.In)
		}
		for j := ly.B; j < ly.End(); j++ {
			pv[j] = 1
		}
	}
	q := posterior.NewMeanField(arch.NumParams(), 0, pv, 1)
	sig := make([]float64, len(pv))
	for j, v := range pv {
		sig[j] = init * math.Sqrt(v)
	}
	q.SetSigma(sig)
	arch.InitHe(q.Mu, rand.New(rand.NewPCG(1, 1)))
	var tr *posterior.Trainer
	trng := rand.New(rand.NewPCG(2, 2))
	for i := range n {
		data.Append(xs[i], arms[i], ys[i])
		lik := nn.NewLikelihood(arch, data.View(), nn.Options{Family: nn.Bernoulli})
		if tr == nil {
			var err error
			if tr, err = posterior.NewTrainer(lik, posterior.TrainConfig{SigmaLR: sigmaLR}); err != nil {
				t.Fatal(err)
			}
		} else {
			tr.SetLikelihood(lik)
		}
		if _, err := tr.Run(context.Background(), q, iters, trng); err != nil {
			t.Fatal(err)
		}
	}
	s := q.Sigma(nil)
	for l := range arch.NumLayers() {
		ly := arch.Layer(l)
		v := slices.Clone(s[ly.W:ly.End()])
		slices.Sort(v)
		med = append(med, v[len(v)/2])
	}
	p := nn.NewPredictor(arch, 64)
	test := rand.New(rand.NewPCG(7, 7))
	x := make([]float64, in)
	out := make([]float64, 2)
	for range 64 {
		x[0], x[1], x[2] = test.NormFloat64(), test.NormFloat64(), 1
		p.Predict(out, q.Mu, x, nn.Standardization{})
		pred = append(pred, out...)
	}
	return med, pred
}

// TestPosteriorWidthFollowsTheData trains on the same 150 rewards, one
// at a time, at 10 and at 300 iterations a reward. With Adam at the
// means' rate on the standard deviations (SigmaLR = LR = 1e-3, the
// default) the width follows the iteration count: the hidden layer's
// median standard deviation after 10 iterations a reward is less than
// 0.7 of where 300 put it. With SigmaLR 0.03 the two schedules agree:
// the layers' median standard deviations within 15%. The means still
// move at Adam's 1e-3 and after 1,500 iterations in all have not
// converged: the logits they predict on 64 held-out contexts differ by
// 0.33 on average (0.94 at most; the logits span about +-4), checked
// against 0.5. Making the means' fit schedule-free too is open. Started
// at the prior's width (init 1 instead of 0.1) the widths agree at the
// default rate within 2% (0.711 against 0.708 in the hidden layer): the
// standard deviations only shrink where the data asks.
func TestPosteriorWidthFollowsTheData(t *testing.T) {
	if testing.Short() {
		t.Skip("two schedules of 200 retrainings")
	}
	clockA, _ := scheduleRun(t, 10, 0, 0.1)
	clockB, _ := scheduleRun(t, 300, 0, 0.1)
	t.Logf("SigmaLR = LR: median sigma per layer %.4f at 10 iterations a reward, %.4f at 300", clockA, clockB)
	if r := clockA[0] / clockB[0]; r > 0.7 && r < 1/0.7 {
		t.Errorf("at SigmaLR = LR the schedules agree (ratio %.2f): the test no longer shows the clock", r)
	}
	medA, predA := scheduleRun(t, 10, 0.03, 0.1)
	medB, predB := scheduleRun(t, 300, 0.03, 0.1)
	t.Logf("SigmaLR 0.03: median sigma per layer %.4f at 10 iterations a reward, %.4f at 300", medA, medB)
	for l := range medA {
		if rel := math.Abs(medA[l]-medB[l]) / medB[l]; rel > 0.15 {
			t.Errorf("layer %d: median sigma %.4f at 10 iterations a reward, %.4f at 300 (relative difference %.2f)", l, medA[l], medB[l], rel)
		}
	}
	var worst, mad float64
	for i := range predA {
		d := math.Abs(predA[i] - predB[i])
		worst = max(worst, d)
		mad += d / float64(len(predA))
	}
	t.Logf("predicted logits: mean absolute difference %.3f, largest %.3f", mad, worst)
	if mad > 0.5 {
		t.Errorf("predicted logits differ by %.3f on average between the schedules, want at most 0.5", mad)
	}
	// Started at the prior's width (model.init_sigma 1) instead of a tenth
	// of it, the widths agree at the default rate too: the clock above is
	// the time the standard deviations take to grow from their start.
	wideA, _ := scheduleRun(t, 10, 0, 1)
	wideB, _ := scheduleRun(t, 300, 0, 1)
	t.Logf("started at the prior's width, SigmaLR = LR: median sigma per layer %.4f at 10 iterations a reward, %.4f at 300", wideA, wideB)
	for l := range wideA {
		if rel := math.Abs(wideA[l]-wideB[l]) / wideB[l]; rel > 0.05 {
			t.Errorf("started at the prior's width, layer %d: median sigma %.4f at 10 iterations a reward, %.4f at 300 (relative difference %.2f)", l, wideA[l], wideB[l], rel)
		}
	}
}
