package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// SampleLocal draws f(x; w), w ~ N(mu, diag(sig2)), exactly for one
// context: its outputs must have the mean and variance of the network at
// full weight samples (Predictor.Sample). Both are estimated from n
// draws; the tolerance is 5 standard errors of the difference of two
// independent means (sqrt(2 var / n)) and, for the variances, of two
// sample variances (about var sqrt(2 * 2/n) for near-Gaussian outputs,
// doubled for the ReLU network's heavier tails). The draws span several
// chunks of the Predictor's batch, and a linear model (no hidden layer)
// is covered too.
func TestSampleLocalMatchesWeightSamples(t *testing.T) {
	for _, arch := range []Arch{NewArch(5, []int{6, 4}, 2), NewArch(5, nil, 2), NewArch(5, []int{6, 4}, 2).WithSkip()} {
		rng := rand.New(rand.NewPCG(1, 2))
		hidden := fmt.Sprintf("%v skip %v", arch.Hidden(), arch.Skip())
		n := arch.NumParams()
		mu, sig2, sigma := make([]float64, n), make([]float64, n), make([]float64, n)
		arch.InitHe(mu, rng)
		for i := range sig2 {
			sigma[i] = 0.05 + 0.3*rng.Float64()
			sig2[i] = sigma[i] * sigma[i]
		}
		x := []float64{1, 0, -0.5, 2, 0}
		std := Standardization{Shift: 3, Scale: 2}
		p := NewPredictor(arch, 100)
		const draws = 40000
		local := p.SampleLocal(nil, mu, sig2, x, draws, std, rng)
		var lSum, lSq, wSum, wSq [2]float64
		out := make([]float64, 2)
		for r := range draws {
			for a := range 2 {
				v := local[r*2+a]
				lSum[a] += v
				lSq[a] += v * v
			}
			for a, v := range p.Sample(out, mu, sigma, x, std, rng) {
				wSum[a] += v
				wSq[a] += v * v
			}
		}
		for a := range 2 {
			lMean, wMean := lSum[a]/draws, wSum[a]/draws
			lVar, wVar := lSq[a]/draws-lMean*lMean, wSq[a]/draws-wMean*wMean
			if tol := 5 * math.Sqrt(2*wVar/draws); math.Abs(lMean-wMean) > tol {
				t.Errorf("hidden %v output %d: mean %g by SampleLocal, %g by weight samples; want within %g", hidden, a, lMean, wMean, tol)
			}
			if tol := 2 * 5 * wVar * math.Sqrt(4.0/draws); math.Abs(lVar-wVar) > tol {
				t.Errorf("hidden %v output %d: variance %g by SampleLocal, %g by weight samples; want within %g", hidden, a, lVar, wVar, tol)
			}
		}
	}
}

// With sig2 = 0 every local draw is the network at mu: Predict's output.
func TestSampleLocalAtZeroVarianceIsPredict(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	arch := NewArch(4, []int{7, 3}, 3)
	mu := make([]float64, arch.NumParams())
	arch.InitHe(mu, rng)
	x := []float64{0.5, -1, 0, 2}
	std := Standardization{Shift: -1, Scale: 0.5}
	p := NewPredictor(arch, 2)
	want := p.Predict(nil, mu, x, std)
	got := p.SampleLocal(nil, mu, make([]float64, len(mu)), x, 5, std, rng)
	for r := range 5 {
		for a := range 3 {
			if d := math.Abs(got[r*3+a] - want[a]); d > 1e-12 {
				t.Errorf("draw %d arm %d: %g, want Predict's %g", r, a, got[r*3+a], want[a])
			}
		}
	}
}

// BenchmarkSampleLocal times the draws behind one mean-field decision
// with the service's default propensity estimate (32 groups of 3) on the
// paper's mushroom network (117 one-hot inputs with 24 ones, [100, 100],
// 2 arms), and Predict at one context, on both engines.
func BenchmarkSampleLocal(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	arch := NewArch(117, []int{100, 100}, 2)
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
	const draws = 32 * 3
	for _, reference := range []bool{true, false} {
		name := "fast-" + kern.Current().String()
		if reference {
			name = "reference"
		}
		p := NewPredictor(arch, draws)
		p.Reference = reference
		dst := make([]float64, draws*2)
		b.Run("SampleLocal/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.SampleLocal(dst, mu, sig2, x, draws, Standardization{Scale: 1}, rng)
			}
		})
		b.Run("Predict/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p.Predict(dst[:2], mu, x, Standardization{Scale: 1})
			}
		})
	}
}

// SampleLocalMoments gives the output layer's conditional mean and
// variance per draw: the mixture of the Gaussians N(mean_r, vari_r) must
// have SampleLocal's mean and variance (law of total variance: E[vari] +
// Var[mean]), with SampleLocal's tolerances (5 standard errors). For a
// linear model the moments are exact: mean = shift + scale (mu_W x +
// mu_b), vari = scale^2 (s2_W x^2 + s2_b), to 1e-12.
func TestSampleLocalMomentsMatchSampleLocal(t *testing.T) {
	for _, arch := range []Arch{NewArch(5, []int{6, 4}, 2), NewArch(5, nil, 2), NewArch(5, []int{6}, 2).WithSkip()} {
		for _, reference := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(5, 6))
			hidden := fmt.Sprintf("%v skip %v", arch.Hidden(), arch.Skip())
			n := arch.NumParams()
			mu, sig2 := make([]float64, n), make([]float64, n)
			arch.InitHe(mu, rng)
			for i := range sig2 {
				s := 0.05 + 0.3*rng.Float64()
				sig2[i] = s * s
			}
			x := []float64{1, 0, -0.5, 2, 0}
			std := Standardization{Shift: 3, Scale: 2}
			p := NewPredictor(arch, 100)
			p.Reference = reference
			const draws = 40000
			local := p.SampleLocal(nil, mu, sig2, x, draws, std, rng)
			mean, vari := p.SampleLocalMoments(nil, nil, mu, sig2, x, draws, std, rng)
			for a := range 2 {
				var lSum, lSq, mSum, mSq, vSum float64
				for r := range draws {
					v := local[r*2+a]
					lSum += v
					lSq += v * v
					mSum += mean[r*2+a]
					mSq += mean[r*2+a] * mean[r*2+a]
					vSum += vari[r*2+a]
				}
				lMean, mMean := lSum/draws, mSum/draws
				lVar, mVar := lSq/draws-lMean*lMean, vSum/draws+mSq/draws-mMean*mMean
				if tol := 5 * math.Sqrt(2*lVar/draws); math.Abs(lMean-mMean) > tol {
					t.Errorf("hidden %v reference %v output %d: mean %g by SampleLocal, %g by the moments; want within %g", hidden, reference, a, lMean, mMean, tol)
				}
				if tol := 2 * 5 * lVar * math.Sqrt(4.0/draws); math.Abs(lVar-mVar) > tol {
					t.Errorf("hidden %v reference %v output %d: variance %g by SampleLocal, %g by the moments; want within %g", hidden, reference, a, lVar, mVar, tol)
				}
			}
			if arch.NumLayers() > 1 {
				continue
			}
			ly := arch.Layer(0)
			W, S := ly.Weights(mu), ly.Weights(sig2)
			for a := range 2 {
				m, v := ly.Bias(mu)[a], ly.Bias(sig2)[a]
				for i, xi := range x {
					m += W[a*5+i] * xi
					v += S[a*5+i] * xi * xi
				}
				m, v = std.Shift+std.Scale*m, std.Scale*std.Scale*v
				tol := 1e-12
				if !reference {
					tol = 1e-6 // float32
				}
				for r := range 3 {
					if math.Abs(mean[r*2+a]-m) > tol*math.Abs(m) || math.Abs(vari[r*2+a]-v) > tol*v {
						t.Errorf("linear, reference %v, draw %d output %d: moments %g, %g; want %g, %g", reference, r, a, mean[r*2+a], vari[r*2+a], m, v)
					}
				}
			}
		}
	}
}
