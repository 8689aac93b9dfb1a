package simulators

import (
	"context"
	"math/rand/v2"
	"testing"
)

// BenchmarkStep measures one simulation step (decide, observe, and the
// retraining the schedule puts on that step, amortized) of each policy
// under each preset on the mushroom bandit, after a warm-up of 100 steps
// (enough for full minibatches of 64).
// Steps per second = 1e9 / ns/op.
//
//	go test -run '^$' -bench BenchmarkStep -benchtime 20x -timeout 60m ./simulators/
func BenchmarkStep(b *testing.B) {
	env, err := ParseEnv("mushroom", sharedMushroom(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, preset := range []string{"fast", "paper"} {
		p := Presets()[preset]
		specs, _ := ParsePolicies("uniform,linear-ts,eps-greedy:0.05,mf-ts,refined-ts", p)
		for _, spec := range specs {
			b.Run(preset+"/"+spec.Name, func(b *testing.B) {
				envRNG := rand.New(rand.NewPCG(1, envStream))
				pol, err := NewPolicy(spec, env, p, rand.New(rand.NewPCG(1, 2)))
				if err != nil {
					b.Fatal(err)
				}
				step := func() {
					st := env.Next(envRNG)
					d, err := pol.Decide(ctx, st.X, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := pol.Observe(ctx, st.X, d.Arm, st.Realized[d.Arm]); err != nil {
						b.Fatal(err)
					}
				}
				for range 100 {
					step()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					step()
				}
			})
		}
	}
}
