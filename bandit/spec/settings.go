package spec

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Typed settings: the named values of a configuration parse and print
// themselves, as log/slog.Level does. UnmarshalText (the CLI's
// flag.TextVar, a policy spec) refuses a name it does not know; JSON
// takes any string (UnmarshalJSON), so that bandit.Validate reports an
// unknown name with the body's other errors, naming its field.

// Bound is training.bound, the trainer's objective (posterior.Bound by
// its name; TrainingConfig.Bound has the choices).
type Bound string

// The bounds of training.bound.
const (
	BoundELBO             Bound = "elbo"
	BoundCollapsedMean    Bound = "collapsed-mean"
	BoundCollapsedMeanVar Bound = "collapsed-mean-var"
)

// Bounds lists the values of training.bound.
var Bounds = []Bound{BoundELBO, BoundCollapsedMean, BoundCollapsedMeanVar}

// ParseBound returns the bound of that name.
func ParseBound(s string) (Bound, error) { return parseName(s, Bounds) }

func (b Bound) String() string                   { return string(b) }
func (b Bound) MarshalText() ([]byte, error)     { return []byte(b), nil }
func (b *Bound) UnmarshalText(t []byte) error    { return unmarshalText(t, b, Bounds) }
func (b *Bound) UnmarshalJSON(data []byte) error { return unmarshalJSONName(data, b) }

// Optimizer is training.optimizer, how the trainer steps the posterior
// (posterior.Optimizer by its name; TrainingConfig.Optimizer has the
// choices).
type Optimizer string

// The optimizers of training.optimizer.
const (
	OptimizerAdam Optimizer = "adam"
	OptimizerNGVI Optimizer = "ngvi"
)

// Optimizers lists the values of training.optimizer.
var Optimizers = []Optimizer{OptimizerAdam, OptimizerNGVI}

// ParseOptimizer returns the optimizer of that name.
func ParseOptimizer(s string) (Optimizer, error) { return parseName(s, Optimizers) }

func (o Optimizer) String() string                   { return string(o) }
func (o Optimizer) MarshalText() ([]byte, error)     { return []byte(o), nil }
func (o *Optimizer) UnmarshalText(t []byte) error    { return unmarshalText(t, o, Optimizers) }
func (o *Optimizer) UnmarshalJSON(data []byte) error { return unmarshalJSONName(data, o) }

// Estimator is training.estimator, how the trainer estimates the
// expected log-likelihood and its gradient (nn.Estimator by its name;
// TrainingConfig.Estimator has the choices).
type Estimator string

// The estimators of training.estimator, named as nn names them.
const (
	EstimatorLocalReparam  Estimator = "local-reparam"
	EstimatorWeightReparam Estimator = "weight-reparam"
	EstimatorRIS           Estimator = "ris"
)

// Estimators lists the values of training.estimator.
var Estimators = []Estimator{EstimatorLocalReparam, EstimatorWeightReparam, EstimatorRIS}

// ParseEstimator returns the estimator of that name.
func ParseEstimator(s string) (Estimator, error) { return parseName(s, Estimators) }

func (e Estimator) String() string                   { return string(e) }
func (e Estimator) MarshalText() ([]byte, error)     { return []byte(e), nil }
func (e *Estimator) UnmarshalText(t []byte) error    { return unmarshalText(t, e, Estimators) }
func (e *Estimator) UnmarshalJSON(data []byte) error { return unmarshalJSONName(data, e) }

// Likelihood is model.likelihood, the reward model of the network
// (ModelConfig.Likelihood has the choices).
type Likelihood string

// The reward models of model.likelihood.
const (
	LikelihoodAuto      Likelihood = "auto"
	LikelihoodGaussian  Likelihood = "gaussian"
	LikelihoodBernoulli Likelihood = "bernoulli"
)

// Likelihoods lists the values of model.likelihood.
var Likelihoods = []Likelihood{LikelihoodAuto, LikelihoodGaussian, LikelihoodBernoulli}

// ParseLikelihood returns the likelihood of that name.
func ParseLikelihood(s string) (Likelihood, error) { return parseName(s, Likelihoods) }

func (l Likelihood) String() string                   { return string(l) }
func (l Likelihood) MarshalText() ([]byte, error)     { return []byte(l), nil }
func (l *Likelihood) UnmarshalText(t []byte) error    { return unmarshalText(t, l, Likelihoods) }
func (l *Likelihood) UnmarshalJSON(data []byte) error { return unmarshalJSONName(data, l) }

// parseName returns s as a T when it is one of names, and otherwise an
// error listing them ("want one of ...": the caller names the value).
func parseName[T ~string](s string, names []T) (T, error) {
	if slices.Contains(names, T(s)) {
		return T(s), nil
	}
	return "", fmt.Errorf("want one of %s", quoteNames(names))
}

// quoteNames returns names quoted and joined by ", ".
func quoteNames[T ~string](names []T) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(string(n))
	}
	return strings.Join(q, ", ")
}

// unmarshalText sets *dst to the name in t, one of names; the error
// does not repeat t (flag and the other callers name it).
func unmarshalText[T ~string](t []byte, dst *T, names []T) error {
	v, err := parseName(string(t), names)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// unmarshalJSONName sets *dst to the JSON string in data, unchecked
// (bandit.Validate checks it). A value that is not a string is the same
// *json.UnmarshalTypeError a plain string field gives.
func unmarshalJSONName[T ~string](data []byte, dst *T) error {
	if string(data) == "null" {
		return nil // as for a string: unchanged
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*dst = T(s)
	return nil
}
