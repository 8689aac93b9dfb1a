package bandit

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/nn"
)

// The local-reparameterization sampler (one draw, and batched) draws f(x; w), w ~ N(mu,
// diag(sig2)), exactly for one context: its outputs must have the mean
// and variance of the network at full weight samples. Both are estimated
// from n draws; the tolerance is 5 standard errors of the difference of
// two independent means (sqrt(2 var / n)) and, for the variances, of two
// sample variances (about var * sqrt(2 * 2/n) for near-Gaussian outputs,
// doubled for the ReLU network's heavier tails).
func TestLRSampleMatchesWeightSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	arch := nn.NewArch(5, []int{6, 4}, 2)
	n := arch.NumParams()
	mu, sig2, w := make([]float64, n), make([]float64, n), make([]float64, n)
	arch.InitHe(mu, rng)
	for i := range sig2 {
		s := 0.05 + 0.3*rng.Float64()
		sig2[i] = s * s
	}
	x := []float64{1, 0, -0.5, 2, 0}
	s := newNetScratch(arch)
	const draws = 40000
	var lrSum, lrSq, wSum, wSq [2]float64
	lrPrepare(arch, mu, sig2, x, s)
	for range draws {
		for a, v := range lrSample(arch, mu, sig2, s, rng) {
			lrSum[a] += v
			lrSq[a] += v * v
		}
	}
	b := newLRBatch(arch, draws)
	out := lrSampleBatch(arch, mu, sig2, s, b, rng)
	var bSum, bSq [2]float64
	for r := range draws {
		for a := range 2 {
			v := out[r*2+a]
			bSum[a] += v
			bSq[a] += v * v
		}
	}
	for range draws {
		for j := range w {
			w[j] = mu[j] + math.Sqrt(sig2[j])*rng.NormFloat64()
		}
		for a, v := range forward(arch, w, x, s) {
			wSum[a] += v
			wSq[a] += v * v
		}
	}
	for a := range 2 {
		lrMean, wMean, bMean := lrSum[a]/draws, wSum[a]/draws, bSum[a]/draws
		lrVar, wVar, bVar := lrSq[a]/draws-lrMean*lrMean, wSq[a]/draws-wMean*wMean, bSq[a]/draws-bMean*bMean
		if tol := 5 * math.Sqrt(2*wVar/draws); math.Abs(bMean-wMean) > tol {
			t.Errorf("output %d: mean %g by batched local reparameterization, %g by weight samples; want within %g", a, bMean, wMean, tol)
		}
		if tol := 2 * 5 * wVar * math.Sqrt(4.0/draws); math.Abs(bVar-wVar) > tol {
			t.Errorf("output %d: variance %g by batched local reparameterization, %g by weight samples; want within %g", a, bVar, wVar, tol)
		}
		if tol := 5 * math.Sqrt(2*wVar/draws); math.Abs(lrMean-wMean) > tol {
			t.Errorf("output %d: mean %g by local reparameterization, %g by weight samples; want within %g", a, lrMean, wMean, tol)
		}
		if tol := 2 * 5 * wVar * math.Sqrt(4.0/draws); math.Abs(lrVar-wVar) > tol {
			t.Errorf("output %d: variance %g by local reparameterization, %g by weight samples; want within %g", a, lrVar, wVar, tol)
		}
	}
}

// forward must agree with nn.Predictor, the network's reference
// implementation.
func TestForwardMatchesPredictor(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, hidden := range [][]int{nil, {7}, {5, 3}, {4, 4, 4}} {
		arch := nn.NewArch(6, hidden, 3)
		w := make([]float64, arch.NumParams())
		for i := range w {
			w[i] = rng.NormFloat64()
		}
		x := []float64{0.5, -1, 0, 2, 1, 0}
		got := forward(arch, w, x, newNetScratch(arch))
		want := nn.NewPredictor(arch, 1).Predict(nil, w, x, nn.Standardization{})
		for a := range want {
			if math.Abs(got[a]-want[a]) > 1e-12*(1+math.Abs(want[a])) {
				t.Errorf("hidden %v, output %d: forward = %g, Predictor = %g", hidden, a, got[a], want[a])
			}
		}
	}
}

func TestBank(t *testing.T) {
	ctx := context.Background()
	w := []float64{1}
	t.Run("a full bank refuses reservations", func(t *testing.T) {
		b := newBank(2, 1, 0)
		if !b.reserve() || !b.reserve() || b.reserve() {
			t.Fatal("want exactly 2 reservations in a bank of 2")
		}
		b.put(0, w, nn.Standardization{})
		b.put(0, nil, nn.Standardization{}) // a failed refinement frees its room
		if !b.reserve() {
			t.Error("a failed refinement did not free its reservation")
		}
	})
	t.Run("a sample serves at most max_reuse decisions", func(t *testing.T) {
		b := newBank(4, 2, 0)
		for range 3 {
			b.reserve()
			b.put(0, w, nn.Standardization{})
		}
		uses := 0
		for {
			got, _, ok := b.take(ctx, 3, 0, 0)
			if !ok {
				break
			}
			uses += len(got)
		}
		if st := b.status(); uses != 6 || st.Used != 6 || st.Reused != 3 || st.Depth != 0 {
			t.Errorf("%d uses, status %+v; want 6 uses of 3 samples, 3 of them reuses, an empty bank", uses, st)
		}
	})
	t.Run("a newer posterior makes samples stale", func(t *testing.T) {
		b := newBank(4, 1, 0)
		b.reserve()
		b.reserve()
		b.put(1, w, nn.Standardization{})
		b.setVersion(2)
		if kept := b.put(1, w, nn.Standardization{}); kept {
			t.Error("a sample of version 1 was kept after version 2 was published")
		}
		if st := b.status(); st.Depth != 0 || st.Discarded != 2 {
			t.Errorf("status %+v, want an empty bank and 2 discarded", st)
		}
	})
	t.Run("max_staleness keeps samples that many versions", func(t *testing.T) {
		b := newBank(4, 1, 1)
		b.reserve()
		b.put(1, w, nn.Standardization{})
		b.setVersion(2)
		if _, _, ok := b.take(ctx, 1, 0, 0); !ok {
			t.Error("a sample one version old was not usable with max_staleness 1")
		}
	})
	t.Run("take waits for samples up to max_wait", func(t *testing.T) {
		b := newBank(4, 1, 0)
		b.reserve()
		go func() {
			time.Sleep(20 * time.Millisecond)
			b.put(0, w, nn.Standardization{})
		}()
		if _, _, ok := b.take(ctx, 1, 0, 5*time.Second); !ok {
			t.Error("take did not get a sample banked while it waited")
		}
		start := time.Now()
		if _, _, ok := b.take(ctx, 1, 0, 30*time.Millisecond); ok {
			t.Error("take got a sample from an empty bank")
		}
		if d := time.Since(start); d < 30*time.Millisecond || d > 2*time.Second {
			t.Errorf("take gave up after %v, want about 30ms", d)
		}
	})
	t.Run("take returns other samples of the same version for the propensities", func(t *testing.T) {
		b := newBank(8, 1, 0)
		for range 5 {
			b.reserve()
			b.put(0, w, nn.Standardization{})
		}
		got, others, ok := b.take(ctx, 2, 8, 0)
		if !ok || len(got) != 2 || len(others) != 3 {
			t.Errorf("take = %d samples, %d others, %v; want 2, 3, true", len(got), len(others), ok)
		}
		if st := b.status(); st.Depth != 3 {
			t.Errorf("depth %d after taking 2 of 5, want 3 (the others are not consumed)", st.Depth)
		}
	})
}

// BenchmarkMeanFieldPropensity times the draws behind one mean-field
// decision with the default propensity estimate (32 groups of 3) on the
// paper's mushroom network (117 one-hot inputs with 22 ones, [100, 100],
// 2 arms): one draw at a time, and batched.
func BenchmarkMeanFieldPropensity(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	arch := nn.NewArch(117, []int{100, 100}, 2)
	n := arch.NumParams()
	mu, sig2 := make([]float64, n), make([]float64, n)
	arch.InitHe(mu, rng)
	for i := range sig2 {
		sig2[i] = 0.01
	}
	x := make([]float64, 117)
	for i := 0; i < 117; i += 5 {
		x[i] = 1
	}
	s := newNetScratch(arch)
	const draws = DefaultPropensitySamples * DefaultSamples
	b.Run("one at a time", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lrPrepare(arch, mu, sig2, x, s)
			for range draws {
				lrSample(arch, mu, sig2, s, rng)
			}
		}
	})
	b.Run("batched", func(b *testing.B) {
		b.ReportAllocs()
		batch := newLRBatch(arch, draws)
		for b.Loop() {
			lrPrepare(arch, mu, sig2, x, s)
			lrSampleBatch(arch, mu, sig2, s, batch, rng)
		}
	})
}
