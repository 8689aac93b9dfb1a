package bandit

import (
	"fmt"

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

// Bounds lists the values of training.bound.
var Bounds = spec.Bounds

// ParseBound returns the bound of that name.
func ParseBound(s string) (Bound, error) { return spec.ParseBound(s) }

// Optimizer is training.optimizer (spec.Optimizer).
type Optimizer = spec.Optimizer

// The optimizers of training.optimizer.
const (
	OptimizerAdam = spec.OptimizerAdam
	OptimizerNGVI = spec.OptimizerNGVI
)

// Optimizers lists the values of training.optimizer.
var Optimizers = spec.Optimizers

// ParseOptimizer returns the optimizer of that name.
func ParseOptimizer(s string) (Optimizer, error) { return spec.ParseOptimizer(s) }

// Estimator is training.estimator (spec.Estimator).
type Estimator = spec.Estimator

// The estimators of training.estimator, named as nn names them.
const (
	EstimatorLocalReparam  = spec.EstimatorLocalReparam
	EstimatorWeightReparam = spec.EstimatorWeightReparam
	EstimatorRIS           = spec.EstimatorRIS
)

// Estimators lists the values of training.estimator.
var Estimators = spec.Estimators

// ParseEstimator returns the estimator of that name.
func ParseEstimator(s string) (Estimator, error) { return spec.ParseEstimator(s) }

// Likelihood is model.likelihood (spec.Likelihood).
type Likelihood = spec.Likelihood

// The reward models of model.likelihood.
const (
	LikelihoodAuto      = spec.LikelihoodAuto
	LikelihoodGaussian  = spec.LikelihoodGaussian
	LikelihoodBernoulli = spec.LikelihoodBernoulli
)

// Likelihoods lists the values of model.likelihood.
var Likelihoods = spec.Likelihoods

// ParseLikelihood returns the likelihood of that name.
func ParseLikelihood(s string) (Likelihood, error) { return spec.ParseLikelihood(s) }

// posteriorBound returns the trainer's bound.
func posteriorBound(b Bound) (posterior.Bound, error) { return posterior.ParseBound(string(b)) }

// posteriorOptimizer returns the trainer's optimizer.
func posteriorOptimizer(o Optimizer) (posterior.Optimizer, error) {
	return posterior.ParseOptimizer(string(o))
}

// trainingEstimators are the estimators training.estimator may name:
// not nn.Deterministic, which is the point estimate's.
var trainingEstimators = []nn.Estimator{nn.LocalReparam, nn.WeightReparam, nn.RIS}

// nnEstimator returns the trainer's nn.Estimator.
func nnEstimator(e Estimator) (nn.Estimator, error) {
	for _, n := range trainingEstimators {
		if n.Name() == string(e) {
			return n, nil
		}
	}
	if _, err := ParseEstimator(string(e)); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("bandit: estimator %q is not one of nn's", e)
}
