//go:build netlib

package nn

// With the build tag netlib, the program's blas64 products (nn's and every
// other gonum user's) run on the C BLAS that cgo links through
// gonum.org/v1/netlib, for example Debian's OpenBLAS:
//
//	apt-get install libopenblas-dev
//	CGO_LDFLAGS=-lopenblas OPENBLAS_NUM_THREADS=1 go test -tags netlib ./nn/
//
// OPENBLAS_NUM_THREADS=1 keeps each product on one core, as the native
// path does. bench/nn.md compares the two backends.

import (
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/netlib/blas/netlib"
)

func init() { blas64.Use(netlib.Implementation{}) }
