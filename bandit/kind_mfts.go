package bandit

import (
	"context"
	"math"
	mrand "math/rand/v2"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/policy"
)

// MeanFieldTS is Thompson sampling on plain mean-field samples.
const MeanFieldTS = spec.MeanFieldTS

// meanFieldTS is the decider of MeanFieldTS: the trainer fits the
// network's mean-field posterior, decisions draw from it
// (meanFieldThompson).
type meanFieldTS struct{ noFit }

func (meanFieldTS) kind() PolicyKind { return MeanFieldTS }

func (meanFieldTS) caps(PolicyConfig) Capabilities {
	return Capabilities{Model: true, Network: true, Posterior: true, MeanField: true, WeightSpread: true, Cost: 1}
}

func (meanFieldTS) sampleKinds() []SampleKind { return []SampleKind{SampleMeanField} }

func (meanFieldTS) choose(_ context.Context, a *Agent, pd *policy.Decision, _ *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	return a.meanFieldThompson(pd, m, x, excluded, rng), nil
}

// meanFieldThompson is Thompson sampling on draws from independent
// Gaussians over every weight, m.mu and m.sig2 (policy.ThompsonGauss),
// with the propensity estimates of Decide: mf-ts and refined-ts on the
// mean-field posterior, laplace-ts "diagonal" on the Laplace one.
func (a *Agent) meanFieldThompson(pd *policy.Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) *Propensity {
	if a.pairs != nil {
		return a.armThompson(pd, m, x, excluded, rng)
	}
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	p := a.predictor()
	defer a.predictors.Put(p)
	// Draw g*S+k is sample k of group g; the output layer's noise is
	// integrated out (policy.ThompsonGauss).
	mean, vari := p.SampleLocalMoments(nil, nil, m.mu, m.sig2, x, M*S, m.std, rng)
	policy.ThompsonGauss(pd, policy.Gaussian{Mean: mean, Var: vari, Arms: arms, S: S, M: M}, excluded, rng)
	prop := &Propensity{Estimator: "mean-field", Samples: M * S, Groups: M}
	if allowed := arms - countTrue(excluded); allowed > 2 {
		prop.OutputDraws = policy.OutputDraws
	}
	pd.Sample = SampleMeanField
	return prop
}

func (meanFieldTS) rank(_ context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	return a.meanFieldRanking(m, x, excluded, k, rng), nil
}

// meanFieldRanking is Rank on meanFieldThompson's draws: M groups of S
// draws from independent Gaussians over every weight, m.mu and m.sig2,
// each group's average prediction drawn with the output layer's noise
// given its hidden layers, as policy.ThompsonGauss draws the decision's;
// group 0 ranks, and the M groups count the slots' probabilities
// (voteRanking).
func (a *Agent) meanFieldRanking(m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) *ranking {
	if a.pairs != nil {
		return a.armRanking(m, x, excluded, k, rng)
	}
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	p := a.predictor()
	mean, vari := p.SampleLocalMoments(nil, nil, m.mu, m.sig2, x, M*S, m.std, rng)
	a.predictors.Put(p)
	mu, _ := policy.GroupMeans(policy.Votes{Pool: mean, Arms: arms, S: S, M: M}, nil)
	v, _ := policy.GroupMeans(policy.Votes{Pool: vari, Arms: arms, S: S, M: M}, nil)
	for i := range mu {
		mu[i] += math.Sqrt(v[i]/float64(S)) * rng.NormFloat64() // Var of the mean: (1/S²) Σ var
	}
	r := voteRanking(mu[:arms], mu, arms, excluded, k, Propensity{Estimator: "mean-field", Samples: M * S})
	r.sample = SampleMeanField
	return r
}
