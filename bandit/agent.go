package bandit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"regexp"
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
	name      string
	cfg       Config
	createdAt time.Time
	enc       *Encoder
	arch      nn.Arch
	refineCfg posterior.RefineConfig
	store     Store
	log       *slog.Logger
	obs       Observer

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
	}
	if !b.ArchivedAt.IsZero() {
		a.archivedAt.Store(b.ArchivedAt.UnixNano())
	}
	if step != nil {
		sc := step.withDefaults()
		a.step, a.clock = &sc, sc.Clock
		a.stepRNG = mrand.New(mrand.NewPCG(seed, 1<<61))
		a.refRNG = mrand.New(mrand.NewPCG(seed, 1<<60))
	}
	dim, arms := a.enc.Dim(), len(cfg.Arms)
	a.rngs.New = func() any { return mrand.New(mrand.NewPCG(a.seed, a.seeds.Add(1))) }
	a.data = nn.NewData(dim, arms)
	m := &model{elbo: math.NaN(), superseded: make(chan struct{}), std: nn.Standardization{Scale: 1}}
	switch {
	case cfg.Policy.Kind.neural():
		a.arch = nn.NewArch(dim, cfg.Model.Hidden, arms)
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
		point := cfg.Policy.Kind.point()
		tcfg := posterior.TrainConfig{BatchSize: cfg.Training.BatchSize, LR: cfg.Training.LR, Point: point}
		if !point { // a point estimate has no collapsed bound
			b, err := posterior.ParseBound(cfg.Training.Bound)
			if err != nil {
				return nil, fmt.Errorf("bandit %s: training.bound: %w", cfg.Name, err)
			}
			tcfg.Bound, tcfg.CollapsedReg, tcfg.CollapsedShape = b, cfg.Training.CollapsedReg, cfg.Training.CollapsedShape
			o, err := posterior.ParseOptimizer(cfg.Training.Optimizer)
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
	case cfg.Policy.Kind == LinearTS:
		lin, err := policy.NewLinear(policy.LinearConfig{Arms: arms, Features: dim, ProbabilitySamples: cfg.Policy.PropensitySamples}, mrand.New(mrand.NewPCG(seed, 1<<62)))
		if err != nil {
			return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
		}
		a.lin = lin
	}
	if cfg.Policy.Kind == RefinedTS {
		a.bank = newBank(cfg.Refinement.BankSize, bankBounds{
			maxUses:   cfg.Policy.MaxSampleUses,
			maxAge:    time.Duration(*cfg.Policy.MaxSampleAge),
			maxBehind: int64(*cfg.Policy.MaxVersionsBehind),
		}, a.clock)
		a.bank.onSpace = func() {
			a.obs.Bank(a.name, a.bank.status().Depth)
			pool.kick()
		}
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
	if m.version == 0 && a.cfg.Policy.Kind.thompson() {
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
	est, _ := a.cfg.Training.estimator()
	if a.cfg.Policy.Kind.point() {
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
	return !a.cfg.Policy.lastLayer() && a.cfg.Policy.Kind != NeuralLinear
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

// priorVars returns the prior variance of every parameter of a network
// of architecture arch under model.prior (ModelConfig.Prior): v/In times
// 2 for the weights of a layer a ReLU follows and 1 for the output
// layer's under "fan-in", v on the biases; v everywhere under "fixed".
func priorVars(arch nn.Arch, m ModelConfig) []float64 {
	pv := make([]float64, arch.NumParams())
	v := m.PriorVariance
	for l := range arch.NumLayers() {
		ly := arch.Layer(l)
		w := v
		if m.Prior == PriorFanIn {
			g := 2.0
			if l == arch.NumLayers()-1 {
				g = 1
			}
			w = g * v / float64(ly.In)
		}
		for i := ly.W; i < ly.B; i++ {
			pv[i] = w
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

// Name returns the bandit's name.
func (a *Agent) Name() string { return a.name }

// Config returns the bandit's configuration, defaults filled in.
func (a *Agent) Config() Config { return a.cfg }

// CreatedAt returns when the bandit was created.
func (a *Agent) CreatedAt() time.Time { return a.createdAt }

// ArchivedAt returns when the bandit was archived, or the zero time while
// it is live.
func (a *Agent) ArchivedAt() time.Time {
	if at := a.archivedAt.Load(); at != 0 {
		return time.Unix(0, at).UTC()
	}
	return time.Time{}
}

// snapshotMeta is what a persisted Snapshot's Metrics holds besides the
// mean-field posterior (Params, posterior.MeanField.MarshalBinary).
type snapshotMeta struct {
	Kind   PolicyKind `json:"kind"`
	Rows   int        `json:"rows"`
	Cursor int64      `json:"cursor"`
	ELBO   *float64   `json:"elbo"`
	Shift  float64    `json:"standardization_shift"`
	Scale  float64    `json:"standardization_scale"`
	Fit    bool       `json:"fit"`
	Inputs int        `json:"inputs"`
	Hidden []int      `json:"hidden"`
	Arms   int        `json:"arms"`
	// Likelihood is the family the posterior was trained under
	// (nn.Family's name); absent in snapshots written before there was a
	// choice, which were Gaussian.
	Likelihood string `json:"likelihood,omitempty"`
	// The posterior fitted at the MAP, for laplace-ts and flow-ts
	// (fitPosterior; absent in snapshots of the other kinds and in those
	// written before it existed, which load and refit it from the
	// restored MAP and the stored rows): LaplaceVar the diagonal
	// Laplace variances (float64 little-endian), LastLayer
	// posterior.LastLayer.MarshalBinary, Flow posterior.Flow's with
	// FlowELBO. neural-linear's linear posterior is rebuilt from the
	// MAP and the rows at load.
	LaplaceVar []byte   `json:"laplace_var,omitempty"`
	LastLayer  []byte   `json:"last_layer,omitempty"`
	Flow       []byte   `json:"flow,omitempty"`
	FlowELBO   *float64 `json:"flow_elbo,omitempty"`
}

// load restores the agent from the store: the latest snapshot, if any,
// and every stored training row (the trainer trains on all of them).
// Rows newer than the snapshot wake the trainer once start has run.
func (a *Agent) load(ctx context.Context) error {
	var snap *Snapshot
	if a.cfg.Policy.Kind != Uniform {
		s, err := a.store.LatestSnapshot(ctx, a.name)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("load snapshot %s: %w", a.name, err)
		default:
			snap = s
		}
	}
	return a.install(ctx, snap, false)
}

// install makes snap (nil: none) the published posterior, after reading
// the stored training rows past the agent's cursor: at load (every row),
// and on a replica that follows another's trainer, for each newer
// version that trainer persists (follow). A snapshot that does not fit
// the configuration is ignored with a warning: at load the agent starts
// from the prior, a follower keeps its posterior.
func (a *Agent) install(ctx context.Context, snap *Snapshot, following bool) error {
	var snapVersion, snapCursor int64
	var snapRows int
	var snapMeta *snapshotMeta
	elbo := math.NaN()
	if snap != nil {
		meta, q, err := a.decodeSnapshot(snap)
		switch {
		case err != nil:
			a.log.Warn("ignoring a snapshot that does not fit the configuration", "version", snap.Version, "err", err)
			if following {
				return nil
			}
		default:
			snapVersion, snapCursor, snapRows, snapMeta = snap.Version, meta.Cursor, meta.Rows, meta
			if meta.ELBO != nil {
				elbo = *meta.ELBO
			}
			if q != nil {
				a.q, a.std, a.fit = q, nn.Standardization{Shift: meta.Shift, Scale: meta.Scale}, meta.Fit
				a.fam, a.famSet = snapshotFamily(meta), true
				_ = a.newTrainer(a.data.View()) // the configuration's trainer was made in newAgent

			}
		}
	}
	if a.cfg.Policy.Kind == Uniform {
		return nil
	}
	if _, err := a.readRows(ctx); err != nil {
		return fmt.Errorf("load training rows %s: %w", a.name, err)
	}
	a.persisted = snapVersion
	// The published posterior has seen the rows up to the snapshot's
	// cursor only (none without a snapshot); the trainer trains on the
	// rest at once (issue 16, finding 7). linear-ts has observed every
	// row in readRows.
	rows := a.data.Len()
	if a.q != nil {
		rows = min(snapRows, rows)
	}
	m := &model{version: snapVersion, rows: rows, cursor: snapCursor, std: a.std, elbo: elbo, superseded: make(chan struct{})}
	if snapVersion > 0 {
		m.trainedAt = a.clock.Now()
	}
	if a.q != nil {
		if a.tr != nil {
			a.tr.SetLikelihood(a.likelihood(a.data.View()))
			a.tr.Reset() // the optimizer's moments were of another posterior
		}
		a.setPosterior(m)
		if a.data.Len() > 0 {
			m.lik = refineLikelihood(a.tr.Likelihood().(*nn.Likelihood))
		}
		ok, err := a.restorePosterior(m, snapMeta)
		if err != nil {
			a.log.Warn("refitting the posterior of the snapshot", "version", snapVersion, "err", err)
		}
		if !ok {
			// The snapshot's MAP stands; its posterior is fitted on the
			// rows the snapshot had seen.
			if err := a.fitPosterior(m, a.likelihood(a.data.View().Prefix(rows))); err != nil {
				return fmt.Errorf("load %s: %w", a.name, err)
			}
		}
	}
	a.publish(m)
	if rows < a.data.Len() {
		a.rewardPending()
		a.notify()
	}
	return nil
}

// Bounds on a loaded snapshot's parameters: means and softplus
// arguments (|mu|, |rho|), and the noise log-variance.
const (
	maxSnapshotParam = 1e4
	maxSnapshotHyper = 1e3
)

func (a *Agent) decodeSnapshot(s *Snapshot) (*snapshotMeta, *posterior.MeanField, error) {
	var meta snapshotMeta
	if err := json.Unmarshal(s.Metrics, &meta); err != nil {
		return nil, nil, err
	}
	if meta.Kind != a.cfg.Policy.Kind {
		return nil, nil, fmt.Errorf("snapshot of a %s posterior, the bandit uses %s", meta.Kind, a.cfg.Policy.Kind)
	}
	if !a.cfg.Policy.Kind.neural() {
		return &meta, nil, nil
	}
	q := new(posterior.MeanField)
	if err := q.UnmarshalBinary(s.Params); err != nil {
		return nil, nil, err
	}
	if fam := snapshotFamily(&meta); a.famSet && fam != a.fam || a.cfg.Model.Likelihood == LikelihoodGaussian && fam != nn.Gaussian {
		return nil, nil, fmt.Errorf("snapshot of a posterior under the %s likelihood, the bandit's is %s", fam, a.cfg.Model.Likelihood)
	}
	if wantHyper := a.hyperCount(snapshotFamily(&meta)); len(q.Hyper) != wantHyper {
		return nil, nil, fmt.Errorf("snapshot has %d noise variances, the configuration %d", len(q.Hyper), wantHyper)
	}
	if q.Len() != a.arch.NumParams() || meta.Inputs != a.arch.In() || meta.Arms != a.arch.Out() || !slices.Equal(meta.Hidden, a.arch.Hidden()) {
		return nil, nil, fmt.Errorf("snapshot network %d-%v-%d does not match the configured %d-%v-%d",
			meta.Inputs, meta.Hidden, meta.Arms, a.arch.In(), a.arch.Hidden(), a.arch.Out())
	}
	// A snapshot is outside input too (issue 16): parameters out of
	// these bounds (which FitStandardization on accepted rewards and
	// training in standardized units stay far inside) could overflow a
	// prediction to an infinite score. Within them, every prediction of
	// a network of at most MaxHiddenLayers layers of MaxHiddenWidth
	// units on inputs of at most MaxNumericAbs is finite.
	if !(meta.Scale >= nn.MinStandardizationScale && meta.Scale <= 2*MaxRewardAbs) || !(math.Abs(meta.Shift) <= MaxRewardAbs) {
		return nil, nil, fmt.Errorf("snapshot standardization shift %g, scale %g", meta.Shift, meta.Scale)
	}
	if !bounded(q.Mu, maxSnapshotParam) || !bounded(q.Rho, maxSnapshotParam) || !bounded(q.Hyper, maxSnapshotHyper) || (q.PriorMean != nil && !bounded(q.PriorMean, maxSnapshotParam)) {
		return nil, nil, fmt.Errorf("snapshot has parameters beyond %g (or non-finite)", maxSnapshotParam)
	}
	for _, v := range q.PriorVar {
		if !(v > 0 && v <= 1e6) {
			return nil, nil, fmt.Errorf("snapshot prior variance %g, want (0, 1e6]", v)
		}
	}
	return &meta, q, nil
}

// snapshotFamily returns the likelihood family a snapshot was trained
// under: Gaussian unless it says otherwise.
func snapshotFamily(meta *snapshotMeta) nn.Family {
	if meta.Likelihood == nn.Bernoulli.String() {
		return nn.Bernoulli
	}
	return nn.Gaussian
}

// readRows appends the stored training rows after the agent's cursor to
// its data (and, for linear-ts, its posterior) and returns how many it
// read. Malformed rows are skipped with a warning.
func (a *Agent) readRows(ctx context.Context) (int, error) {
	n := 0
	dim, arms := a.enc.Dim(), len(a.cfg.Arms)
	err := a.store.TrainingRows(ctx, a.name, a.cursor, dim, func(r TrainingRow) error {
		a.cursor = r.Seq
		if len(r.Encoded) < dim {
			// A decision made before category values were added: its
			// context encodes anew (the values it names are all still
			// declared, at their new positions).
			if x, err := a.enc.Encode(r.Context); err == nil {
				r.Encoded = x
			}
		}
		// Rows stored before the bounds on rewards and numeric contexts
		// (issue 16) may hold values that would poison the model.
		if len(r.Encoded) != dim || r.Arm < 0 || r.Arm >= arms || !(math.Abs(r.Reward) <= MaxRewardAbs) || !bounded(r.Encoded, MaxNumericAbs) {
			a.log.Warn("skipping a malformed training row", "seq", r.Seq, "dim", len(r.Encoded), "arm", r.Arm)
			return nil
		}
		a.data.Append(r.Encoded, r.Arm, r.Reward)
		if a.lin != nil {
			a.linMu.Lock()
			err := a.lin.Observe(ctx, r.Encoded, r.Arm, r.Reward)
			a.linMu.Unlock()
			if err != nil {
				return err
			}
		}
		n++
		return nil
	})
	return n, err
}

// start launches the agent's goroutines: its trainer and, with a
// default reward, the reaper of unrewarded decisions; a refined-ts agent
// joins the refinement pool.
func (a *Agent) start() {
	if a.step != nil {
		return // step mode: the callers' Decide and Reward do the work
	}
	if a.cfg.Policy.Kind != Uniform {
		a.wg.Go(a.trainLoop)
	}
	if a.cfg.Reward.Default != nil {
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
	return true
}

// notify wakes the trainer: there are new rewards.
func (a *Agent) notify() {
	select {
	case a.wake <- struct{}{}:
	default:
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

// rewardPending records that a reward was accepted (TrainerLag); the
// policies without a model have no trainer and no lag.
func (a *Agent) rewardPending() {
	if a.cfg.Policy.Kind != Uniform {
		a.pendingSince.CompareAndSwap(0, a.clock.Now().UnixNano())
	}
}

// TrainerLag returns how long the oldest reward that the published
// posterior has not seen has waited since it was accepted, 0 when the
// posterior has seen every accepted reward (always for uniform, which
// has no model). A reward accepted while a retraining reads the rows
// counts as pending until the next retraining publishes, which it wakes.
func (a *Agent) TrainerLag() time.Duration {
	since := a.pendingSince.Load()
	if since == 0 {
		return 0
	}
	return max(time.Duration(a.clock.Now().UnixNano()-since), 0)
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
		st, err := a.fitNetwork(ctx, a.cfg.Training.budget(a.data.Len()-prev.rows))
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

// budget returns the ELBO iterations of a retraining after newRows new
// rewards: IterationsPerReward per reward, at most Iterations.
func (c TrainingConfig) budget(newRows int) int {
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

// persist saves m as a snapshot unless it is saved already (or, with
// onlyIfNew, unless nothing changed since the last save). In a fleet it
// is saved under the trainer lease's token; one the store refuses
// because the lease was taken over steps this replica down (fence).
func (a *Agent) persist(ctx context.Context, m *model, onlyIfNew bool) error {
	if m.version == 0 || m.version <= a.persisted {
		return nil
	}
	snap, err := a.snapshotOf(m)
	if err != nil {
		return err
	}
	if written, err := a.saveFenced(ctx, snap); err != nil || !written {
		return err
	}
	a.persisted = m.version
	a.announce(ctx, m.version)
	return nil
}

// snapshotOf serializes the posterior m as the store keeps it.
func (a *Agent) snapshotOf(m *model) (*Snapshot, error) {
	meta := snapshotMeta{Kind: a.cfg.Policy.Kind, Rows: m.rows, Cursor: m.cursor, Shift: m.std.Shift, Scale: m.std.Scale, Fit: a.fit, Inputs: a.enc.Dim(), Arms: len(a.cfg.Arms), Hidden: a.cfg.Model.Hidden, Likelihood: m.fam.String()}
	if !math.IsNaN(m.elbo) && !math.IsInf(m.elbo, 0) {
		meta.ELBO = &m.elbo
	}
	var params []byte
	if m.q != nil {
		var err error
		if params, err = m.q.MarshalBinary(); err != nil {
			return nil, err
		}
		if err := encodePosterior(&meta, m); err != nil {
			return nil, err
		}
	}
	metrics, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	return &Snapshot{Bandit: a.name, Version: m.version, Params: params, Metrics: metrics}, nil
}

// reapLoop applies the configured default reward to decisions left
// without a reward for longer than reward.wait.
func (a *Agent) reapLoop() {
	wait := time.Duration(*a.cfg.Reward.Wait)
	every := min(max(wait/4, 50*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-a.done
		cancel()
	}()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		if err := a.reapSafely(ctx, time.Now().Add(-wait)); err != nil && ctx.Err() == nil {
			a.log.Warn("applying default rewards failed", "err", err)
		}
	}
}

// reapSafely is reap with a panic turned into an error: the reaper must
// never take the process down.
func (a *Agent) reapSafely(ctx context.Context, before time.Time) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("reaper panic: %v\n%s", v, debug.Stack())
		}
	}()
	return a.reap(ctx, before)
}

// reap stores the default reward for decisions made before the cutoff
// that have none.
func (a *Agent) reap(ctx context.Context, before time.Time) error {
	const page = 500
	for {
		ds, err := a.store.Unrewarded(ctx, a.name, before, page)
		if err != nil {
			return err
		}
		for _, d := range ds {
			err := a.store.InsertReward(ctx, &Reward{Bandit: a.name, EventID: d.EventID, Value: *a.cfg.Reward.Default})
			switch {
			case errors.Is(err, ErrConflict): // a real reward won the race
			case err != nil:
				return err
			default:
				a.obs.Rewarded(a.name, *a.cfg.Reward.Default)
				a.rewardPending()
			}
		}
		if len(ds) > 0 {
			a.notify()
		}
		if len(ds) < page {
			return nil
		}
	}
}

// Reward stores the reward of a decision and wakes the trainer. The
// same value again is accepted without a new row; ErrNotFound if the
// event is unknown, ErrConflict if it has another value.
func (a *Agent) Reward(ctx context.Context, eventID string, value float64) error {
	if !(math.Abs(value) <= MaxRewardAbs) {
		return invalid("value", fmt.Sprintf("%g, want a finite number in [-%g, %g]", value, MaxRewardAbs, MaxRewardAbs))
	}
	if a.cfg.Model.Likelihood == LikelihoodBernoulli && a.likelihoodChoice() && !(value >= 0 && value <= 1) {
		return invalid("value", fmt.Sprintf("%g, want a number in [0, 1]: the bandit's model.likelihood is bernoulli", value))
	}
	if a.step != nil {
		a.stepMu.Lock()
		defer a.stepMu.Unlock()
	}
	if err := a.store.InsertReward(ctx, &Reward{Bandit: a.name, EventID: eventID, Value: value}); err != nil {
		if errors.Is(err, ErrConflict) {
			return a.rewardConflict(ctx, eventID, err)
		}
		return err
	}
	a.obs.Rewarded(a.name, value)
	a.rewardPending()
	if a.step != nil {
		return a.stepReward(ctx)
	}
	a.notify()
	return nil
}

// rewardConflict describes the reward that eventID already has: a
// *RewardConflictError saying whether it is the bandit's reward.default,
// or err when the stored reward cannot be read.
func (a *Agent) rewardConflict(ctx context.Context, eventID string, err error) error {
	rec, rerr := a.store.DecisionRecord(ctx, a.name, eventID)
	if rerr != nil || rec.Reward == nil {
		return err
	}
	ce := &RewardConflictError{EventID: eventID, Stored: rec.Reward.Value, ReceivedAt: rec.Reward.ReceivedAt}
	rc := a.cfg.Reward
	if rc.Default != nil && rc.Wait != nil && rec.Reward.Value == *rc.Default && !rec.Reward.ReceivedAt.Before(rec.CreatedAt.Add(time.Duration(*rc.Wait))) {
		ce.Default, ce.Wait = true, time.Duration(*rc.Wait)
	}
	return ce
}

// DecideRequest asks for one decision.
type DecideRequest struct {
	// EventID identifies the decision; empty: the service makes one.
	EventID string
	// Context is the JSON object of feature values.
	Context json.RawMessage
	// Excluded names arms that must not be chosen.
	Excluded []string
}

// Propensity describes how a decision's probabilities were obtained.
type Propensity struct {
	// Estimator is "exact" (uniform, greedy, eps-greedy), "mean-field"
	// (Monte Carlo over groups of mean-field draws), "refined-pool"
	// (resampled groups of the refined samples at hand),
	// "linear-posterior" (computed from the exact posterior by numerical
	// integration: linear-ts, neural-linear; Exact), "laplace" (groups of Laplace draws:
	// laplace-ts) or "flow" (groups of flow-refined draws: flow-ts).
	Estimator string `json:"estimator"`
	// Samples is the number of distinct posterior samples behind the
	// estimate, Groups the number of groups of policy.samples draws
	// whose argmax frequencies (or, for "mean-field", conditional
	// probabilities) average to the probabilities (0 when exact).
	Samples int `json:"samples"`
	Groups  int `json:"groups"`
	// Exact is true for "refined-pool" when Groups is every
	// policy.samples-subset of the samples at hand (at most
	// policy.MaxExactSubsets): the probabilities are then exact given
	// those samples, in steps of 1/Groups; and for "linear-posterior",
	// computed to about 1e-5 by policy.StudentWinProbs (Samples and
	// Groups 0).
	//
	// The chosen arm's estimate is never below what the decision's own
	// draw implies: the decision's group is one of the Groups counted,
	// so an argmax frequency gives it at least 1/Groups (1/Groups for an
	// exact subset enumeration, the decision's subset being one), and a
	// "mean-field" or "laplace" (diagonal) estimate with OutputDraws at
	// least 1/(Groups (OutputDraws+1)) (before the floor's mixing). The
	// standard error of a Monte Carlo estimate p̂ is at most
	// 1/(2 sqrt(Groups)).
	Exact bool `json:"exact,omitempty"`
	// OutputDraws, for "mean-field" with more than two allowed arms, is
	// the number of draws of the output layer's noise per group behind
	// each group's conditional probabilities (policy.WinProbs); with two
	// they are exact and it is absent.
	OutputDraws int `json:"output_draws,omitempty"`
	// StdError, for the Monte Carlo estimators (not Exact), bounds the
	// standard error of each probability before the floor:
	// 1/(2 sqrt(Groups)), the binomial bound for an argmax frequency
	// over Groups independent groups, which the conditional
	// probabilities of "mean-field" and "laplace" (diagonal) do not
	// exceed (Rao-Blackwell). For "refined-pool" it is the error given
	// the samples at hand.
	StdError float64 `json:"std_error,omitempty"`
	// Floor is MinPropensity for the estimated probabilities
	// (estimators other than "exact"): each was mixed with the uniform
	// distribution over the m allowed arms at weight m*Floor
	// (policy.FloorPropensities), so no allowed arm reports less than
	// Floor and none moved by more than m*Floor.
	Floor float64 `json:"floor,omitempty"`
	// For refined samples (estimator "refined-pool"): SampleUses is the
	// mean number of decisions the decision's samples have served, this
	// one included; SampleAgeSeconds the age of the oldest since it was
	// banked; VersionsBehind how many posterior versions the oldest is
	// behind the newest published; BeyondBounds is true when the bank
	// had fewer usable samples than the decision needs and it acted on
	// the freshest samples past policy.max_sample_uses, max_sample_age
	// or max_versions_behind.
	SampleUses       float64 `json:"sample_uses,omitempty"`
	SampleAgeSeconds float64 `json:"sample_age_seconds,omitempty"`
	VersionsBehind   int64   `json:"versions_behind,omitempty"`
	BeyondBounds     bool    `json:"beyond_bounds,omitempty"`
}

// Outcome is the answer to a DecideRequest.
type Outcome struct {
	Decision *Decision
	// Created is false when the event ID was already decided and the
	// stored decision is returned (idempotency).
	Created bool
	// Propensity is set for new decisions only.
	Propensity *Propensity
}

// eventIDRE is what a client-chosen event ID may look like: it appears
// in URLs unescaped.
var eventIDRE = regexp.MustCompile(`^[A-Za-z0-9._~:-]{1,128}$`)

// NewEventID returns a random 128-bit event ID in hex.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidEventID reports whether id may be used as an event ID: 1 to 128
// characters from [A-Za-z0-9._~:-].
func ValidEventID(id string) bool { return eventIDRE.MatchString(id) }

// Decide validates and encodes the context, lets the policy choose an
// arm, stores the decision durably and returns it.
//
// Probabilities: uniform, greedy and eps-greedy are exact. The
// Thompson-sampling rules play the argmax of the average prediction of S
// = policy.samples posterior samples; the probability of each arm is
// estimated from M = policy.propensity_samples groups of S samples, the
// decision's own group being the first (issue 18, finding 2):
//
//   - mf-ts (and refined-ts before its first refined samples): M groups
//     of S mean-field draws whose output layer's noise is integrated out
//     (nn.Predictor.SampleLocalMoments, policy.ThompsonGauss): the mean
//     over the groups of each arm's conditional probability of winning,
//     exact given a group's hidden layers with two allowed arms and
//     estimated from policy.OutputDraws draws with more (the decision's
//     own group from those and its own draw); unbiased, with no steps
//     of 1/M;
//   - refined-ts: the decision's S samples are a uniform draw without
//     replacement from the usable refined samples in the bank (the
//     pool; Propensity.Samples says how many); the probability of each
//     arm given the pool is computed exactly over every S-subset when
//     there are at most policy.MaxExactSubsets (the default bank of 16
//     in groups of 3: 560; Propensity.Exact), and otherwise estimated
//     from M-1 further subsets drawn the same way (policy.ThompsonVote);
//   - linear-ts, and neural-linear on the network's features: exact,
//     the integral of the independent Student-t posterior predictives
//     (policy.Linear, policy.StudentWinProbs; issue 30, finding 1);
//   - laplace-ts (diagonal): as mf-ts, on the Laplace posterior;
//     flow-ts and last-layer laplace-ts: M-1 more groups of fresh draws
//     from the posterior, voting (policy.ThompsonVote).
//
// Every estimate is then floored at MinPropensity for each allowed arm
// (policy.FloorPropensities); Propensity says which estimator, how many
// samples and groups stand behind it, and the floor.
//
// An event ID that was already decided returns the stored decision
// (Outcome.Created false) when the context encodes identically and the
// stored arm is not excluded now, and ErrConflict otherwise.
//
// Contract: Decide is safe for concurrent use (step mode serializes it
// with Reward); outside step mode it never waits for a retraining or a
// refinement to finish (linear-ts waits at most for one row's update);
// it returns once the store has the decision (durably, but for the
// in-memory store); it keeps no reference to req, and the Outcome is the
// caller's.
func (a *Agent) Decide(ctx context.Context, req DecideRequest) (*Outcome, error) {
	if at := a.archivedAt.Load(); at != 0 {
		return nil, fmt.Errorf("bandit %s was archived at %s and takes no new decisions (PATCH {\"archived\": false} resumes it): %w",
			a.name, time.Unix(0, at).UTC().Format(time.RFC3339), ErrArchived)
	}
	var v validator
	if req.EventID != "" && !ValidEventID(req.EventID) {
		v.add("event_id", "want 1 to 128 characters from [A-Za-z0-9._~:-]")
	}
	x, err := a.enc.Encode(req.Context)
	if err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		v.errs = append(v.errs, ve.Errors...)
	}
	excluded := a.excluded(req.Excluded, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	eventID := req.EventID
	if eventID == "" {
		eventID = NewEventID()
	}
	rng := a.acquireRNG()
	defer a.releaseRNG(rng)
	m := a.model.Load()
	d := &Decision{
		Bandit:       a.name,
		EventID:      eventID,
		Context:      req.Context,
		Encoded:      x,
		Policy:       string(a.cfg.Policy.Kind),
		ModelVersion: m.version,
	}
	prop, err := a.choose(ctx, d, m, x, excluded, rng)
	if err != nil {
		return nil, err
	}
	stored, created, err := a.store.InsertDecision(ctx, d)
	if err != nil {
		return nil, err
	}
	if !created {
		enc := stored.Encoded
		if len(enc) != len(x) { // decided before category values were added
			enc, _ = a.enc.Encode(stored.Context)
		}
		if !slices.Equal(enc, x) {
			return nil, fmt.Errorf("event %s was decided for another context: %w", eventID, ErrConflict)
		}
		if stored.Arm >= 0 && stored.Arm < len(excluded) && excluded[stored.Arm] {
			return nil, fmt.Errorf("event %s was decided with arm %s, which is now excluded: %w", eventID, a.cfg.Arms[stored.Arm], ErrConflict)
		}
		return &Outcome{Decision: stored, Created: false}, nil
	}
	a.obs.Decided(a.name, a.cfg.Arms[d.Arm], d.Sample)
	a.health.decided(d.Arm, x, excluded)
	return &Outcome{Decision: stored, Created: true, Propensity: prop}, nil
}

// acquireRNG returns the random source of one decision; give it back
// with releaseRNG. In step mode it is the agent's own, under stepMu (held
// until the release: decisions and rewards are serialized); otherwise one
// from the pool.
func (a *Agent) acquireRNG() *mrand.Rand {
	if a.step != nil {
		a.stepMu.Lock()
		return a.stepRNG
	}
	return a.rngs.Get().(*mrand.Rand)
}

// releaseRNG gives back what acquireRNG returned.
func (a *Agent) releaseRNG(rng *mrand.Rand) {
	if a.step != nil {
		a.stepMu.Unlock()
		return
	}
	a.rngs.Put(rng)
}

// excluded turns arm names into flags.
func (a *Agent) excluded(names []string, v *validator) []bool {
	ex := make([]bool, len(a.cfg.Arms))
	for i, n := range names {
		j := slices.Index(a.cfg.Arms, n)
		if j < 0 {
			v.add(fmt.Sprintf("excluded_arms[%d]", i), fmt.Sprintf("unknown arm %q", n))
			continue
		}
		ex[j] = true
	}
	if len(names) > 0 && !slices.Contains(ex, false) {
		v.add("excluded_arms", "every arm is excluded")
	}
	return ex
}

// choose fills d's arm, scores, probabilities and sample kind: the
// forward passes and samplers are nn.Predictor's, the rules policy's
// (policy.UniformRule, policy.EpsGreedyRule, policy.ThompsonGauss,
// policy.ThompsonVote, policy.Linear).
func (a *Agent) choose(ctx context.Context, d *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	arms := len(a.cfg.Arms)
	var pd policy.Decision
	prop := &Propensity{Estimator: "exact"}
	switch a.cfg.Policy.Kind {
	case Uniform:
		policy.UniformRule(&pd, arms, excluded, rng)
	case Greedy, EpsGreedy:
		p := a.predictor()
		pd.Scores = p.PredictWeights(make([]float64, arms), m.weights(a.arch), x, m.std)
		a.predictors.Put(p)
		policy.EpsGreedyRule(&pd, *a.cfg.Policy.Epsilon, excluded, rng)
	case LinearTS:
		a.linMu.Lock()
		var err error
		pd, err = a.lin.Decide(ctx, x, excluded)
		a.linMu.Unlock()
		if err != nil {
			return nil, err
		}
		prop = &Propensity{Estimator: "linear-posterior", Exact: true}
	case LaplaceTS, FlowTS:
		if a.cfg.Policy.lastLayer() {
			prop = a.lastLayerThompson(&pd, m, x, excluded, rng)
			break
		}
		var err error
		if prop, err = a.thompson(ctx, &pd, d, m, x, excluded, rng); err != nil {
			return nil, err
		}
	case NeuralLinear:
		var err error
		if prop, err = a.neuralLinear(ctx, &pd, m, x, excluded); err != nil {
			return nil, err
		}
	case RefinedTS, MeanFieldTS:
		var err error
		if prop, err = a.thompson(ctx, &pd, d, m, x, excluded, rng); err != nil {
			return nil, err
		}
	}
	if prop.Estimator != "exact" {
		policy.FloorPropensities(pd.Probabilities, excluded, MinPropensity)
		prop.Floor = MinPropensity
		if !prop.Exact && prop.Groups > 0 {
			prop.StdError = 0.5 / math.Sqrt(float64(prop.Groups))
		}
	}
	d.Arm, d.Sample, d.Scores, d.Propensities = pd.Arm, pd.Sample, pd.Scores, pd.Probabilities
	return prop, nil
}

// thompson is Thompson sampling on refined samples from the bank
// (policy.ThompsonVote) when the bandit is refined-ts and the bank has
// them, and on mean-field draws otherwise (policy.ThompsonGauss), with
// the propensity estimates of Decide.
func (a *Agent) thompson(ctx context.Context, pd *policy.Decision, d *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	p := a.predictor()
	defer a.predictors.Put(p)
	if a.cfg.Policy.Kind == RefinedTS && m.lik != nil {
		if a.step != nil {
			if err := a.refineNow(ctx, m, S); err != nil {
				return nil, err
			}
		}
		if t, ok := a.bank.take(S, rng); ok {
			a.obs.Bank(a.name, a.bank.status().Depth)
			pool := make([]float64, len(t.pool)*arms) // predictions in reward units
			version := t.got[0].version
			for i, r := range t.pool {
				p.PredictWeights(pool[i*arms:(i+1)*arms], r.w, x, r.std)
				if i < S {
					version = min(version, r.version)
				}
			}
			groups, exact := policy.ThompsonVote(pd, policy.Votes{Pool: pool, Arms: arms, S: S, M: M, Resample: true}, excluded, rng)
			pd.Sample = SampleRefined
			// The oldest posterior version the samples were refined from.
			d.ModelVersion = version
			a.obs.Sampled(a.name, t.uses, t.age, t.behind, t.beyond)
			return &Propensity{
				Estimator: "refined-pool", Samples: len(t.pool), Groups: groups, Exact: exact,
				SampleUses: t.uses, SampleAgeSeconds: t.age.Seconds(), VersionsBehind: t.behind, BeyondBounds: t.beyond,
			}, nil
		}
	}
	// Draw g*S+k is sample k of group g; the output layer's noise is
	// integrated out (policy.ThompsonGauss).
	mean, vari := p.SampleLocalMoments(nil, nil, m.mu, m.sig2, x, M*S, m.std, rng)
	policy.ThompsonGauss(pd, policy.Gaussian{Mean: mean, Var: vari, Arms: arms, S: S, M: M}, excluded, rng)
	prop := &Propensity{Estimator: "mean-field", Samples: M * S, Groups: M}
	if allowed := arms - countTrue(excluded); allowed > 2 {
		prop.OutputDraws = policy.OutputDraws
	}
	if a.cfg.Policy.Kind == LaplaceTS { // the diagonal Laplace posterior is a mean-field Gaussian too
		pd.Sample = SampleLaplace
		prop.Estimator = "laplace"
		return prop, nil
	}
	pd.Sample = SampleMeanField
	return prop, nil
}

// MinPropensity is the least probability the Thompson-sampling policies
// report for an allowed arm (Propensity.Floor): importance weights from
// their propensities are at most 1/MinPropensity = 10,000, and no
// estimate moves by more than arms x 1e-4.
const MinPropensity = 1e-4

// countTrue returns the number of true flags.
func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// predictor returns a Predictor of the agent's network; put it back in
// a.predictors when done.
func (a *Agent) predictor() *nn.Predictor { return a.predictors.Get().(*nn.Predictor) }

// Status is an agent's live state.
type Status struct {
	// ModelVersion counts the posteriors the trainer has published.
	ModelVersion int64 `json:"model_version"`
	// TrainedRows is the number of rewarded decisions the current
	// posterior was trained on.
	TrainedRows int `json:"trained_rows"`
	// ELBO is the trainer's last minibatch ELBO estimate (mean of the
	// last tenth of its iterations); null before any training.
	ELBO      *float64   `json:"elbo"`
	TrainedAt *time.Time `json:"trained_at"`
	// Bank is the refined-sample bank (refined-ts only).
	Bank *BankStatus `json:"bank,omitempty"`
	// TrainerError is the error of the last training attempt, while the
	// trainer has not succeeded since (it retries every second); absent
	// when training is well.
	TrainerError string `json:"trainer_error,omitempty"`
	// Posterior is the posterior laplace-ts, flow-ts and neural-linear
	// fitted at the network's MAP; absent for the other kinds.
	Posterior *PosteriorStatus `json:"posterior,omitempty"`
	// Trainer is whether this replica trains the bandit: always on a
	// service alone on its store; with replicas (Fleet), on the one that
	// holds the bandit's trainer lock, while the others install the
	// versions it persists.
	Trainer bool `json:"trainer"`
	// Health is the published posterior's health (Agent.Health).
	Health *Health `json:"health"`
}

// BankStatus describes a bank of refined samples.
type BankStatus struct {
	// Depth is the number of usable samples banked; InFlight the
	// number being refined.
	Depth    int `json:"depth"`
	InFlight int `json:"in_flight"`
	Capacity int `json:"capacity"`
	// Produced counts samples banked, Discarded samples that went stale
	// before use, Used uses of samples by decisions, Reused those uses
	// beyond a sample's first.
	Produced  int64 `json:"produced"`
	Discarded int64 `json:"discarded"`
	Used      int64 `json:"used"`
	Reused    int64 `json:"reused"`
	// BeyondBounds counts the decisions that found fewer usable samples
	// than they need and acted on samples past their bounds.
	BeyondBounds int64 `json:"beyond_bounds"`
}

// Status returns the agent's live state.
func (a *Agent) Status() Status {
	m := a.model.Load()
	st := Status{ModelVersion: m.version, TrainedRows: m.rows, Posterior: a.posteriorStatus(m), Trainer: a.Leading(), Health: a.Health()}
	if e := a.trainErr.Load(); e != nil {
		st.TrainerError = *e
	}
	if !math.IsNaN(m.elbo) && !math.IsInf(m.elbo, 0) {
		e := m.elbo
		st.ELBO = &e
	}
	if !m.trainedAt.IsZero() {
		t := m.trainedAt.UTC()
		st.TrainedAt = &t
	}
	if a.bank != nil {
		b := a.bank.status()
		st.Bank = &BankStatus{Depth: b.Depth, InFlight: b.InFlight, Capacity: a.cfg.Refinement.BankSize, Produced: b.Produced, Discarded: b.Discarded, Used: b.Used, Reused: b.Reused, BeyondBounds: b.Beyond}
	}
	return st
}

// LayerSpread is the spread of the published mean-field posterior over
// one affine layer of the network.
type LayerSpread struct {
	// Layer numbers the affine layers from 1 (the first hidden layer) to
	// the output layer.
	Layer int `json:"layer"`
	In    int `json:"in"`
	Out   int `json:"out"`
	// MeanSigma is the mean posterior standard deviation, softplus(rho),
	// over the layer's weights and biases; MaxSigma their largest.
	MeanSigma float64 `json:"mean_sigma"`
	MaxSigma  float64 `json:"max_sigma"`
}

// Spread returns the posterior spread per layer of the published
// posterior, or nil for the policies without a network (uniform,
// linear-ts). For the point-estimate policies (greedy, eps-greedy) the
// trainer does not move sigma, so it stays at its initial value.
func (a *Agent) Spread() []LayerSpread {
	m := a.model.Load()
	if m.sig2 == nil || a.arch.NumLayers() == 0 {
		return nil
	}
	out := make([]LayerSpread, a.arch.NumLayers())
	for l := range out {
		ly := a.arch.Layer(l)
		var sum, mx float64
		for _, v := range m.sig2[ly.W:ly.End()] {
			s := math.Sqrt(v)
			sum += s
			mx = max(mx, s)
		}
		out[l] = LayerSpread{Layer: l + 1, In: ly.In, Out: ly.Out, MeanSigma: sum / float64(ly.Size()), MaxSigma: mx}
	}
	return out
}
