// Package policy holds the decision rules of Refinery, once: uniform
// (UniformRule), greedy and epsilon-greedy on a point estimate
// (EpsGreedyRule), Thompson sampling on the averaged predictions of
// posterior samples with its propensity estimate (ThompsonGauss for
// mean-field draws, whose output noise it integrates out: mf-ts, diagonal
// laplace-ts, and refined-ts before its first refined samples;
// ThompsonVote for refined samples and for last-layer draws: refined-ts,
// last-layer laplace-ts, flow-ts), and linear Thompson sampling with an
// exact conjugate posterior (Linear).
//
// Where a decision is made: bandit.Agent.Decide, for the service's HTTP
// API and for `refinery simulate` alike (the simulator drives the same
// agent in step mode, bandit.StepConfig). The agent computes predictions
// with nn.Predictor (Predict at a weight vector, SampleLocal for
// mean-field draws), takes refined samples from its bank (posterior.Refiner
// fills it) and hands them to the rules here. The rules own no model and
// no random source: the caller passes its *rand.Rand.
package policy

import (
	"context"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// SampleKind says what a decision acted on (spec.SampleKind).
type SampleKind = spec.SampleKind

// The kinds of sample.
const (
	SampleRefined   = spec.SampleRefined
	SampleMeanField = spec.SampleMeanField
	SamplePoint     = spec.SamplePoint
	SampleExact     = spec.SampleExact
	SampleLaplace   = spec.SampleLaplace
	SampleFlow      = spec.SampleFlow
	SampleNone      = spec.SampleNone
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
