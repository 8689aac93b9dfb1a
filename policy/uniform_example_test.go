package policy_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/policy"
)

func ExampleUniform() {
	u, _ := policy.NewUniform(3, 0, rand.New(rand.NewPCG(1, 2)))
	d, _ := u.Decide(context.Background(), nil, []bool{false, true, false})
	fmt.Println(d.Probabilities, d.Arm != 1)
	// Output: [0.5 0 0.5] true
}
