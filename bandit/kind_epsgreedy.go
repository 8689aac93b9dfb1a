package bandit

import (
	"context"
	mrand "math/rand/v2"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/policy"
)

const (
	// EpsGreedy plays the arm a point-estimate network prefers with
	// probability 1-epsilon and a uniformly random allowed arm otherwise.
	EpsGreedy = spec.EpsGreedy
	// Greedy is EpsGreedy with epsilon 0.
	Greedy = spec.Greedy
)

// epsGreedy is the decider of EpsGreedy, and of Greedy when greedy is
// set: the network is trained to its MAP (a point estimate) and the
// decision is policy.EpsGreedyRule on its predictions, with exact
// probabilities.
type epsGreedy struct {
	noFit
	greedy bool
}

func (e epsGreedy) kind() PolicyKind {
	if e.greedy {
		return Greedy
	}
	return EpsGreedy
}

func (e epsGreedy) caps(PolicyConfig) Capabilities {
	return Capabilities{Model: true, Network: true, MAP: true, PointEstimate: true, Explores: !e.greedy, Cost: 2}
}

func (epsGreedy) sampleKinds() []SampleKind { return []SampleKind{SamplePoint} }

func (epsGreedy) options() []string { return []string{"epsilon"} }

// setDefaults sets policy.epsilon: DefaultEpsilon for eps-greedy, 0 for
// greedy.
func (e epsGreedy) setDefaults(p *PolicyConfig) {
	if p.Epsilon != nil {
		return
	}
	eps := DefaultEpsilon
	if e.greedy {
		eps = 0
	}
	p.Epsilon = &eps
}

func (e epsGreedy) validate(p PolicyConfig, v *validator) {
	switch {
	case e.greedy && p.Epsilon != nil && *p.Epsilon != 0:
		v.add("policy.epsilon", "greedy has epsilon 0; use eps-greedy")
	case p.Epsilon != nil && !(*p.Epsilon >= 0 && *p.Epsilon <= 1):
		v.add("policy.epsilon", "want a number in [0, 1]")
	}
}

func (epsGreedy) choose(_ context.Context, a *Agent, pd *policy.Decision, _ *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	pd.Scores = a.pointScores(m, x)
	policy.EpsGreedyRule(pd, *a.current.Load().Policy.Epsilon, excluded, rng)
	return &Propensity{Estimator: "exact"}, nil
}

// rank orders the allowed arms by the point estimate's predictions, or
// with probability epsilon at random (exactRanking).
func (epsGreedy) rank(_ context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	r := exactRanking(a.pointScores(m, x), *a.current.Load().Policy.Epsilon, excluded, k, rng)
	r.sample = SamplePoint
	return r, nil
}

// pointScores returns the point estimate's prediction of every arm at x.
func (a *Agent) pointScores(m *model, x []float64) []float64 {
	p := a.predictor()
	defer a.predictors.Put(p)
	return p.PredictWeights(make([]float64, len(a.cfg.Arms)), m.weights(a.arch), a.scoreInput(x), m.std)
}
