package bandit

import (
	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// Typed settings: the named values of a configuration (spec.Bound,
// spec.Optimizer, spec.Estimator, spec.Likelihood) parse and print
// themselves in package spec; here they become the trainer's.

// Bound is training.bound (spec.Bound).
type Bound = spec.Bound

// The bounds of training.bound.
const (
	BoundELBO             = spec.BoundELBO
	BoundCollapsedMean    = spec.BoundCollapsedMean
	BoundCollapsedMeanVar = spec.BoundCollapsedMeanVar
)

// Optimizer is training.optimizer (spec.Optimizer).
type Optimizer = spec.Optimizer

// The optimizers of training.optimizer.
const (
	OptimizerAdam = spec.OptimizerAdam
	OptimizerNGVI = spec.OptimizerNGVI
)

// Estimator is training.estimator (spec.Estimator).
type Estimator = spec.Estimator

// The estimators of training.estimator, named as nn names them.
const (
	EstimatorLocalReparam  = spec.EstimatorLocalReparam
	EstimatorWeightReparam = spec.EstimatorWeightReparam
	EstimatorRIS           = spec.EstimatorRIS
)

// Likelihood is model.likelihood (spec.Likelihood).
type Likelihood = spec.Likelihood

// The reward models of model.likelihood.
const (
	LikelihoodAuto      = spec.LikelihoodAuto
	LikelihoodGaussian  = spec.LikelihoodGaussian
	LikelihoodBernoulli = spec.LikelihoodBernoulli
)

// What the trainer is given for each named setting: spec parses the
// names (spec.ParseBound, ...), these tables map them onto posterior's
// and nn's values of the same names (TestSettingsMapOntoTheTrainer).
var (
	trainerBounds = map[Bound]posterior.Bound{
		BoundELBO:             posterior.BoundELBO,
		BoundCollapsedMean:    posterior.BoundCollapsedMean,
		BoundCollapsedMeanVar: posterior.BoundCollapsedMeanVar,
	}
	trainerOptimizers = map[Optimizer]posterior.Optimizer{
		OptimizerAdam: posterior.OptimizerAdam,
		OptimizerNGVI: posterior.OptimizerNGVI,
	}
	// trainerEstimators are not nn.Deterministic, which is the point
	// estimate's.
	trainerEstimators = map[Estimator]nn.Estimator{
		EstimatorLocalReparam:  nn.LocalReparam,
		EstimatorWeightReparam: nn.WeightReparam,
		EstimatorRIS:           nn.RIS,
	}
)
