package posterior

import (
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/nn"
)

// Likelihood is the data term of a model: log p(y_i | x_i, w) for the
// rows i of a dataset, as a function of a flat parameter vector w.
//
// A Likelihood holds read-only data and may be shared by any number of
// goroutines; all scratch space lives in the Evaluators it makes, one per
// goroutine. nn.Likelihood implements it for Bayesian MLPs; tests and the
// toy examples implement it for closed-form models.
type Likelihood interface {
	// NumParams is the length of w.
	NumParams() int
	// NumHyper is the number of point-estimated likelihood
	// hyperparameters (for example the log noise variance of a Gaussian
	// likelihood whose variance is learned); it may be zero.
	NumHyper() int
	// NumRows is the number of rows in the dataset.
	NumRows() int
	// NewEvaluator returns scratch space for batches of at most maxBatch
	// rows. It is the only method that allocates.
	NewEvaluator(maxBatch int) Evaluator
}

// Evaluator computes the data term and its gradients for one goroutine.
// Its methods allocate nothing. It is an alias of an interface literal,
// so that models in packages below posterior (nn.Likelihood) can return
// the identical type without importing this package.
type Evaluator = interface {
	// ExpectedLogLik returns a one-sample unbiased estimate of
	//
	//	sum_{i in rows} E_{w ~ N(mu, diag(sigma^2))} [log p(y_i | x_i, w, hyper)]
	//
	// and writes (overwrites) its gradients with respect to mu, sigma and
	// hyper into dMu, dSigma and dHyper. The estimator (weight
	// reparameterization, local reparameterization, deterministic) is
	// the evaluator's. rng supplies all randomness.
	ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper []float64, rows []int, rng *rand.Rand) float64
	// LogLik returns sum_{i in rows} log p(y_i | x_i, w, hyper) for a
	// fixed w; rows == nil means every row. If dW is not nil it writes
	// the gradient with respect to w into it; if dHyper is not nil, the
	// gradient with respect to hyper.
	LogLik(dW, dHyper, w, hyper []float64, rows []int) float64
}

// HyperPrior is implemented by likelihoods whose hyperparameters have a
// prior (nn.Likelihood with a noise prior, nn.InvGamma). The trainer then
// maximizes the data term plus log p(hyper) (a MAP estimate of the
// hyperparameters inside the variational objective, as the empirical
// Bayes of Blundell et al. 2015 but with a proper prior), and Penalty
// subtracts it.
type HyperPrior interface {
	// LogHyperPrior returns log p(hyper) and, when dHyper is not nil,
	// writes its gradient into it.
	LogHyperPrior(dHyper, hyper []float64) float64
}

var _ HyperPrior = (*nn.Likelihood)(nil)

// nn.Likelihood is the model Refinery trains; check at compile time that
// it is one.
var _ Likelihood = (*nn.Likelihood)(nil)
