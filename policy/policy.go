// Package policy holds decision rules over reward models: refined and
// mean-field Thompson sampling on Bayesian neural networks,
// epsilon-greedy and greedy on point estimates, uniform, and linear
// Thompson sampling with an exact conjugate posterior. Every rule
// implements Policy, which both the offline simulator and the service's
// agents drive.
package policy

import "context"

// SampleKind says what a decision acted on.
type SampleKind string

const (
	SampleRefined   SampleKind = "refined"    // locally refined posterior sample(s)
	SampleMeanField SampleKind = "mean-field" // plain mean-field posterior sample(s)
	SamplePoint     SampleKind = "point"      // a point estimate (greedy, epsilon-greedy)
	SampleExact     SampleKind = "exact"      // a sample from an exact posterior (linear TS)
	SampleNone      SampleKind = "none"       // no model (uniform)
)

// Decision is a policy's choice for one context.
type Decision struct {
	// Arm is the index of the chosen arm.
	Arm int
	// Scores[i] is the reward the policy expects from arm i under the
	// sample(s) or estimate it acted on.
	Scores []float64
	// Probabilities[i] estimates the probability that the policy picks
	// arm i for this context (the propensity); nil when not estimated.
	Probabilities []float64
	// Sample is what the decision acted on.
	Sample SampleKind
}

// Policy chooses arms for encoded contexts and learns from rewards.
// Implementations own their random source (seeded at construction) and
// are not safe for concurrent use unless documented otherwise.
type Policy interface {
	// Name identifies the policy in results, e.g. "refined-ts".
	Name() string
	// Decide picks an arm for the encoded context x. excluded, if not
	// nil, has one entry per arm; excluded arms are never picked and get
	// probability 0. It is an error to exclude every arm.
	Decide(ctx context.Context, x []float64, excluded []bool) (Decision, error)
	// Observe records the reward of arm for context x; the policy
	// decides when to retrain.
	Observe(ctx context.Context, x []float64, arm int, reward float64) error
}
