package nn

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// Tile sizes for gemm. gonum's native Dgemm computes C in 64×64 blocks and
// hands them to goroutines (allocating a channel, a WaitGroup and closures)
// once C spans at least 4 blocks; a 64×128 tile spans 2, so every call below
// takes its serial path and allocates nothing. On a machine whose cores are
// shared, serial products are also the predictable choice.
const (
	tileRows = 64
	tileCols = 128
)

var (
	noTrans = blas.NoTrans
	trans   = blas.Trans
)

// gemm computes the row-major product
//
//	C = alpha op(A) op(B) + beta C,  op(A) m×k, op(B) k×n, C m×n,
//
// with the BLAS implementation registered in blas64, tiling C so that
// gonum's native implementation stays serial and allocation-free.
func gemm(tA, tB blas.Transpose, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	impl := blas64.Implementation()
	if m <= tileRows && n <= tileCols {
		impl.Dgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	for i := 0; i < m; i += tileRows {
		mi := min(tileRows, m-i)
		// Slice only the operand layout in use: the other offset can lie
		// past the end of a short operand.
		var as []float64
		if tA == blas.NoTrans {
			as = a[i*lda:]
		} else {
			as = a[i:]
		}
		for j := 0; j < n; j += tileCols {
			nj := min(tileCols, n-j)
			var bs []float64
			if tB == blas.NoTrans {
				bs = b[j:]
			} else {
				bs = b[j*ldb:]
			}
			impl.Dgemm(tA, tB, mi, nj, k, alpha, as, lda, bs, ldb, beta, c[i*ldc+j:], ldc)
		}
	}
}
