package kern

import (
	"math"
	"math/rand/v2"
	"testing"
)

// eachLevel runs f once per kernel level this CPU supports.
func eachLevel(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	runLevels(t, Portable, f)
}

// runLevels runs f as a subtest or sub-benchmark of tb at each available
// level from the level from on, switching the kernels to it.
func runLevels[T interface{ Run(string, func(T)) bool }](tb T, from Level, f func(T)) {
	for _, l := range []Level{Portable, AVX2, AVX512} {
		if l < from || !Available(l) {
			continue
		}
		tb.Run(l.String(), func(tb T) {
			prev := Use(l)
			defer Use(prev)
			f(tb)
		})
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestSgemmAgainstFloat64 checks C += A·B, in both the row-major and the
// transposed layout of A, against a float64 triple loop. Tolerance: each
// entry is a float32 sum of k products of unit normals, whose rounding
// error is at most about k*eps32*sum|a_p b_p|; 8*k*eps32 of that bound
// leaves room for any summation order.
func TestSgemmAgainstFloat64(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 7}, {4, 16, 9}, {64, 100, 100}, {64, 100, 117}, {17, 2, 100}, {5, 33, 1}, {64, 7, 13}} {
			m, n, k := sz[0], sz[1], sz[2]
			for _, transA := range []bool{false, true} {
				ldb, ldc := n+3, n+1
				a := randSlice(rng, m*k+5)
				b := randSlice(rng, k*ldb)
				c := randSlice(rng, m*ldc)
				rsA, csA := k, 1
				if transA {
					rsA, csA = 1, m
				}
				want := make([]float64, len(c))
				bound := make([]float64, len(c))
				for i := range m {
					for j := range n {
						s := float64(c[i*ldc+j])
						var ab float64
						for p := range k {
							x := float64(a[i*rsA+p*csA]) * float64(b[p*ldb+j])
							s += x
							ab += math.Abs(x)
						}
						want[i*ldc+j] = s
						bound[i*ldc+j] = 8*float64(k+1)*(1.0/(1<<23))*(ab+math.Abs(float64(c[i*ldc+j]))) + 1e-30
					}
				}
				Sgemm(m, n, k, a, rsA, csA, b, ldb, c, ldc)
				for i := range m {
					for j := range n {
						got, w := float64(c[i*ldc+j]), want[i*ldc+j]
						if math.Abs(got-w) > bound[i*ldc+j] {
							t.Fatalf("m,n,k=%d,%d,%d transA=%v: C[%d,%d] = %g, want %g ± %g", m, n, k, transA, i, j, got, w, bound[i*ldc+j])
						}
					}
				}
			}
		}
	})
}

func TestSoftplusAgainstFloat64(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		rho := []float32{-90, -20, -5, -1, -1e-3, 0, 1e-3, 1, 5, 20, 90}
		sg, sm := make([]float32, len(rho)), make([]float32, len(rho))
		Softplus(sg, sm, rho)
		for i, r := range rho {
			x := float64(r)
			wantS := math.Log1p(math.Exp(x))
			if x > 30 {
				wantS = x
			}
			wantM := 1 / (1 + math.Exp(-x))
			if math.Abs(float64(sg[i])-wantS) > 4e-7*wantS+3e-45 || math.Abs(float64(sm[i])-wantM) > 4e-7*wantM+3e-45 {
				t.Errorf("Softplus(%g) = %g, %g; want %g, %g", r, sg[i], sm[i], wantS, wantM)
			}
		}
	})
}
