package bandit

import (
	"context"
	mrand "math/rand/v2"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/policy"
)

// Uniform picks an allowed arm uniformly at random; no model.
const Uniform = spec.Uniform

// uniform is the decider of Uniform: no model, no trainer, exact
// probabilities.
type uniform struct{ noFit }

func (uniform) kind() PolicyKind { return Uniform }

func (uniform) caps(PolicyConfig) Capabilities { return Capabilities{Cost: 4} }

func (uniform) sampleKinds() []SampleKind { return []SampleKind{SampleNone} }

func (uniform) choose(_ context.Context, a *Agent, pd *policy.Decision, _ *Decision, _ *model, _ []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	policy.UniformRule(pd, len(a.cfg.Arms), excluded, rng)
	return &Propensity{Estimator: "exact"}, nil
}

// rank is a uniformly random order of the allowed arms (exactRanking
// with epsilon 1).
func (uniform) rank(_ context.Context, a *Agent, _ *model, _ []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	r := exactRanking(make([]float64, len(a.cfg.Arms)), 1, excluded, k, rng)
	r.sample = SampleNone
	return r, nil
}
