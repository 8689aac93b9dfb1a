package nn

import (
	"math"
	"testing"

	"gonum.org/v1/gonum/blas"
)

// TestGemmTilesShortOperands: a product whose C spans several tiles but
// whose inner dimension is short (a batch of 10 rows) must not slice an
// operand at an offset of the other layout.
func TestGemmTilesShortOperands(t *testing.T) {
	const m, n, k = 100, 150, 10
	rng := seeded(1)
	for _, tA := range []blas.Transpose{noTrans, trans} {
		for _, tB := range []blas.Transpose{noTrans, trans} {
			a := make([]float64, m*k)
			b := make([]float64, k*n)
			for i := range a {
				a[i] = rng.NormFloat64()
			}
			for i := range b {
				b[i] = rng.NormFloat64()
			}
			at := func(i, p int) float64 {
				if tA == noTrans {
					return a[i*k+p]
				}
				return a[p*m+i]
			}
			bt := func(p, j int) float64 {
				if tB == noTrans {
					return b[p*n+j]
				}
				return b[j*k+p]
			}
			lda, ldb := k, n
			if tA != noTrans {
				lda = m
			}
			if tB != noTrans {
				ldb = k
			}
			c := make([]float64, m*n)
			gemm(tA, tB, m, n, k, 1, a, lda, b, ldb, 0, c, n)
			for i := range m {
				for j := range n {
					var want float64
					for p := range k {
						want += at(i, p) * bt(p, j)
					}
					if math.Abs(c[i*n+j]-want) > 1e-12 {
						t.Fatalf("tA=%c tB=%c: C[%d,%d] = %g, want %g", tA, tB, i, j, c[i*n+j], want)
					}
				}
			}
		}
	}
}
