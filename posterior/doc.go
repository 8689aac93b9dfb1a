// Package posterior holds the approximate posteriors of the bandit's
// network and the algorithms that fit and sample them:
//
//   - MeanField, the fully factorized Gaussian (softplus standard
//     deviations, a Gaussian prior per parameter, closed-form KL), and
//     Trainer, which maximizes its minibatch ELBO with Adam or
//     natural-gradient VI (Optimizer; Khan 2018, Section 5) under the
//     fixed prior or a collapsed bound that learns the prior (Bound;
//     Tomczak et al. 2021, Eqs. 9 and 10);
//   - Refiner, local refinement of a mean-field posterior into one
//     refined sample (Havasi et al. 2021, Algorithm 1, with the closed
//     forms of Appendix A);
//   - LaplaceDiag and LastLayer, Laplace's method at a MAP (the diagonal
//     generalized Gauss-Newton of the whole network, or the exact
//     Gaussian of the output layer), and Flow, a radial normalizing flow
//     fitted on the last layer's posterior (Kristiadi et al. 2022, Eqs. 3
//     and 4).
//
// The likelihood is an interface (Likelihood, Evaluator) that package nn
// implements; posterior knows nothing of bandits, arms or storage.
// Package bandit runs a Trainer per bandit (the trainer goroutine) and
// Refiners on its refinement workers; docs/architecture.md says where.
package posterior
