package policy_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/policy"
)

// Linear Thompson sampling learns that arm 1 pays x and arm 0 pays −x.
func ExampleLinear() {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	pol, err := policy.NewLinear(policy.LinearConfig{Arms: 2, Features: 1}, rng)
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := range 200 {
		x := []float64{float64(i%2)*2 - 1} // -1, 1, -1, ...
		d, _ := pol.Decide(ctx, x, nil)
		reward := x[0]
		if d.Arm == 0 {
			reward = -x[0]
		}
		pol.Observe(ctx, x, d.Arm, reward)
	}
	d, _ := pol.Decide(ctx, []float64{1}, nil)
	fmt.Println(d.Arm, d.Sample, d.Probabilities[1] > 0.95)
	// Output: 1 exact true
}
