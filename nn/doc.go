// Package nn implements the Bayesian neural network of the bandit: a
// multilayer perceptron with ReLU hidden layers and one linear output per
// arm, its likelihood under bandit feedback (Gaussian or Bernoulli,
// Family), Monte Carlo
// estimators of the expected log-likelihood under a mean-field Gaussian
// posterior, and the Adam optimizer.
//
// # Model
//
// An Arch fixes the widths; its parameters are one flat []float64 whose
// layout (Arch.Layer: offsets of each weight and bias block) lets callers
// build per-layer priors and statistics. With no hidden layer the network
// is a linear model per arm. For the rows (x_i, a_i, y_i) of a dataset, the
// context, the arm played and the reward observed,
//
//	log p(y_i | x_i, w) = log N(y_i | Shift + Scale*f_{a_i}(x_i; w), s2),
//
// only the played arm's output entering (bandit feedback). The noise
// variance s2 is fixed or a hyperparameter (hyper[0] = log s2), shared
// by the arms or one per arm. With the Bernoulli family the output is a
// logit instead, log p(y_i | x_i, w) = y_i f - log(1 + exp(f)) with
// f = f_{a_i}(x_i; w), and there is no noise variance (Family).
//
// Data is an append-only dataset whose Views are immutable prefixes: a
// trainer appends rows while other goroutines evaluate on the views they
// hold. A Likelihood binds an Arch, a View and Options; it is immutable and
// implements the posterior package's Likelihood interface, and its
// Evaluators hold per-goroutine scratch space and allocate nothing.
//
// # Estimators
//
// For q(w) = N(mu, diag(sigma^2)), Evaluator.ExpectedLogLik estimates
// sum_i E_q[log p(y_i | x_i, w)] and its gradients in mu and sigma with one
// of four Estimators:
//
//   - LocalReparam (the default; Kingma, Salimans & Welling 2015) samples
//     each layer's pre-activations from their Gaussian marginal given the
//     layer input, with noise independent across rows;
//   - WeightReparam (Blundell et al. 2015; Khan 2018, "Stochastic
//     Gradients II") samples one w = mu + sigma∘eps per call;
//   - Deterministic evaluates at w = mu, the MAP or point objective;
//   - RIS (Long et al. 2024, Algorithm 1) passes on from each hidden layer
//     an importance-sampling estimate of its output's first moment given
//     the previous layer's, drawn from a proposal fitted to the optimal
//     one and reparameterized through q's noise (ris.go), and samples the
//     output layer as LocalReparam does.
//
// Both sampling estimators of the weights (LocalReparam, WeightReparam)
// are unbiased for the same expectation; the local one has lower variance
// because rows do not share a weight sample. RIS estimates the paper's
// moment-propagation objective instead, the expected log-likelihood of the
// network whose hidden layers output their first moments, with lower
// variance still (bench/ris.md measures the three on the bandit network).
// Gradients are computed by hand-written backward passes on preallocated
// buffers, on one of two engines:
//
//   - the fast engine (Likelihood.NewEvaluator32, Evaluator32), in float32
//     on the SIMD kernels of nn/kern, with parameters in the engine layout
//     (Arch.ToEngine: every weight block transposed, In×Out, so that each
//     product is a row-major kernel call) and the residuals and the
//     log-likelihood accumulated in float64. Training and refinement
//     (package posterior) use it by default;
//   - the reference (Likelihood.NewEvaluator, Evaluator), in float64 on
//     gonum's blas64, which the tests and benchmarks compare the fast
//     engine against.
//
// Given the same rng, both draw the same noise in the same order, so their
// results agree to float32 rounding (about 1e-7 of the largest gradient
// entry).
//
// # Reward standardization
//
// Bandit rewards such as +5 and -35 are far from the unit scale at which
// He-initialized networks, standard-normal priors and Adam's default step
// size work. Rather than asking callers to tune these, the model fits
// standardized rewards t = (y - Shift)/Scale: the network's output f is
// mapped to Shift + Scale*f before it meets a reward, so the likelihood, its
// noise variance and every prediction are in reward units, while the
// weights live at unit scale. FitStandardization picks Shift and Scale as
// the mean and standard deviation of the rewards seen so far.
//
// Standardization is part of the model, not of the data, so it may change
// as data arrive without invalidating a trained posterior: Restandardize
// rewrites the output layer's means and standard deviations by the exact
// affine reparameterization
//
//	W' = r W,  b' = r b + (Shift - Shift')/Scale',  r = Scale/Scale',
//
// under which every weight sample predicts the same rewards as before. The
// hidden layers, the noise variance (in reward units) and the likelihood
// values are unchanged; only the prior, which acts on the standardized
// output layer, changes meaning, so callers should restandardize rarely
// (for example while the data are few, or when the scale has drifted by a
// large factor).
//
// # Performance
//
// Data and View keep each row's non-zero entries (column and float32
// value) beside the dense context: one-hot contexts have 22 ones in 117
// columns, so the fast engine's first layer adds 22 rows of the weight
// block per context (and of the squared standard deviations, for the
// variances) instead of multiplying 95 zeros, and scatters the weight
// gradient back the same way; dense contexts go through the matrix
// product. The hidden layers' products are kernel calls on row-major
// float32 blocks, the elementwise steps of the local reparameterization
// trick are kernels, and posterior's trainer does all per-parameter work
// (softplus, the KL gradient, Adam) in one fused kernel pass. The kernels
// are chosen from the CPU's features at start-up (AVX-512, AVX2, or
// portable Go; REFINERY_KERN forces one). bench/nn.md compares the two
// engines.
//
// On the reference path the products go through blas64 on preallocated
// buffers. gonum's native
// Gemm skips zero entries of its first operand, so the forward pass
// multiplies A by a transposed copy of each weight matrix, A (W^T), which
// skips inactive ReLU units and the zeros of one-hot contexts; the first
// layer's weight gradient is taken as (x^T G)^T when the contexts are the
// sparser operand; the gradient with respect to the contexts is never
// formed. Products are issued in tiles small enough that gonum stays on its
// serial, allocation-free path. With the build tag netlib the products run
// on a C BLAS such as OpenBLAS instead (see netlib.go).
//
// # References
//
//   - Blundell, Cornebise, Kavukcuoglu & Wierstra (2015). Weight uncertainty
//     in neural networks. ICML.
//   - Havasi, Snoek, Tran, Gordon & Hernández-Lobato (2021). Sampling the
//     variational posterior with local refinement. Entropy 23, 1475;
//     Section 4.3 describes the bandit network.
//   - He, Zhang, Ren & Sun (2015). Delving deep into rectifiers. ICCV.
//   - Khan (2018). Approximate Bayesian inference (lecture notes),
//     Sections 3-4: mean-field VI and the reparameterization trick.
//   - Kingma & Ba (2015). Adam: a method for stochastic optimization. ICLR.
//   - Kingma, Salimans & Welling (2015). Variational dropout and the local
//     reparameterization trick. NeurIPS.
//   - Long, Tian, Zhang & Xu (2024). Reparameterized importance sampling
//     for robust variational Bayesian neural networks. ICML.
package nn
