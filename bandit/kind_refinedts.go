package bandit

import (
	"context"
	mrand "math/rand/v2"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/policy"
)

// RefinedTS is Thompson sampling on locally refined posterior samples
// (Havasi et al. 2021, Algorithm 1) taken from the agent's bank.
const RefinedTS = spec.RefinedTS

// refinedTS is the decider of RefinedTS: the trainer fits the network's
// mean-field posterior as for mf-ts, the refinement workers fill the
// agent's bank with refined samples of it, and decisions vote on those
// (on mean-field draws while the bank has none).
type refinedTS struct{ noFit }

func (refinedTS) kind() PolicyKind { return RefinedTS }

func (refinedTS) caps(PolicyConfig) Capabilities {
	return Capabilities{Model: true, Network: true, Posterior: true, MeanField: true, WeightSpread: true, SampleBank: true, Cost: 0}
}

func (refinedTS) sampleKinds() []SampleKind { return []SampleKind{SampleRefined, SampleMeanField} }

// construct makes the bank of refined samples.
func (refinedTS) construct(a *Agent, _ uint64) error {
	a.bank = newBank(a.cfg.Refinement.BankSize, boundsOf(a.cfg.Policy), a.clock)
	a.bank.onSpace = func() {
		a.obs.Bank(a.name, a.bank.status().Depth)
		a.pool.kick()
	}
	return nil
}

// boundsOf returns the bank's bounds of the policy settings p.
func boundsOf(p PolicyConfig) bankBounds {
	return bankBounds{
		maxUses:   p.MaxSampleUses,
		maxAge:    time.Duration(*p.MaxSampleAge),
		maxBehind: int64(*p.MaxVersionsBehind),
	}
}

// choose is Thompson sampling on refined samples from the bank
// (policy.ThompsonVote) when the bank has them, and on mean-field draws
// otherwise (meanFieldThompson), with the propensity estimates of
// Decide.
func (refinedTS) choose(ctx context.Context, a *Agent, pd *policy.Decision, d *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	if m.lik == nil {
		return a.meanFieldThompson(pd, m, x, excluded, rng), nil
	}
	pool, prop, version, ok, err := a.refinedPool(ctx, m, x, rng)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return a.meanFieldThompson(pd, m, x, excluded, rng), nil
	}
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	prop.Groups, prop.Exact = policy.ThompsonVote(pd, policy.Votes{Pool: pool, Arms: len(a.cfg.Arms), S: S, M: M, Resample: true}, excluded, rng)
	pd.Sample = SampleRefined
	d.ModelVersion = version
	return prop, nil
}

// rank ranks by the average prediction of the request's S refined
// samples, with the slots' probabilities counted over the groups of
// ThompsonVote (every S-subset of the pool when at most
// policy.MaxExactSubsets: exact given the pool); on mean-field draws
// while the bank has none (meanFieldRanking).
func (refinedTS) rank(ctx context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	if m.lik == nil {
		return a.meanFieldRanking(m, x, excluded, k, rng), nil
	}
	pool, prop, version, ok, err := a.refinedPool(ctx, m, x, rng)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return a.meanFieldRanking(m, x, excluded, k, rng), nil
	}
	arms, S, M := len(a.cfg.Arms), a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	own, _ := policy.GroupMeans(policy.Votes{Pool: pool[:S*arms], Arms: arms, S: S, M: 1}, nil)
	groups, exact := policy.GroupMeans(policy.Votes{Pool: pool, Arms: arms, S: S, M: M, Resample: true}, rng)
	prop.Exact = exact
	r := voteRanking(own, groups, arms, excluded, k, *prop)
	r.sample, r.version = SampleRefined, version
	return r, nil
}

// refinedPool takes the decision's S refined samples from the bank
// (refining them first in step mode) and returns the predictions at x
// of the pool they were drawn from, theirs first (rows of arms, in
// reward units), the propensity's description of the samples, and the
// oldest posterior version the decision's samples were refined from;
// ok false when the bank has none.
func (a *Agent) refinedPool(ctx context.Context, m *model, x []float64, rng *mrand.Rand) (pool []float64, prop *Propensity, version int64, ok bool, err error) {
	arms := len(a.cfg.Arms)
	S := a.cfg.Policy.Samples
	if a.step != nil {
		if err := a.refineNow(ctx, m, S); err != nil {
			return nil, nil, 0, false, err
		}
	}
	t, ok := a.bank.take(S, rng)
	if !ok {
		return nil, nil, 0, false, nil
	}
	a.obs.Bank(a.name, a.bank.status().Depth)
	p := a.predictor()
	defer a.predictors.Put(p)
	pool = make([]float64, len(t.pool)*arms)
	version = t.got[0].version
	X := a.scoreInput(x)
	for i, r := range t.pool {
		p.PredictWeights(pool[i*arms:(i+1)*arms], r.w, X, r.std)
		if i < S {
			version = min(version, r.version)
		}
	}
	a.obs.Sampled(a.name, t.uses, t.age, t.behind, t.beyond)
	return pool, &Propensity{
		Estimator: "refined-pool", Samples: len(t.pool),
		SampleUses: t.uses, SampleAgeSeconds: t.age.Seconds(), VersionsBehind: t.behind, BeyondBounds: t.beyond,
	}, version, true, nil
}
