package bandit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refinery-bandits/refinery/internal/cpustat"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
	"github.com/refinery-bandits/refinery/posterior"
)

// model is one published posterior of an agent. It is immutable once
// published: decisions and refinement workers read it without locks
// through Agent.model, and the trainer replaces it with an atomic swap.
type model struct {
	version int64
	rows    int   // training rows the posterior has seen
	cursor  int64 // Seq of the last of them
	// q is the mean-field posterior (the trainer's state); nil for the
	// policies without a network (uniform, linear-ts). mu and sig2 are
	// the means and variances Thompson decisions draw from: q's, except
	// for the Thompson-sampling kinds before any training (version 0),
	// where they are the prior's (setPosterior).
	q        *posterior.MeanField
	mu, sig2 []float64
	std      nn.Standardization
	fam      nn.Family // the likelihood q was trained under
	elbo     float64   // NaN before any training
	// lik is the likelihood the posterior was trained on, under local
	// reparameterization (refineLikelihood), shared with the refiners;
	// nil while there is no data.
	lik       *nn.Likelihood
	trainedAt time.Time
	// superseded is closed when a newer model is published.
	superseded chan struct{}
	// muw is q's means made ready for the fast engine, on first use
	// (weights).
	prep sync.Once
	muw  *nn.Weights

	// The posteriors of the point-estimate Thompson kinds, fitted at the
	// MAP q.Mu (fitPosterior): laplace-ts "diagonal" draws from mu and
	// sig2 as mf-ts does; laplace-ts "last-layer" and flow-ts from the
	// last-layer Laplace posterior ll, flow-ts through its flow (nil
	// before any data) whose mean training ELBO is flowELBO (NaN
	// without); neural-linear from its linear posterior lin on the MAP's
	// features, used under Agent.linMu (policy.Linear is not safe for
	// concurrent use).
	ll       *posterior.LastLayer
	flow     *posterior.Flow
	flowELBO float64
	lin      *policy.Linear

	// refQ is q with the prior refinement targets (Agent.refineFrom),
	// made once per model when it differs from q's own.
	refOnce sync.Once
	refQ    *posterior.MeanField

	// heldOut is how the previous version predicted the rows this one
	// was trained on (scoreHeldOut); nil when not scored here.
	heldOut *HeldOutHealth
}

// weights returns the posterior means made ready for the fast engine
// (nn.Weights), once per model: the point-estimate decisions predict
// with them, and converting them per decision cost as much as the
// forward pass.
func (m *model) weights(a nn.Arch) *nn.Weights {
	m.prep.Do(func() { m.muw = a.PrepareWeights(m.q.Mu) })
	return m.muw
}

// refineFrom returns the posterior refinement starts from: m.q with the
// prior of the model the trainer fitted it to. Under the ELBO that is
// q's own prior. A collapsed bound (Tomczak et al. 2021, Eqs. 9 and 10)
// learns the prior's means (and, Eq. 10, its variances) given q in
// closed form; at the bound's optimum q is the ELBO's optimum under that
// learned prior, an empirical-Bayes prior, so refinement targets the
// posterior under it: PriorMean and PriorVar are the learned prior's
// (posterior.Trainer.CollapsedPrior), and posterior.Refine starts the
// auxiliary variables' sum at its mean.
func (a *Agent) refineFrom(m *model) *posterior.MeanField {
	if a.tcfg.Bound == posterior.BoundELBO {
		return m.q
	}
	m.refOnce.Do(func() {
		q := m.q.Clone()
		q.PriorMean = make([]float64, q.Len())
		posterior.LearnedPrior(a.tcfg, q, q.PriorMean, q.PriorVar)
		m.refQ = q
	})
	return m.refQ
}

// Agent is one bandit at work: its configuration and encoder, the
// current posterior snapshot, the trainer goroutine that keeps it
// current, and (for refined-ts) the bank of refined samples the shared
// refinement workers fill. Its methods are safe for concurrent use.
type Agent struct {
	name string
	// cfg is the configuration the agent was built with; current is
	// the configuration now, which differs from cfg only in the
	// settings a PATCH changes in place (liveSettings, reconfigure).
	cfg       Config
	current   atomic.Pointer[Config]
	createdAt time.Time
	enc       *Encoder
	// pairs is the arms' encoded features of a bandit with arm
	// features (armfeatures.go), whose network scores (context, arm)
	// pairs with one output; nil: one output per arm.
	pairs     *armInputs
	arch      nn.Arch
	refineCfg posterior.RefineConfig
	store     Store
	log       *slog.Logger
	obs       Observer
	// decider is the policy kind's (kinds.go), caps its capabilities
	// under the configuration.
	decider decider
	caps    Capabilities

	// tcfg configures every trainer of the agent (newTrainer); set in
	// newAgent and read only after, also by refineFrom on the decision
	// path and the refinement workers.
	tcfg posterior.TrainConfig

	model atomic.Pointer[model]
	bank  *bank // refined-ts only
	pool  *refinePool

	// archivedAt is when the bandit was archived (Unix nanoseconds), 0
	// while it is live: Decide refuses with ErrArchived.
	archivedAt atomic.Int64

	wake    chan struct{} // capacity 1: new rewards to train on
	done    chan struct{} // closed by close
	stopped atomic.Bool
	wg      sync.WaitGroup

	predictors sync.Pool // *nn.Predictor
	rngs       sync.Pool // *rand.Rand
	seed       uint64
	seeds      atomic.Uint64

	// Owned by the trainer goroutine (and by load before it starts).
	data   *nn.Data
	q      *posterior.MeanField
	tr     *posterior.Trainer
	std    nn.Standardization
	fam    nn.Family // the likelihood family, once famSet
	famSet bool      // fam is decided (always, but under model.likelihood "auto" before the first training)
	// decideFamily has read the first famRows rewards; nonBinary: one
	// of them was neither 0 nor 1 (the data only grow).
	famRows   int
	nonBinary bool
	fit       bool
	cursor    int64
	sigma     []float64
	trng      *mrand.Rand
	persisted int64

	linMu sync.Mutex
	lin   *policy.Linear // linear-ts only

	// pendingSince is when the oldest reward the published posterior
	// has not seen was accepted (Unix nanoseconds of a.clock), 0 when
	// there is none (TrainerLag).
	pendingSince atomic.Int64

	// fl is the agent's part in a fleet of replicas (fleet.go); nil
	// when the service is the only one on its store.
	fl *agentFleet

	// shadow is the bandit's candidate agent (Config.Shadow, shadow.go),
	// nil without one; candidate marks the candidate itself, which
	// persists no snapshot and runs no reaper.
	shadow    atomic.Pointer[Agent]
	candidate bool
	// shadowSince is a candidate's ShadowConfig.Since, set before it is
	// published (setShadow) and read only after.
	shadowSince time.Time

	// trainErr is the last training error (or recovered panic) while
	// it lasts; nil after a successful training. Status reports it.
	trainErr atomic.Pointer[string]

	clock Clock
	// Step mode (see StepConfig); nil step: a live agent.
	step    *StepConfig
	stepMu  sync.Mutex // serializes Decide and Reward
	stepRNG *mrand.Rand
	refRNG  *mrand.Rand
	refiner *posterior.Refiner
	refLik  *nn.Likelihood
	pending int // rewards since the last training

	health healthState // Health: recent decisions, held-out scores, caches
}

// newAgent builds the agent of a validated configuration. It does not
// read the store or start anything: see load and start.
func newAgent(b *Bandit, cfg *Config, st Store, pool *refinePool, seed uint64, log *slog.Logger, obs Observer, step *StepConfig) (*Agent, error) {
	a := &Agent{
		clock:     systemClock{},
		name:      cfg.Name,
		cfg:       *cfg,
		createdAt: b.CreatedAt,
		enc:       NewEncoder(cfg.Features),
		store:     st,
		log:       log.With("bandit", cfg.Name),
		obs:       obs,
		pool:      pool,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		seed:      seed,
		trng:      mrand.New(mrand.NewPCG(seed, 0)),
		decider:   deciderOf(cfg.Policy.Kind),
		caps:      CapabilitiesOf(cfg.Policy),
	}
	if a.decider == nil {
		return nil, fmt.Errorf("bandit %s: unknown policy kind %q", cfg.Name, cfg.Policy.Kind)
	}
	a.current.Store(&a.cfg)
	if !b.ArchivedAt.IsZero() {
		a.archivedAt.Store(b.ArchivedAt.UnixNano())
	}
	if step != nil {
		sc := step.withDefaults()
		a.step, a.clock = &sc, sc.Clock
		a.stepRNG = mrand.New(mrand.NewPCG(seed, 1<<61))
		a.refRNG = mrand.New(mrand.NewPCG(seed, 1<<60))
	}
	a.pairs = newArmInputs(cfg)
	dim, arms := netShape(cfg)
	a.rngs.New = func() any { return mrand.New(mrand.NewPCG(a.seed, a.seeds.Add(1))) }
	a.data = nn.NewData(dim, arms)
	m := &model{elbo: math.NaN(), superseded: make(chan struct{}), std: nn.Standardization{Scale: 1}}
	if a.caps.Network {
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
		point := a.caps.MAP
		tcfg := posterior.TrainConfig{BatchSize: cfg.Training.BatchSize, LR: cfg.Training.LR, Point: point}
		if !point { // a point estimate has no collapsed bound
			b, err := posteriorBound(cfg.Training.Bound)
			if err != nil {
				return nil, fmt.Errorf("bandit %s: training.bound: %w", cfg.Name, err)
			}
			tcfg.Bound, tcfg.CollapsedReg, tcfg.CollapsedShape = b, cfg.Training.CollapsedReg, cfg.Training.CollapsedShape
			o, err := posteriorOptimizer(cfg.Training.Optimizer)
			if err != nil {
				return nil, fmt.Errorf("bandit %s: training.optimizer: %w", cfg.Name, err)
			}
			tcfg.Optimizer, tcfg.NGVIStep, tcfg.SigmaLR = o, cfg.Training.NGVIStep, cfg.Training.SigmaLR
		}
		a.tcfg = tcfg
		if err := a.newTrainer(a.data.View()); err != nil {
			return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
		}
		a.refineCfg = posterior.RefineConfig{
			Fractions:  cfg.Refinement.Fractions,
			Iterations: cfg.Refinement.Iterations,
			LR:         cfg.Refinement.LR,
			BatchSize:  cfg.Refinement.BatchSize,
		}
		a.setPosterior(m)
		if err := a.fitPosterior(m, a.tr.Likelihood().(*nn.Likelihood)); err != nil {
			return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
		}
	}
	if err := a.decider.construct(a, seed); err != nil {
		return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
	}
	a.model.Store(m)
	return a, nil
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

// likelihood is the bandit likelihood of the network on v: the agent's
// family (Bernoulli, or Gaussian under the current standardization with
// the noise variance learned per model.noise under model.noise_prior)
// and training.estimator's estimator (validated with the configuration).
func (a *Agent) likelihood(v nn.View) *nn.Likelihood {
	est, _ := nnEstimator(a.cfg.Training.Estimator)
	if a.caps.MAP {
		est = nn.Deterministic // a point estimate: the MAP under the prior
	}
	opt := nn.Options{Estimator: est, RISSamples: a.cfg.Training.RISSamples, Family: a.fam}
	if a.fam == nn.Gaussian {
		opt.LearnNoise, opt.NoisePerArm, opt.Standardization = true, a.noisePerArm(), a.std
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

// numHyper is the number of likelihood hyperparameters of the agent's
// family: the log noise variances.
func (a *Agent) numHyper() int { return a.hyperCount(a.fam) }

// hyperCount is the number of log noise variances of the likelihood of
// family fam under the configuration: none for Bernoulli, one per arm
// or one in all for Gaussian.
func (a *Agent) hyperCount(fam nn.Family) int {
	switch {
	case fam == nn.Bernoulli:
		return 0
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
	v := m.PriorVariance
	last := arch.NumLayers() - 1
	for l := range arch.NumLayers() {
		ly := arch.Layer(l)
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
	return q
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

// refineLikelihood is the likelihood refinement uses: the trainer's lik
// under local reparameterization, otherwise the same data and options
// with nn.LocalReparam. Refinement's objective, ELBO_aux (Havasi et al.
// 2021, Eq. 13), is an ELBO, which the RIS trainer's moment-propagation
// objective is not; training.estimator chooses the trainer's estimator
// only.
func refineLikelihood(lik *nn.Likelihood) *nn.Likelihood {
	opt := lik.Options()
	if opt.Estimator == nn.LocalReparam {
		return lik
	}
	opt.Estimator = nn.LocalReparam
	return nn.NewLikelihood(lik.Arch(), lik.Data(), opt)
}

// start launches the agent's goroutines: its trainer and, with a
// default reward, the reaper of unrewarded decisions (but a candidate's,
// shadow.go); a refined-ts agent joins the refinement pool. The
// candidate, if any, starts too.
func (a *Agent) start() {
	if sh := a.shadow.Load(); sh != nil {
		sh.start()
	}
	if a.step != nil {
		return // step mode: the callers' Decide and Reward do the work
	}
	if a.caps.Model {
		a.wg.Go(a.trainLoop)
	}
	if a.cfg.Reward.Default != nil && !a.candidate {
		a.wg.Go(a.reapLoop)
	}
	if a.bank != nil {
		a.pool.add(a)
	}
}

// close stops the agent's goroutines and persists its latest posterior
// if it has not been, unless another replica trains the bandit (whose
// versions are not this replica's to write).
func (a *Agent) close(ctx context.Context) error {
	if !a.stop() || !a.Leading() {
		return nil
	}
	return a.persist(ctx, a.model.Load(), true)
}

// stop stops the agent's goroutines (its trainer, reaper and place in
// the refinement pool) and reports whether this call stopped them. A
// stopped agent still decides and stores rewards, on its last posterior,
// for the requests that hold it.
func (a *Agent) stop() bool {
	if a.stopped.Swap(true) {
		return false
	}
	close(a.done)
	a.wg.Wait()
	if sh := a.shadow.Load(); sh != nil {
		sh.stop()
	}
	return true
}

// notify wakes the trainer, and the candidate's (shadow.go): there are
// new rewards.
func (a *Agent) notify() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
	if sh := a.shadow.Load(); sh != nil {
		sh.notify()
	}
}

// publish makes m the current posterior.
func (a *Agent) publish(m *model) {
	old := a.model.Swap(m)
	if old != nil && old != m {
		close(old.superseded)
	}
	if a.bank != nil {
		a.bank.setVersion(m.version)
		a.pool.kick()
	}
}

// trainLoop waits for rewards and retrains on them until close.
func (a *Agent) trainLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-a.done
		cancel()
	}()
	var lastErr string
	var lastLogged time.Time
	repeats := 0
	var minInterval time.Duration
	if a.cfg.Training.MinInterval != nil {
		minInterval = time.Duration(*a.cfg.Training.MinInterval)
	}
	for {
		select {
		case <-a.done:
			return
		case <-a.wake:
		}
		release, ok := a.pool.background(a.done)
		if !ok {
			return
		}
		start := time.Now()
		var err error
		a.pool.cpu.add(&a.pool.cpu.training, cpustat.Measure(func() { err = a.trainSafely(ctx) }))
		took := time.Since(start)
		release()
		// The trainer's CPU budget: at most training.cpu_share of a core
		// on average, and a retraining at most every min_interval.
		rest := time.Duration(float64(took) * (1/a.cfg.Training.CPUShare - 1))
		if wait := max(minInterval-took, rest); wait > 0 {
			select {
			case <-a.done:
				return
			case <-time.After(wait):
			}
		}
		if err != nil && ctx.Err() == nil {
			// The same failure again (a database outage, a persistent
			// fault) is logged once a minute, not every second.
			msg := ""
			if e := a.trainErr.Load(); e != nil {
				msg = *e
			}
			if msg != lastErr || time.Since(lastLogged) >= time.Minute {
				a.log.Error("training failed; retrying every second", "err", err, "repeats", repeats)
				lastErr, lastLogged, repeats = msg, time.Now(), 0
			} else {
				repeats++
			}
			select {
			case <-a.done:
				return
			case <-time.After(time.Second):
			}
			a.notify()
		}
	}
}

// trainSafely is trainOnce with a panic turned into an error, so that a
// fault in training never takes the process (and every other bandit)
// down (issue 16, finding 1). After a panic the trainer goes back to the
// last published posterior, as after a training error. The outcome is
// kept for Status.
func (a *Agent) trainSafely(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("trainer panic: %v\n%s", v, debug.Stack())
			if prev := a.model.Load(); a.q != nil && prev.q != nil {
				a.q.CopyFrom(prev.q)
				a.std = prev.std
				a.tr.Reset()
			}
		}
		switch {
		case err == nil:
			a.trainErr.Store(nil)
		case ctx.Err() == nil:
			msg := err.Error()
			if i := strings.IndexByte(msg, '\n'); i >= 0 {
				msg = msg[:i] // the stack goes to the log only
			}
			a.trainErr.Store(&msg)
		}
	}()
	if a.fl != nil {
		return a.fleetWork(ctx)
	}
	return a.trainOnce(ctx)
}

// bounded reports whether every element of x has magnitude at most hi
// (and none is NaN).
func bounded(x []float64, hi float64) bool {
	for _, v := range x {
		if !(math.Abs(v) <= hi) {
			return false
		}
	}
	return true
}

// trainOnce reads the rows stored since the cursor and, if the
// published posterior has not seen every row read so far, retrains and
// publishes a new posterior version.
func (a *Agent) trainOnce(ctx context.Context) (err error) {
	// The rewards pending now are the rows read below; if the training
	// fails they are pending still.
	since := a.pendingSince.Swap(0)
	defer func() {
		if err != nil && since != 0 && !a.pendingSince.CompareAndSwap(0, since) {
			a.pendingSince.Store(min(a.pendingSince.Load(), since))
		}
	}()
	n, rerr := a.readRows(ctx)
	prev := a.model.Load()
	if n == 0 && a.data.Len() <= prev.rows {
		return rerr
	}
	m := &model{version: nextVersion(prev.version), rows: a.data.Len(), cursor: a.cursor, elbo: math.NaN(), superseded: make(chan struct{}), trainedAt: a.clock.Now()}
	iters := 0
	m.heldOut = a.scoreHeldOut(prev) // before training on the new rows
	if a.q != nil {
		st, err := a.fitNetwork(ctx, retrainBudget(a.cfg.Training, a.data.Len()-prev.rows))
		if err != nil {
			// Go back to the last published posterior.
			a.revert(prev)
			return errors.Join(err, rerr)
		}
		iters = st.Iterations
		m.std, m.elbo = a.std, st.MeanELBO
		a.setPosterior(m)
		m.lik = refineLikelihood(a.tr.Likelihood().(*nn.Likelihood))
		if err := a.fitPosterior(m, a.tr.Likelihood().(*nn.Likelihood)); err != nil {
			a.revert(prev)
			return errors.Join(err, rerr)
		}
	}
	a.publish(m)
	a.obs.Trained(a.name, iters, m.version, m.elbo)
	// With replicas, the others install the versions persisted here
	// (follow): every snapshot_every-th.
	if m.version-a.persisted >= int64(a.cfg.Training.SnapshotEvery) {
		if err := a.persist(ctx, m, false); err != nil && ctx.Err() == nil {
			a.log.Warn("persisting the posterior failed", "version", m.version, "err", err)
		}
	}
	return rerr
}

// revert makes the trainer's posterior the published prev's again after
// a failed training, in the family prev was trained under.
func (a *Agent) revert(prev *model) {
	a.std = prev.std
	if len(a.q.Hyper) != len(prev.q.Hyper) || a.fam != prev.fam {
		a.q, a.fam = prev.q.Clone(), prev.fam
		_ = a.newTrainer(a.data.View()) // prev's trainer configuration, made before
		return
	}
	a.q.CopyFrom(prev.q)
	a.tr.Reset()
}

// retrainBudget returns the ELBO iterations of a retraining after
// newRows new rewards: IterationsPerReward per reward, at most
// Iterations.
func retrainBudget(c TrainingConfig, newRows int) int {
	return min(c.Iterations, max(newRows, 1)*c.IterationsPerReward)
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
			for k := range a.q.Hyper {
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
