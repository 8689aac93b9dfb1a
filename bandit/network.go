package bandit

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// The network of the kinds that have one (Capabilities.Network): its
// architecture and prior, the trainer's starting point, the likelihood
// family settled from the rewards, and the trainer's fit of the
// posterior, which trainOnce (agent.go) runs and publishes.

// modelArch returns the network of model m for dim encoded inputs and
// arms outputs: m.Hidden's widths, with the skip connection when m.Skip.
func modelArch(m ModelConfig, dim, arms int) nn.Arch {
	a := nn.NewArch(dim, m.Hidden, arms)
	if m.Skip != nil && *m.Skip {
		a = a.WithSkip()
	}
	return a
}

// priorVars returns the prior variance of every parameter of a network
// of architecture arch under model.prior (ModelConfig.Prior): v/In times
// 2 for the weights of a layer a ReLU follows and 1 for the output
// layer's under "fan-in", v on the biases; v everywhere under "fixed".
// Under a skip connection the output layer's weights on the hidden units
// take v/H and those on the inputs v, the prior of linear TS's
// weights (ModelConfig.Skip).
func priorVars(arch nn.Arch, m ModelConfig) []float64 {
	pv := make([]float64, arch.NumParams())
	last := arch.NumLayers() - 1
	for l := range arch.NumLayers() {
		ly := arch.Layer(l)
		v := m.PriorVariance
		if l < last && m.HiddenPriorVariance > 0 {
			v = m.HiddenPriorVariance
		}
		// Columns [0, from) of each weight row take w; under a skip
		// connection the output layer's columns from SkipFrom on weigh
		// the inputs and take v.
		from, w := ly.In, v
		if l == last {
			from = arch.SkipFrom()
		}
		if m.Prior == PriorFanIn {
			g := 2.0
			if l == last {
				g = 1
			}
			w = g * v / float64(from)
		}
		for o := range ly.Out {
			row := pv[ly.W+o*ly.In : ly.W+(o+1)*ly.In]
			for i := range row {
				row[i] = w
				if i >= from {
					row[i] = v
				}
			}
		}
		for i := ly.B; i < ly.End(); i++ {
			pv[i] = v
		}
	}
	return pv
}

// freshPosterior returns the trainer's starting point: the prior's
// variances (priorVars), means drawn He-style (nn.Arch.InitHe) from the
// trainer's generator, standard deviations model.init_sigma times the
// prior's, and the hyperparameters of the agent's family at zero.
func (a *Agent) freshPosterior() *posterior.MeanField {
	pv := priorVars(a.arch, a.cfg.Model)
	q := posterior.NewMeanField(len(pv), a.numHyper(), pv, 1)
	a.arch.InitHe(q.Mu, a.trng)
	sig := make([]float64, len(pv))
	for j, v := range pv {
		sig[j] = a.cfg.Model.InitSigma * math.Sqrt(v)
	}
	q.SetSigma(sig)
	a.holdPointParams(q)
	return q
}

// holdPointParams sets the standard deviations of q's point-estimate
// parameters (pointParams) to heldSigma times the prior's, where the
// trainer then holds them: for a fresh posterior, and for a snapshot's,
// which may come from a bandit whose every weight was stochastic (its
// configuration from before model.stochastic, or an Update that set it)
// and then continues from its means as point estimates.
func (a *Agent) holdPointParams(q *posterior.MeanField) {
	for _, j := range a.pointParams() {
		// A posterior held already (trained here, or by this bandit
		// before a restart) keeps its rho as stored: the fast engine's
		// float32 rounding of it is within 1e-6 of the held value.
		want := heldSigma * math.Sqrt(q.PriorVar[j])
		if math.Abs(posterior.Softplus(q.Rho[j])-want) > 1e-6*want {
			q.Rho[j] = posterior.SoftplusInv(want)
		}
	}
}

// heldSigma is the standard deviation of a point-estimate parameter of a
// partly stochastic network (model.stochastic "output") as a fraction of
// its prior's: small enough that its noise in the outputs is negligible,
// kept there by the trainer (posterior.TrainConfig.HeldSigma).
const heldSigma = 1e-3

// pointParams lists the parameters the mean-field posterior holds as
// point estimates: under model.stochastic "output" every parameter of the
// hidden layers, for the kinds that train a mean-field posterior; none
// otherwise.
func (a *Agent) pointParams() []int {
	if a.caps.MAP || a.cfg.Model.Stochastic != StochasticOutput {
		return nil
	}
	out := a.arch.Layer(a.arch.NumLayers() - 1)
	idx := make([]int, 0, out.W)
	for j := range a.arch.NumParams() {
		if j < out.W || j >= out.End() {
			idx = append(idx, j)
		}
	}
	return idx
}

// initNetwork sets up the network of a new agent (newAgent) of a kind
// that has one: its architecture and predictors, the likelihood family
// when the configuration settles it, the trainer's starting point and
// configuration, refinement's configuration, and m, the model published
// before any training, with the kind's posterior fitted at it.
func (a *Agent) initNetwork(m *model) error {
	cfg := &a.cfg
	dim, arms := netShape(cfg)
	a.arch = modelArch(cfg.Model, dim, arms)
	batch := min(cfg.Policy.Samples*cfg.Policy.PropensitySamples, 256)
	a.predictors.New = func() any { return nn.NewPredictor(a.arch, batch) }
	n := a.arch.NumParams()
	switch {
	case cfg.Model.Likelihood == LikelihoodBernoulli && a.likelihoodChoice():
		a.fam, a.famSet = nn.Bernoulli, true
	case cfg.Model.Likelihood == LikelihoodGaussian || !a.likelihoodChoice():
		a.fam, a.famSet = nn.Gaussian, true
	}
	a.q = a.freshPosterior()
	a.std = nn.Standardization{Scale: 1}
	a.sigma = make([]float64, n)
	point, held := a.caps.MAP, a.pointParams() // the trainer and the refiner read held, neither writes it
	tcfg := posterior.TrainConfig{BatchSize: cfg.Training.BatchSize, LR: cfg.Training.LR, Point: point}
	if !point { // a point estimate has no collapsed bound
		b, ok := trainerBounds[cfg.Training.Bound]
		if !ok {
			return fmt.Errorf("training.bound: unknown bound %q", cfg.Training.Bound)
		}
		tcfg.Bound, tcfg.CollapsedReg, tcfg.CollapsedShape = b, cfg.Training.CollapsedReg, cfg.Training.CollapsedShape
		o, ok := trainerOptimizers[cfg.Training.Optimizer]
		if !ok {
			return fmt.Errorf("training.optimizer: unknown optimizer %q", cfg.Training.Optimizer)
		}
		tcfg.Optimizer, tcfg.NGVIStep, tcfg.SigmaLR = o, cfg.Training.NGVIStep, cfg.Training.SigmaLR
		tcfg.HeldSigma = held
	}
	a.tcfg = tcfg
	if err := a.newTrainer(a.data.View()); err != nil {
		return err
	}
	a.refineCfg = posterior.RefineConfig{
		Fractions:  cfg.Refinement.Fractions,
		Iterations: cfg.Refinement.Iterations,
		LR:         cfg.Refinement.LR,
		BatchSize:  cfg.Refinement.BatchSize,
		Held:       held,
	}
	a.setPosterior(m)
	return a.fitPosterior(m, a.tr.Likelihood().(*nn.Likelihood))
}

// likelihood is the bandit likelihood of the network on v: the agent's
// family (Bernoulli, or Gaussian under the current standardization with
// the noise variance learned per model.noise under model.noise_prior)
// and training.estimator's estimator (validated with the configuration).
func (a *Agent) likelihood(v nn.View) *nn.Likelihood {
	est := trainerEstimators[a.cfg.Training.Estimator]
	if a.caps.MAP {
		est = nn.Deterministic // a point estimate: the MAP under the prior
	}
	opt := nn.Options{Estimator: est, RISSamples: a.cfg.Training.RISSamples, Family: a.fam}
	if a.fam == nn.Gaussian {
		opt.LearnNoise, opt.NoisePerArm, opt.NoiseContext, opt.Standardization = true, a.noisePerArm(), a.noiseContext(), a.std
		if np := a.cfg.Model.NoisePrior; np != nil {
			opt.NoisePrior = nn.InvGamma{Shape: np.Shape, Rate: np.Rate}
		}
	}
	return nn.NewLikelihood(a.arch, v, opt)
}

// likelihoodChoice reports whether model.likelihood applies to the
// policy kind: laplace-ts "last-layer", flow-ts and neural-linear fit a
// Gaussian linear model to the output layer and always train under the
// Gaussian likelihood with one noise variance.
func (a *Agent) likelihoodChoice() bool {
	return !a.caps.FixedLikelihood
}

// noisePerArm reports whether the Gaussian likelihood learns one noise
// variance per arm (model.noise "per-arm", where it applies).
func (a *Agent) noisePerArm() bool {
	return a.cfg.Model.Noise == NoisePerArm && a.likelihoodChoice()
}

// noiseContext reports whether the Gaussian likelihood's log noise
// variance is linear in the context, per arm (model.noise "context",
// where it applies; nn.Options.NoiseContext).
func (a *Agent) noiseContext() bool {
	return a.cfg.Model.Noise == NoiseContext && a.likelihoodChoice()
}

// numHyper is the number of likelihood hyperparameters of the agent's
// family: the log noise variances.
func (a *Agent) numHyper() int { return a.hyperCount(a.fam) }

// hyperCount is the number of noise hyperparameters of the likelihood
// of family fam under the configuration: none for Bernoulli; for
// Gaussian one log noise variance per arm or one in all, or under
// model.noise "context" per arm an intercept and a slope per input.
func (a *Agent) hyperCount(fam nn.Family) int {
	switch {
	case fam == nn.Bernoulli:
		return 0
	case a.noiseContext():
		return a.arch.Out() * (a.arch.In() + 1)
	case a.noisePerArm():
		return a.arch.Out()
	}
	return 1
}

// newTrainer makes a.tr a trainer of a.tcfg on the agent's likelihood of
// v, as a new posterior's hyperparameters or family need.
func (a *Agent) newTrainer(v nn.View) error {
	tr, err := posterior.NewTrainer(a.likelihood(v), a.tcfg)
	if err != nil {
		return err
	}
	a.tr = tr
	return nil
}

// setPosterior publishes a copy of the trainer's posterior a.q in m: as
// m.q, and as the means and variances decisions draw from, which for the
// Thompson-sampling kinds (mf-ts, refined-ts) before any training
// (m.version 0) are the prior's instead.
//
// Before any reward the posterior is the prior, and Thompson sampling
// must draw from it (issue 18, finding 1). The trainer's starting point
// is not the prior: its means start He-style and its standard deviations
// at model.init_sigma (0.01), an optimization start whose predictions
// are nearly deterministic (on a fresh 3-arm mf-ts bandit 97 of the
// first 100 decisions had a chosen-arm probability of at least 0.999).
// The prior N(m, s^2) (m the prior means, zero unless a collapsed bound
// learned them; s^2 = model.prior_variance) is symmetric in the arms, so
// every allowed arm is equally likely on every context. Greedy and
// eps-greedy act on the means and keep the trainer's: with the prior's
// zero means every score would tie.
func (a *Agent) setPosterior(m *model) {
	m.q = a.q.Clone()
	m.fam = a.fam
	m.mu, m.sig2 = m.q.Mu, sigma2(a.q)
	if m.version == 0 && a.caps.MeanField {
		m.mu = make([]float64, len(m.q.Mu))
		if m.q.PriorMean != nil {
			copy(m.mu, m.q.PriorMean)
		}
		m.sig2 = slices.Clone(m.q.PriorVar)
	}
}

// sigma2 returns softplus(rho)^2 per parameter.
func sigma2(q *posterior.MeanField) []float64 {
	s := q.Sigma(nil)
	for i, v := range s {
		s[i] = v * v
	}
	return s
}

// decideFamily settles the likelihood family before a training on v:
// under model.likelihood "auto" Bernoulli while every reward of v is 0 or
// 1, Gaussian otherwise (it reads each reward once). When the family changes (a bandit of 0/1
// rewards that gets another value) the network restarts from the prior,
// since what its outputs mean changes; when it is settled for the first
// time the posterior keeps its starting point. Either way the trainer is
// rebuilt for the family's hyperparameters.
func (a *Agent) decideFamily(v nn.View) error {
	fam := a.fam
	if a.cfg.Model.Likelihood == LikelihoodAuto && a.likelihoodChoice() {
		_, _, ys := v.Rows()
		for _, y := range ys[min(a.famRows, len(ys)):] {
			if y != 0 && y != 1 {
				a.nonBinary = true
				break
			}
		}
		a.famRows = max(a.famRows, len(ys))
		fam = nn.Bernoulli
		if a.nonBinary {
			fam = nn.Gaussian
		}
	}
	if a.famSet && fam == a.fam {
		return nil
	}
	restart := a.famSet
	if restart {
		a.log.Info("rewards no longer fit the likelihood: restarting the network from the prior", "from", a.fam, "to", fam, "rows", v.Len())
	}
	a.fam, a.famSet = fam, true
	if restart {
		a.q = a.freshPosterior()
		a.fit = false
	} else if len(a.q.Hyper) != a.numHyper() {
		q := posterior.NewMeanField(a.q.Len(), a.numHyper(), a.q.PriorVar, 1)
		copy(q.Mu, a.q.Mu)
		copy(q.Rho, a.q.Rho)
		a.q = q
	}
	a.std = nn.Standardization{Scale: 1}
	return a.newTrainer(v)
}

// fitNetwork refits the reward standardization to every row, rewrites
// the posterior for it (nn.Restandardize keeps its predictions in reward
// units), and runs up to budget ELBO iterations on all rows from the
// previous posterior (a warm start), in ten chunks when
// training.stop_tolerance > 0: it stops after a chunk whose mean
// minibatch ELBO (RunStats.MeanELBO, the mean of the chunk's last tenth)
// is within that fraction of the previous chunk's.
func (a *Agent) fitNetwork(ctx context.Context, budget int) (posterior.RunStats, error) {
	view := a.data.View()
	if err := a.decideFamily(view); err != nil {
		return posterior.RunStats{}, err
	}
	if a.fam == nn.Gaussian {
		std := nn.FitStandardization(view)
		if std != a.std {
			a.q.Sigma(a.sigma)
			nn.Restandardize(a.arch, a.q.Mu, a.sigma, a.std, std)
			a.q.SetSigma(a.sigma)
			a.std = std
		}
		if !a.fit {
			stride := 1
			if a.noiseContext() {
				stride = a.arch.In() + 1 // an intercept per arm, its slopes at 0
			}
			for k := 0; k < len(a.q.Hyper); k += stride {
				a.q.Hyper[k] = 2 * math.Log(std.Scale) // the noise starts at one standardized unit
			}
		}
	}
	a.fit = true
	a.tr.SetLikelihood(a.likelihood(view))
	tol := *a.cfg.Training.StopTolerance
	chunk := budget
	if tol > 0 {
		chunk = max(budget/10, 1)
	}
	var total posterior.RunStats
	prev := math.NaN()
	for total.Iterations < budget {
		st, err := a.tr.Run(ctx, a.q, min(chunk, budget-total.Iterations), a.trng)
		if err == nil && st.Iterations == 0 {
			break
		}
		if total.Iterations == 0 {
			total.FirstELBO = st.FirstELBO
		}
		total.Iterations += st.Iterations
		total.LastELBO, total.MeanELBO = st.LastELBO, st.MeanELBO
		if err != nil {
			return total, fmt.Errorf("train %s on %d rows: %w", a.name, view.Len(), err)
		}
		if math.Abs(st.MeanELBO-prev) <= tol*math.Abs(prev) {
			break // converged (never with prev NaN)
		}
		prev = st.MeanELBO
	}
	return total, nil
}
