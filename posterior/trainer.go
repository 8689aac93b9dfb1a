package posterior

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/nn"
)

// Defaults of the paper's bandit experiment (Havasi et al. 2021, Section
// 4.3): batches of 64 rewards, Adam with learning rate 1e-3.
const (
	DefaultBatchSize = 64
	DefaultLR        = 1e-3
)

// TrainConfig configures a Trainer.
type TrainConfig struct {
	// BatchSize is the minibatch size B; zero means DefaultBatchSize.
	// When the dataset has at most B rows every iteration uses all of
	// them and the data term is exact rather than subsampled.
	BatchSize int
	// LR is Adam's learning rate; zero means DefaultLR.
	LR float64
	// FinalLR, when positive, makes the learning rate of Run decay
	// geometrically from LR at the first iteration to FinalLR at the
	// last; zero means a constant rate.
	FinalLR float64
	// FreezeHyper keeps the likelihood hyperparameters fixed (the
	// refiner optimizes only the variational parameters, Eq. 4).
	FreezeHyper bool
	// Point trains the means alone as a point estimate: the MAP of the
	// likelihood under the prior, log p(y | x, mu) + log p(mu) (Khan
	// 2018, Section 1), for greedy baselines. The evaluator is given
	// sigma = 0, rho is left as it is and no per-parameter softplus is
	// computed. Use it with a deterministic estimator.
	Point bool
	// Reference runs the trainer on the float64 reference path (the
	// likelihood's Evaluator, nn.Adam over [mu | rho | hyper]) instead
	// of the float32 fast engine (nn.Evaluator32 and the fused
	// per-parameter pass of nn/kern), which is the default. Likelihoods
	// without a fast evaluator run on the fast trainer through an
	// adapter of their float64 one.
	Reference bool
	// Bound is the objective: the ELBO with q's fixed prior (the
	// default) or a collapsed bound that learns the prior's parameters
	// (Tomczak et al. 2021, Eqs. 9 and 10). Run reports the bound it optimizes.
	Bound Bound
	// CollapsedReg is alpha_reg of Eq. 9 and delta of Eq. 10, in (0, 1];
	// zero means DefaultCollapsedReg. 1 makes Eq. 9 the ELBO with the
	// prior N(0, PriorVar).
	CollapsedReg float64
	// CollapsedShape is the shape of Eq. 10's Gamma hyperprior, > 0;
	// zero means DefaultCollapsedShape.
	CollapsedShape float64
	// Optimizer steps q: Adam on (mu, rho) (OptimizerAdam, the zero
	// value) or natural-gradient VI (OptimizerNGVI), which ignores LR
	// for q and steps it by NGVIStep instead. The likelihood
	// hyperparameters take Adam steps at LR under both.
	Optimizer Optimizer
	// NGVIStep is OptimizerNGVI's step size beta in (0, 1]; zero means
	// DefaultNGVIStep. With FinalLR set it decays in proportion to the
	// learning rate.
	NGVIStep float64
	// SigmaLR, when greater than LR, is Adam's learning rate for the
	// softplus parameters rho of the standard deviations, the means
	// keeping LR (both decay together under FinalLR); zero means LR.
	// Adam moves a parameter by about its learning rate per iteration
	// whatever the gradient's size, so at LR 1e-3 a standard deviation
	// changes by a factor of at most about e^0.001 per iteration and
	// takes thousands of iterations to go from its initial value to
	// where the data put it: the posterior's width then follows the
	// iteration count, not the data. A larger rate for rho lets the
	// widths settle within a retraining. Only OptimizerAdam.
	SigmaLR float64
	// HeldSigma lists parameters (indices into q's parameters) whose
	// standard deviations the trainer leaves where q has them, training
	// their means alone. Started small, such a parameter is a point
	// estimate inside a partly stochastic network (Sharma et al. 2023):
	// the KL's gradient in its mean is the negated log prior's, so its
	// mean follows the MAP objective's gradient (Trainer.step) while the
	// other parameters' standard deviations are fitted as usual; the KL
	// itself then carries a constant, -log sigma, per held parameter.
	HeldSigma []int
	// Held lists parameters the trainer leaves alone, means and standard
	// deviations both (the refiner's, for the parameters its
	// RefineConfig.Held keeps at q0's means).
	Held []int
}

func (c TrainConfig) withDefaults() TrainConfig {
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.LR = cmp.Or(c.LR, DefaultLR)
	c.CollapsedReg = cmp.Or(c.CollapsedReg, DefaultCollapsedReg)
	c.CollapsedShape = cmp.Or(c.CollapsedShape, DefaultCollapsedShape)
	c.NGVIStep = cmp.Or(c.NGVIStep, DefaultNGVIStep)
	return c
}

func (c TrainConfig) validate() error {
	switch {
	case c.BatchSize < 1:
		return fmt.Errorf("posterior: batch size %d, want >= 1", c.BatchSize)
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("posterior: learning rate %g, want > 0", c.LR)
	case c.FinalLR < 0 || math.IsInf(c.FinalLR, 0) || math.IsNaN(c.FinalLR):
		return fmt.Errorf("posterior: final learning rate %g, want >= 0", c.FinalLR)
	case c.Bound < BoundELBO || c.Bound > BoundCollapsedMeanVar:
		return fmt.Errorf("posterior: unknown bound %d", int(c.Bound))
	case c.Bound != BoundELBO && c.Point:
		return fmt.Errorf("posterior: bound %s with a point estimate, want the ELBO's MAP objective", c.Bound)
	case !(c.CollapsedReg > 0 && c.CollapsedReg <= 1):
		return fmt.Errorf("posterior: collapsed regularization %g, want in (0, 1]", c.CollapsedReg)
	case !(c.CollapsedShape > 0) || math.IsInf(c.CollapsedShape, 0):
		return fmt.Errorf("posterior: collapsed hyperprior shape %g, want > 0", c.CollapsedShape)
	case c.Optimizer < OptimizerAdam || c.Optimizer > OptimizerNGVI:
		return fmt.Errorf("posterior: unknown optimizer %d", int(c.Optimizer))
	case c.Optimizer != OptimizerAdam && c.Point:
		return fmt.Errorf("posterior: optimizer %s with a point estimate, want adam", c.Optimizer)
	case !(c.NGVIStep > 0 && c.NGVIStep <= 1):
		return fmt.Errorf("posterior: natural-gradient step %g, want in (0, 1]", c.NGVIStep)
	case c.SigmaLR < 0 || math.IsInf(c.SigmaLR, 0) || math.IsNaN(c.SigmaLR):
		return fmt.Errorf("posterior: sigma learning rate %g, want >= 0", c.SigmaLR)
	case c.Point && len(c.HeldSigma)+len(c.Held) > 0:
		return fmt.Errorf("posterior: held parameters with a point estimate, which has no standard deviations")
	}
	return nil
}

// Trainer maximizes the ELBO of a MeanField posterior with Adam (or
// natural-gradient VI, TrainConfig.Optimizer) on minibatches (Blundell et
// al. 2015; Khan 2018, Sections 4 and 5):
//
//	L(q) = (N/B) sum_{i in batch} E_q[log p(y_i | x_i, w)] - KL[q || p]
//
// with the data term scaled by N/B so that it is an unbiased estimate of
// the full-data ELBO (Havasi et al. 2021, Eq. 1). The data-term estimator
// is the Likelihood's. A Trainer owns its scratch space and optimizer
// state and must not be used by two goroutines at once; any number of
// Trainers may share one Likelihood. After construction its iterations
// allocate nothing.
//
// By default the iterations run on the float32 fast engine: a Run loads
// q into float32 at its start and stores it back at its end (a Step does
// both around its one iteration), so q reads as float32-rounded values
// afterwards. TrainConfig.Reference keeps the float64 path.
type Trainer struct {
	cfg  TrainConfig
	lik  Likelihood
	eval Evaluator
	lr   float64    // Adam's current learning rate
	adam *nn.Adam   // reference path only
	fast *fastState // fast engine only
	col  collapsed  // the collapsed bound's constants (Bound != BoundELBO)

	hp     HyperPrior     // the likelihood's, if it has one
	hpd    []float64      // gradient of log p(hyper)
	grad   []float64      // gradient of -ELBO w.r.t. [mu | rho | hyper]
	sigma  []float64      // softplus(rho)
	sgm    []float64      // sigmoid(rho), the softplus' derivative
	rhoOld []float64      // rho before an Adam step (SigmaLR; nil without)
	hold   holds[float64] // HeldSigma and Held, canonical indices (reference path)
	rows   []int
}

// NewTrainer returns a Trainer for posteriors over lik's parameters.
func NewTrainer(lik Likelihood, cfg TrainConfig) (*Trainer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n, nh := lik.NumParams(), lik.NumHyper()
	t := &Trainer{
		cfg:   cfg,
		lik:   lik,
		eval:  lik.NewEvaluator(cfg.BatchSize),
		lr:    cfg.LR,
		grad:  make([]float64, 2*n+nh),
		sigma: make([]float64, n),
		sgm:   make([]float64, n),
		rows:  make([]int, cfg.BatchSize),
		col:   newCollapsed(cfg.Bound, cfg.CollapsedReg, cfg.CollapsedShape),
		hpd:   make([]float64, nh),
	}
	t.hp, _ = lik.(HyperPrior)
	if t.sigmaScale() > 1 {
		t.rhoOld = make([]float64, n)
	}
	if err := checkIndices(cfg.HeldSigma, n); err != nil {
		return nil, fmt.Errorf("posterior: HeldSigma: %w", err)
	}
	if err := checkIndices(cfg.Held, n); err != nil {
		return nil, fmt.Errorf("posterior: Held: %w", err)
	}
	if cfg.Reference {
		t.adam = nn.NewAdam(2*n+nh, cfg.LR)
		t.hold = newHolds[float64](cfg.HeldSigma, cfg.Held, 1)
	} else {
		t.fast = newFastState(lik, cfg.BatchSize)
		t.fast.natural = cfg.Optimizer == OptimizerNGVI
		if cfg.Bound != BoundELBO {
			t.fast.s2 = make([]float32, n) // in the engine's layout
		}
		if t.sigmaScale() > 1 {
			t.fast.rhoOld = make([]float32, n)
		}
		t.fast.hold = newHolds[float32](engineIndices(t.fast.eval, cfg.HeldSigma, n), engineIndices(t.fast.eval, cfg.Held, n), 3)
	}
	return t, nil
}

// Config returns the trainer's configuration with defaults filled in.
func (t *Trainer) Config() TrainConfig { return t.cfg }

// SetLikelihood points the trainer at a new likelihood over the same
// parameters, typically a longer view of a growing dataset. It keeps the
// optimizer state and allocates a new evaluator.
func (t *Trainer) SetLikelihood(lik Likelihood) {
	if lik.NumParams() != t.lik.NumParams() || lik.NumHyper() != t.lik.NumHyper() {
		panic("posterior: SetLikelihood with a different parameter count")
	}
	t.lik = lik
	t.hp, _ = lik.(HyperPrior)
	t.eval = lik.NewEvaluator(t.cfg.BatchSize)
	if t.fast != nil {
		t.fast.eval = newEvaluator32(lik, t.cfg.BatchSize)
	}
}

// Likelihood returns the likelihood the trainer currently uses.
func (t *Trainer) Likelihood() Likelihood { return t.lik }

// Reset clears the optimizer's moments and step count, as the refiner
// does before each conditional optimization (Havasi et al. 2021,
// Section 3: "the momentum is reset after sampling").
func (t *Trainer) Reset() {
	if t.fast != nil {
		t.fast.reset()
		return
	}
	t.adam.Reset()
}

// SetLR sets Adam's learning rate for the following Steps.
func (t *Trainer) SetLR(lr float64) { t.lr = lr }

// ngviStep is OptimizerNGVI's current step size: NGVIStep scaled as the
// learning rate is (by Run's decay or SetLR), at most 1.
func (t *Trainer) ngviStep() float64 {
	return min(t.cfg.NGVIStep*t.lr/t.cfg.LR, 1)
}

// batch fills t.rows with a minibatch and returns it with the factor N/B
// that makes its data term an unbiased estimate of the full-data one.
// Rows are drawn uniformly with replacement; a dataset of at most B rows
// is used whole.
func (t *Trainer) batch(rng *rand.Rand) ([]int, float64) {
	n := t.lik.NumRows()
	if n <= len(t.rows) {
		rows := t.rows[:n]
		for i := range rows {
			rows[i] = i
		}
		return rows, 1
	}
	for i := range t.rows {
		t.rows[i] = rng.IntN(n)
	}
	return t.rows, float64(n) / float64(len(t.rows))
}

// Step runs one Adam iteration on q, ascending the minibatch ELBO
// estimate, and returns the estimate's data term (N/B) sum_batch log p
// before the update. The ELBO estimate is that minus q.KL() (Penalty under
// a collapsed bound), which costs two logarithms per parameter and is
// left to callers that want it.
func (t *Trainer) Step(q *MeanField, rng *rand.Rand) float64 {
	t.begin(q)
	ll, scale := t.iterate(q, rng)
	t.end(q)
	return scale * ll
}

// begin prepares iterations on q: it checks q's size and, on the fast
// engine, loads q into the engine. iterate runs one iteration and end
// stores the engine's parameters back into q; between begin and end, q's
// Mu and Rho are stale on the fast engine.
func (t *Trainer) begin(q *MeanField) {
	if len(q.Mu) != t.lik.NumParams() || len(q.Hyper) != t.lik.NumHyper() {
		panic("posterior: posterior size does not match the likelihood")
	}
	if t.fast != nil {
		t.fast.load(q, t.cfg.Point)
	}
}

func (t *Trainer) iterate(q *MeanField, rng *rand.Rand) (ll, scale float64) {
	if t.fast != nil {
		return t.stepFast(q, rng)
	}
	return t.step(q, rng)
}

func (t *Trainer) end(q *MeanField) {
	if t.fast != nil {
		t.fast.store(q, t.cfg.Point)
	}
}

// step is Step without the KL value, which costs two logarithms per
// parameter and is not needed for the update. It returns the data term's
// minibatch sum and its scale N/B.
//
// The gradient of the ELBO with respect to (mu, rho) is, per parameter,
//
//	dL/dmu  = (N/B) dE/dmu - (mu - m)/s^2
//	dL/drho = [(N/B) dE/dsigma + 1/sigma - sigma/s^2] sigmoid(rho)
//
// (the KL gradient of MeanField.KL, the softplus' derivative
// sigmoid(rho)); both passes over the parameters use one exp and one
// log1p per parameter. Under a collapsed bound m and 1/s^2 are the learned
// prior's mean and precision given q (collapsed.prior), which makes the
// same expressions the gradient of Eq. 9 or Eq. 10.
func (t *Trainer) step(q *MeanField, rng *rand.Rand) (ll, scale float64) {
	n := len(q.Mu)
	if n != t.lik.NumParams() || len(q.Hyper) != t.lik.NumHyper() {
		panic("posterior: posterior size does not match the likelihood")
	}
	dMu, dRho, dHyper := t.grad[:n], t.grad[n:2*n], t.grad[2*n:]
	t.hold.save(q.Mu, q.Rho)
	defer t.hold.restore(q.Mu, q.Rho)
	sig, sgm := t.sigma, t.sgm
	if !t.cfg.Point { // a point estimate keeps sigma = 0
		for j, r := range q.Rho {
			e := math.Exp(-math.Abs(r))
			if r > 0 {
				sig[j] = r + log1pSmall(e)
				sgm[j] = 1 / (1 + e)
			} else {
				sig[j] = log1pSmall(e)
				sgm[j] = e / (1 + e)
			}
		}
	}
	if t.lik.NumRows() > 0 {
		var rows []int
		rows, scale = t.batch(rng)
		// The evaluator writes dE/dsigma into dRho.
		ll = t.eval.ExpectedLogLik(dMu, dRho, dHyper, q.Mu, sig, q.Hyper, rows, rng)
	} else {
		clear(t.grad)
	}
	pm, pv := q.PriorMean, q.PriorVar
	if t.cfg.Point {
		// -(log p(y|x,mu) + log p(mu)): the KL's mean gradient is the
		// negated log prior's.
		for j, mu := range q.Mu {
			d := mu
			if pm != nil {
				d -= pm[j]
			}
			dMu[j] = d/pv[j] - scale*dMu[j]
		}
		clear(dRho)
	} else if t.cfg.Optimizer == OptimizerNGVI {
		// Natural-gradient steps on (mu, sigma) in place (ngviUpdate);
		// Adam below then takes zero steps on them (its moments stay
		// zero) and steps the hyperparameters alone.
		beta := t.ngviStep()
		col := t.cfg.Bound != BoundELBO
		for j, mu := range q.Mu {
			m, prec := 0.0, 1/pv[j]
			if col {
				m, prec = t.col.prior(mu, sig[j], pv[j])
			} else if pm != nil {
				m = pm[j]
			}
			var s float64
			q.Mu[j], s = ngviUpdate(mu, sig[j], scale*dMu[j], scale*dRho[j], m, prec, beta)
			q.Rho[j] = SoftplusInv(s)
		}
		clear(dMu)
		clear(dRho)
	} else {
		// Adam descends: store the negated ELBO gradient.
		col := t.cfg.Bound != BoundELBO
		for j, mu := range q.Mu {
			s, inv := sig[j], 1/pv[j]
			d := mu
			if col {
				var m float64
				m, inv = t.col.prior(mu, s, pv[j])
				d -= m
			} else if pm != nil {
				d -= pm[j]
			}
			dMu[j] = d*inv - scale*dMu[j]
			dRho[j] = (s*inv - 1/s - scale*dRho[j]) * sgm[j]
		}
	}
	t.hyperGrad(dHyper, q.Hyper, scale)
	t.adam.LR = t.lr
	c := t.sigmaScale()
	if c > 1 {
		copy(t.rhoOld, q.Rho)
	}
	t.adam.Step(q.params, t.grad)
	if c > 1 {
		for j, r := range t.rhoOld {
			q.Rho[j] = r + c*(q.Rho[j]-r)
		}
	}
	return ll, scale
}

// holds keeps the parameters of TrainConfig.HeldSigma (their width
// vectors) and TrainConfig.Held (their means and width vectors) across an
// optimizer step: save before it, restore after. The width vectors are
// rho on the reference path, and rho, softplus(rho) and its derivative
// on the fast engine, whose NGVI steps sigma itself. The indices are in
// the layout of the vectors passed.
type holds[F float32 | float64] struct {
	// width lists the indices whose width vectors are held (sigma's,
	// then all's), all those whose means are held too.
	width, all []int
	// widths[k] holds width vector k at width's indices; means holds
	// the means at all's.
	widths [][]F
	means  []F
}

func newHolds[F float32 | float64](sigma, all []int, nWidths int) holds[F] {
	width := append(slices.Clone(sigma), all...)
	h := holds[F]{width: width, all: all, means: make([]F, len(all)), widths: make([][]F, nWidths)}
	for k := range h.widths {
		h.widths[k] = make([]F, len(width))
	}
	return h
}

func (h *holds[F]) save(mu []F, widths ...[]F) {
	for k, w := range widths {
		for i, j := range h.width {
			h.widths[k][i] = w[j]
		}
	}
	for i, j := range h.all {
		h.means[i] = mu[j]
	}
}

func (h *holds[F]) restore(mu []F, widths ...[]F) {
	for k, w := range widths {
		for i, j := range h.width {
			w[j] = h.widths[k][i]
		}
	}
	for i, j := range h.all {
		mu[j] = h.means[i]
	}
}

// checkIndices reports an index outside [0, n) or a repeated one.
func checkIndices(idx []int, n int) error {
	seen := make(map[int]bool, len(idx))
	for _, j := range idx {
		if j < 0 || j >= n {
			return fmt.Errorf("parameter index %d, want 0..%d", j, n-1)
		}
		if seen[j] {
			return fmt.Errorf("parameter index %d repeated", j)
		}
		seen[j] = true
	}
	return nil
}

// sigmaScale is SigmaLR/LR when it exceeds 1 for a trainer of rho with
// Adam, else 1: the step Adam takes on rho at the means' learning rate
// is stretched by this factor, which is Adam at learning rate SigmaLR for
// rho (its moment estimates are of the gradient, which the stretch does
// not change).
func (t *Trainer) sigmaScale() float64 {
	if t.cfg.Point || t.cfg.Optimizer != OptimizerAdam || t.cfg.SigmaLR <= t.cfg.LR {
		return 1
	}
	return t.cfg.SigmaLR / t.cfg.LR
}

// RunStats summarizes a Run. Under TrainConfig.Point the "ELBO" fields
// hold the MAP objective instead, the minibatch estimate of
// log p(y | x, mu) + log p(mu).
type RunStats struct {
	Iterations int
	// FirstELBO and LastELBO are the minibatch ELBO estimates of the
	// first and last iterations; MeanELBO averages the last tenth.
	FirstELBO, LastELBO, MeanELBO float64
}

// NonFiniteError reports a numerical failure during training: the ELBO
// estimate became NaN or infinite.
type NonFiniteError struct {
	Iteration int
	ELBO      float64
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("posterior: non-finite ELBO estimate %g at iteration %d", e.ELBO, e.Iteration)
}

// Run performs iters Steps on q, checking ctx every 64 iterations. On a
// non-finite ELBO estimate it stops and returns a *NonFiniteError; q then
// holds the parameters of the failing step and should be discarded. The
// KL term of the reported estimates is evaluated at the first iteration
// and at the end only (it moves slowly and costs two logarithms per
// parameter).
//
// Contract: Run must not overlap any other call on t (in the service, the
// bandit's trainer goroutine alone calls it, warm-started from its
// previous q); it updates q in place and keeps neither q nor rng after
// it returns; the optimizer's moment estimates carry over to the next Run
// until Reset.
func (t *Trainer) Run(ctx context.Context, q *MeanField, iters int, rng *rand.Rand) (RunStats, error) {
	st := RunStats{}
	lr0 := t.cfg.LR
	defer func() { t.lr = lr0 }()
	decay := 1.0
	if t.cfg.FinalLR > 0 && iters > 1 {
		decay = math.Pow(t.cfg.FinalLR/lr0, 1/float64(iters-1))
	}
	lr := lr0
	tail := max(iters/10, 1)
	var tailSum, last float64
	t.begin(q)
	for i := range iters {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				t.end(q)
				return st, err
			}
		}
		t.lr = lr
		var kl float64
		if i == 0 {
			kl = t.penalty(q)
		}
		ll, scale := t.iterate(q, rng)
		e := scale * ll
		if math.IsNaN(e) || math.IsInf(e, 0) {
			t.end(q)
			return st, &NonFiniteError{Iteration: i, ELBO: e}
		}
		if i == 0 {
			st.FirstELBO = e - kl
		}
		last = e
		if i >= iters-tail {
			tailSum += e
		}
		st.Iterations++
		lr *= decay
	}
	t.end(q)
	if st.Iterations > 0 {
		kl := t.penalty(q)
		if math.IsNaN(kl) || math.IsInf(kl, 0) {
			return st, &NonFiniteError{Iteration: st.Iterations - 1, ELBO: last - kl}
		}
		st.LastELBO = last - kl
		st.MeanELBO = tailSum/float64(min(tail, st.Iterations)) - kl
	}
	return st, nil
}

// Penalty is what the trainer's objective subtracts from the data term:
// KL[q || p] for the ELBO, the negated prior part of Eq. 9 or Eq. 10 for
// a collapsed bound (which ignores q.PriorMean), -log p(mu) for the MAP
// objective of a point estimate.
func (t *Trainer) Penalty(q *MeanField) float64 { return t.penalty(q) }

func (t *Trainer) penalty(q *MeanField) float64 {
	var hp float64
	if t.hp != nil && !t.cfg.FreezeHyper && len(q.Hyper) > 0 {
		hp = -t.hp.LogHyperPrior(nil, q.Hyper)
	}
	if t.cfg.Bound != BoundELBO {
		return t.col.sum(q) + hp
	}
	if !t.cfg.Point {
		return q.KL() + hp
	}
	nlp := hp
	for j, mu := range q.Mu {
		nlp -= logNormal(mu, q.priorMean(j), q.PriorVar[j])
	}
	return nlp
}

// hyperGrad turns the data term's gradient in the hyperparameters, dHyper
// of a minibatch, into the gradient Adam descends: -(scale dHyper +
// d log p(hyper)), zero with FreezeHyper.
func (t *Trainer) hyperGrad(dHyper, hyper []float64, scale float64) {
	if t.cfg.FreezeHyper {
		clear(dHyper)
		return
	}
	if t.hp != nil && len(dHyper) > 0 {
		t.hp.LogHyperPrior(t.hpd, hyper)
	} else {
		clear(t.hpd)
	}
	for j := range dHyper {
		dHyper[j] = -scale*dHyper[j] - t.hpd[j]
	}
}

// ELBO returns a Monte Carlo estimate of the full-data ELBO of q (the
// collapsed bound under one), averaging `samples` draws of the data term
// over every row (in chunks of the batch size) and subtracting the exact
// KL (Penalty). It allocates nothing.
func (t *Trainer) ELBO(q *MeanField, samples int, rng *rand.Rand) float64 {
	n := len(q.Mu)
	dMu, dRho, dHyper := t.grad[:n], t.grad[n:2*n], t.grad[2*n:]
	q.Sigma(t.sigma)
	var ll float64
	rowsN := t.lik.NumRows()
	for range samples {
		for start := 0; start < rowsN; start += len(t.rows) {
			end := min(start+len(t.rows), rowsN)
			rows := t.rows[:end-start]
			for i := range rows {
				rows[i] = start + i
			}
			ll += t.eval.ExpectedLogLik(dMu, dRho, dHyper, q.Mu, t.sigma, q.Hyper, rows, rng)
		}
	}
	if samples > 0 {
		ll /= float64(samples)
	}
	return ll - t.penalty(q)
}

// log1pSmall returns log(1 + e) for 0 <= e <= 1 to 1e-12 relative: by
// math.Log where rounding 1 + e loses at most 1.1e-16/e relative (e >=
// 1e-4), and by the series e - e^2/2 + e^3/3 - e^4/4 below, whose
// truncation error e^5/5 is below one ulp of e. math.Log1p is exact but
// several times slower, and the trainer calls this once per parameter per
// iteration; standard deviations need nothing like 1e-12.
func log1pSmall(e float64) float64 {
	if e >= 1e-4 {
		return math.Log(1 + e)
	}
	return e * (1 - e*(0.5-e*(1.0/3-e*0.25)))
}
