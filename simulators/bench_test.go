package simulators

import (
	"context"
	"testing"
)

// BenchmarkStep measures simulation steps (decide, reward, and the
// retraining and refinement the schedule puts on them, amortized) of
// each policy under each preset on the mushroom bandit: one op is a run
// of 200 steps from a fresh agent, so it includes the cheap early steps
// on little data. Steps per second = 200e9 / ns/op.
//
//	go test -run '^$' -bench BenchmarkStep -benchtime 2x -timeout 60m ./simulators/
func BenchmarkStep(b *testing.B) {
	env, err := ParseEnv("mushroom", sharedMushroom(b))
	if err != nil {
		b.Fatal(err)
	}
	for _, preset := range []string{"fast", "paper"} {
		p := Presets()[preset]
		specs, _ := ParsePolicies("uniform,linear-ts,eps-greedy:0.05,mf-ts,refined-ts", p)
		for _, spec := range specs {
			b.Run(preset+"/"+spec.Name, func(b *testing.B) {
				cfg := RunConfig{Env: env, Policies: []PolicySpec{spec}, Steps: 200, Seeds: 1, Preset: p, Workers: 1}
				b.ReportAllocs()
				for b.Loop() {
					res, err := Run(context.Background(), cfg)
					if err != nil || res[0].Err != nil {
						b.Fatal(err, res[0].Err)
					}
				}
			})
		}
	}
}
