package bandit

import (
	"context"
	mrand "math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/policy"
)

// LinearTS is Thompson sampling with an exact Normal-inverse-gamma
// linear model per arm (policy.Linear).
const LinearTS = spec.LinearTS

// linearTS is the decider of LinearTS: no network; the trainer reads the
// rewards into Agent.lin (readRows), which decides exactly.
type linearTS struct{ noFit }

func (linearTS) kind() PolicyKind { return LinearTS }

func (linearTS) caps(PolicyConfig) Capabilities {
	return Capabilities{Model: true, Posterior: true, LinearHead: true, PosteriorInRows: true, Cost: 3}
}

func (linearTS) sampleKinds() []SampleKind { return []SampleKind{SampleExact} }

func (linearTS) construct(a *Agent, seed uint64) error {
	in, out := netShape(&a.cfg)
	lin, err := policy.NewLinear(policy.LinearConfig{Arms: out, Features: in, ProbabilitySamples: a.cfg.Policy.PropensitySamples}, mrand.New(mrand.NewPCG(seed, 1<<62)))
	if err != nil {
		return err
	}
	a.lin = lin
	return nil
}

func (linearTS) choose(ctx context.Context, a *Agent, pd *policy.Decision, _ *Decision, _ *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	if a.pairs != nil {
		return a.linearArmThompson(pd, a.lin, a.pairs.rows(x), excluded, rng)
	}
	return a.linearThompson(ctx, pd, a.lin, x, excluded)
}

func (linearTS) rank(ctx context.Context, a *Agent, _ *model, x []float64, excluded []bool, k int, _ *mrand.Rand) (*ranking, error) {
	if a.pairs != nil {
		return a.linearArmRanking(a.lin, a.pairs.rows(x), excluded, k)
	}
	return a.linearRanking(ctx, a.lin, x, excluded, k)
}

// linearRanking ranks by one draw of lin's scores on the features phi
// (policy.Linear.Decide, under a.linMu): the first slot's probabilities
// are Decide's exact ones; the lower slots' are counted over that draw
// and policy.propensity_samples - 1 more (policy.Linear.DrawScores,
// voteRanking).
func (a *Agent) linearRanking(ctx context.Context, lin *policy.Linear, phi []float64, excluded []bool, k int) (*ranking, error) {
	arms, M := len(a.cfg.Arms), a.cfg.Policy.PropensitySamples
	a.linMu.Lock()
	d, err := lin.Decide(ctx, phi, excluded)
	var more []float64
	if err == nil && M > 1 {
		more, err = lin.DrawScores(nil, phi, M-1)
	}
	a.linMu.Unlock()
	if err != nil {
		return nil, err
	}
	r := voteRanking(d.Scores, append(slices.Clone(d.Scores), more...), arms, excluded, k, Propensity{Estimator: "linear-posterior", Samples: M})
	r.probs[0], r.props[0] = d.Probabilities, &Propensity{Estimator: "linear-posterior", Exact: true}
	r.sample = SampleExact
	return r, nil
}

// linearThompson decides with lin (policy.Linear, under a.linMu: it is
// not safe for concurrent use) on the features phi, with exact
// probabilities: linear-ts on the inputs, neural-linear on the MAP's
// last hidden features.
func (a *Agent) linearThompson(ctx context.Context, pd *policy.Decision, lin *policy.Linear, phi []float64, excluded []bool) (*Propensity, error) {
	a.linMu.Lock()
	d, err := lin.Decide(ctx, phi, excluded)
	a.linMu.Unlock()
	if err != nil {
		return nil, err
	}
	*pd = d
	return &Propensity{Estimator: "linear-posterior", Exact: true}, nil
}
