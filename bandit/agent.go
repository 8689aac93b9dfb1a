package bandit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"runtime/debug"
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
	// slotEnc reads a ranking's slot contexts against the slot features
	// (slots.go); nil: the bandit has none.
	slotEnc *Encoder
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
		enc:       NewEncoder(ContextFeatures(cfg)),
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
	if len(cfg.SlotFeatures) > 0 {
		a.slotEnc = NewEncoder(cfg.SlotFeatures)
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
	a.pairs = newArmInputs(cfg)
	dim, arms := netShape(cfg)
	a.rngs.New = func() any { return mrand.New(mrand.NewPCG(a.seed, a.seeds.Add(1))) }
	a.data = nn.NewData(dim, arms)
	m := &model{elbo: math.NaN(), superseded: make(chan struct{}), std: nn.Standardization{Scale: 1}}
	if a.caps.Network {
		if err := a.initNetwork(m); err != nil {
			return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
		}
	}
	if err := a.decider.construct(a, seed); err != nil {
		return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
	}
	a.model.Store(m)
	return a, nil
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
//
// Contract: start runs it once, in the agent's one trainer goroutine
// (never in step mode), and stop ends it (closing a.done) and waits for
// it. Only it (and load, before start) touches the trainer's state
// (a.q, a.tr, a.data, ...); it shares only the models it publishes,
// immutable from then on, through a.model.
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
