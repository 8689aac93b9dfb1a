package bandit

import (
	"reflect"
	"slices"

	"github.com/refinery-bandits/refinery/posterior"
)

// DefaultConfig returns the configuration of a bandit of policy kind k
// ("" is DefaultPolicyKind) with every setting at its default: the one
// place the defaults are put together (as Prometheus tsdb's
// DefaultOptions). SetDefaults fills a configuration's zero settings
// from it; CLI help and docs print from it. Name, arms and features have
// no default. Each call returns new slices and pointers.
//
// The defaults that depend on the kind: the mean-field Thompson
// samplers (Capabilities.MeanField) act on one sample, have one hidden
// layer of 100 and, under a Gaussian likelihood, a noise variance per
// arm linear in the context (model.noise "context"); the kinds that fit a point estimate
// (Capabilities.MAP) keep the model they had before issue 28 (a fixed
// prior, a Gaussian likelihood, no noise prior: docs/model.md); the
// kind's own options (epsilon, laplace, flow) are its decider's
// (decider.setDefaults).
func DefaultConfig(k PolicyKind) Config {
	if k == "" {
		k = DefaultPolicyKind
	}
	c := Config{
		Policy: PolicyConfig{
			Kind:              k,
			Samples:           DefaultSamples,
			MaxSampleUses:     DefaultMaxSampleUses,
			MaxSampleAge:      ptrTo(Duration(DefaultMaxSampleAge)),
			MaxVersionsBehind: ptrTo(int(DefaultMaxVersionsBehind)),
			PropensitySamples: DefaultPropensitySamples,
		},
		Model: ModelConfig{
			Hidden:        slices.Clone(DefaultHidden),
			Skip:          new(bool),
			PriorVariance: DefaultPriorVariance,
			InitSigma:     DefaultInitSigma,
			Prior:         PriorFanIn,
			Stochastic:    StochasticOutput,
			Likelihood:    LikelihoodAuto,
			Noise:         NoiseShared,
			NoisePrior:    &NoisePrior{Shape: DefaultNoiseShape, Rate: DefaultNoiseRate},
		},
		Training: TrainingConfig{
			Iterations:          DefaultTrainIterations,
			IterationsPerReward: DefaultIterationsPerRew,
			StopTolerance:       ptrTo(float64(DefaultStopTolerance)),
			CPUShare:            DefaultCPUShare,
			BatchSize:           posterior.DefaultBatchSize,
			LR:                  posterior.DefaultLR,
			SigmaLR:             DefaultSigmaLR,
			SnapshotEvery:       DefaultSnapshotEvery,
			MinInterval:         ptrTo(Duration(DefaultMinInterval)),
			Estimator:           DefaultEstimator,
			RISSamples:          DefaultRISSamples,
			Bound:               DefaultBound,
			CollapsedReg:        DefaultCollapsedReg,
			CollapsedShape:      DefaultCollapsedShape,
			Optimizer:           DefaultOptimizer,
			NGVIStep:            DefaultNGVIStep,
		},
		Refinement: RefinementConfig{
			Fractions:  slices.Clone(DefaultFractions),
			Iterations: DefaultRefineIterations,
			LR:         posterior.DefaultLR,
			BatchSize:  posterior.DefaultBatchSize,
			BankSize:   DefaultBankSize,
		},
		Reward: RewardConfig{Wait: ptrTo(Duration(DefaultRewardWait))},
	}
	caps := KindCapabilities(k)
	if caps.MeanField {
		c.Policy.Samples = DefaultThompsonSamples
		c.Model.Hidden = slices.Clone(DefaultThompsonHidden)
		c.Model.HiddenPriorVariance = DefaultThompsonHiddenPriorVariance
		c.Model.Noise = NoiseContext
	}
	if caps.MAP {
		c.Model.Prior = PriorFixed
		c.Model.Likelihood = LikelihoodGaussian
		c.Model.NoisePrior = &NoisePrior{}
	}
	if d := deciderOf(k); d != nil {
		d.setDefaults(&c.Policy)
	}
	return c
}

// fillZero sets each zero field of the struct dst to def's, descending
// into struct fields (not into pointers: a setting given as an object,
// such as model.noise_prior, is the caller's whole). A nil slice is zero,
// an empty one is not (model.hidden [] is a network without hidden
// layers).
func fillZero(dst, def reflect.Value) {
	for i := range dst.NumField() {
		f, d := dst.Field(i), def.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			fillZero(f, d)
		case f.IsZero():
			f.Set(d)
		}
	}
}

// ptrTo returns a pointer to a new variable holding v.
func ptrTo[T any](v T) *T { return &v }
