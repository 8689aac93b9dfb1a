package kern_test

import (
	"fmt"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// Sgemm with a transposed operand: C = Xᵀ·G for X (3×2) and G (3×2),
// the weight gradient of a layer with 2 inputs and 2 outputs over a
// batch of 3, given X by strides (rsA = 1, csA = 2) instead of a copy.
func ExampleSgemm() {
	x := []float32{1, 2, 3, 4, 5, 6} // 3×2, row-major
	g := []float32{1, 0, 0, 1, 1, 1} // 3×2
	c := make([]float32, 4)          // 2×2
	kern.Sgemm(2, 2, 3, x, 1, 2, g, 2, c, 2)
	fmt.Println(c)
	// Output: [6 8 8 10]
}

// An RNG names one sequence per seed, at every kernel level.
func ExampleRNG() {
	r := kern.NewRNG(1)
	z := make([]float32, 4)
	r.Normals(z)
	fmt.Printf("%.4f\n", z)
	// Output: [0.1759 -0.5981 -1.3183 0.4413]
}
