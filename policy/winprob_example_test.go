package policy_test

import (
	"fmt"

	"github.com/refinery-bandits/refinery/policy"
)

// The probability that each of three arms has the largest draw, for
// independent Student-t scores: what linear Thompson sampling logs as a
// decision's propensities. The third arm is excluded. (A 4,000,000-draw
// Monte Carlo gives 0.1815 ± 0.0002 for the first.)
func ExampleStudentWinProbs() {
	p := make([]float64, 3)
	policy.StudentWinProbs(p,
		[]float64{0.2, 0.5, 3}, // locations
		[]float64{0.3, 0.1, 1}, // scales
		[]float64{12, 40, 12},  // degrees of freedom
		[]bool{false, false, true})
	fmt.Printf("%.4f\n", p)
	// Output:
	// [0.1813 0.8187 0.0000]
}
