package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"
)

// StudentWinProbs against brute force: the argmax frequencies of
// 4,000,000 draws of the independent t's (seeded), for arms of equal and
// of very different scales, heavy and light tails, with an arm excluded.
// The tolerance is 5 binomial standard errors of the frequency (at most
// 5 x 0.00025 = 0.00125) plus 1e-5 for the quadrature: a failure is a
// bug, not bad luck.
func TestStudentWinProbsAgainstMonteCarlo(t *testing.T) {
	for _, tc := range []struct {
		name           string
		loc, scale, nu []float64
		excluded       []bool
	}{
		{"four arms of similar scale", []float64{0.1, 0.3, -0.2, 0.25}, []float64{0.3, 0.2, 0.5, 0.1}, []float64{12, 20, 13, 500}, nil},
		{"a narrow arm inside a wide one", []float64{0, 0.05, -1, 2}, []float64{1, 0.001, 0.3, 0.5}, []float64{12, 40, 12, 2000}, nil},
		{"heavy tails", []float64{0, 1, 0.5}, []float64{1, 2, 0.1}, []float64{2, 3, 12}, nil},
		{"an arm far behind", []float64{0, 5, 0}, []float64{1, 1, 0.7}, []float64{12, 12, 14}, nil},
		{"an excluded arm", []float64{0, 5, 0.3}, []float64{1, 1, 0.7}, []float64{12, 12, 14}, []bool{false, true, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(tc.loc)
			got := make([]float64, n)
			StudentWinProbs(got, tc.loc, tc.scale, tc.nu, tc.excluded)
			rng := rand.New(rand.NewPCG(1, 2))
			ts := make([]distuv.StudentsT, n)
			for k := range n {
				ts[k] = distuv.StudentsT{Mu: tc.loc[k], Sigma: tc.scale[k], Nu: tc.nu[k], Src: rng}
			}
			const draws = 4_000_000
			freq := make([]float64, n)
			x := make([]float64, n)
			for range draws {
				for k := range n {
					x[k] = ts[k].Rand()
				}
				freq[Argmax(x, tc.excluded, rng)] += 1.0 / draws
			}
			var sum float64
			for k := range n {
				sum += got[k]
				se := math.Sqrt(freq[k] * (1 - freq[k]) / draws)
				if tol := 5*se + 1e-5; math.Abs(got[k]-freq[k]) > tol {
					t.Errorf("P(arm %d) = %.6f, Monte Carlo %.6f ± %.6f: off by more than %.2g", k, got[k], freq[k], se, tol)
				}
				if tc.excluded != nil && tc.excluded[k] && got[k] != 0 {
					t.Errorf("excluded arm %d has probability %g", k, got[k])
				}
			}
			if math.Abs(sum-1) > 1e-12 {
				t.Errorf("probabilities sum to %.15g", sum)
			}
		})
	}
}

// Identical arms are equally likely to win, exactly: 1/K each to 1e-9,
// and two arms mirrored about a point split it evenly.
func TestStudentWinProbsSymmetry(t *testing.T) {
	for K := 2; K <= 6; K++ {
		loc, scale, nu := make([]float64, K), make([]float64, K), make([]float64, K)
		for k := range K {
			loc[k], scale[k], nu[k] = 0.3, 0.7, 15
		}
		got := make([]float64, K)
		StudentWinProbs(got, loc, scale, nu, nil)
		for k, p := range got {
			if math.Abs(p-1/float64(K)) > 1e-9 {
				t.Errorf("%d identical arms: P(arm %d) = %.12f, want %.12f", K, k, p, 1/float64(K))
			}
		}
	}
}

// The closed form of two Gaussians, P(X_0 > X_1) = Φ((m_0 − m_1)/√(s_0² + s_1²)),
// is the limit of many degrees of freedom: at ν = 1e7 the t is within
// 1e-7 of the normal, and StudentWinProbs within 2e-6 of the closed form.
func TestStudentWinProbsGaussianLimit(t *testing.T) {
	for _, tc := range []struct{ m0, m1, s0, s1 float64 }{{0, 1, 1, 2}, {0.5, 0, 0.1, 3}, {0, 0.001, 1, 0.001}, {2, 0, 0.5, 0.5}} {
		got := make([]float64, 2)
		StudentWinProbs(got, []float64{tc.m0, tc.m1}, []float64{tc.s0, tc.s1}, []float64{1e7, 1e7}, nil)
		want := distuv.UnitNormal.CDF((tc.m0 - tc.m1) / math.Hypot(tc.s0, tc.s1))
		if math.Abs(got[0]-want) > 2e-6 {
			t.Errorf("%+v: P(arm 0) = %.9f, want Φ = %.9f", tc, got[0], want)
		}
	}
}

func BenchmarkStudentWinProbs(b *testing.B) {
	for _, K := range []int{2, 4, 10} {
		b.Run(fmt.Sprintf("arms=%d", K), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			loc, scale, nu, dst := make([]float64, K), make([]float64, K), make([]float64, K), make([]float64, K)
			for k := range K {
				loc[k], scale[k], nu[k] = rng.NormFloat64(), 0.1+rng.Float64(), 12+float64(rng.IntN(1000))
			}
			b.ReportAllocs()
			for b.Loop() {
				StudentWinProbs(dst, loc, scale, nu, nil)
			}
		})
	}
}
