package bandit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refinery-bandits/refinery/internal/plural"
)

// ServiceConfig configures a Service. The zero value is ready to use.
type ServiceConfig struct {
	// Workers is the number of refinement workers shared by every
	// refined-ts bandit; zero means one per core less one, at least one
	// (runtime.GOMAXPROCS), so that serving keeps a core.
	Workers int
	// BackgroundCores bounds the background work that runs at once:
	// every bandit's retraining and every refinement worker's refined
	// sample take one of these cores each for as long as they run, and
	// wait for one when all are taken. Zero means one per core less one,
	// at least one (runtime.GOMAXPROCS), so that the request path always
	// has a core to itself. With each trainer's training.cpu_share (its
	// average share of one core), this is how the cores are split
	// between refinement, training and the request path: on 2 cores,
	// training and refinement take turns on one core, the trainer at
	// most cpu_share of it, and serving keeps the other.
	BackgroundCores int
	// Seed seeds every random source; zero means a random seed.
	Seed uint64
	// Logger receives the service's logs; nil discards them.
	Logger *slog.Logger
	// Observer is told about decisions, rewards, training and
	// refinement; nil means NopObserver.
	Observer Observer
	// Step, when not nil, runs every agent in step mode (StepConfig):
	// no goroutines, training inside Reward and refinement inside
	// Decide, deterministic given Seed. Workers is then ignored.
	Step *StepConfig
	// Fleet, when not nil, makes the service one replica of several on
	// its store (see Fleet): it trains the bandits whose trainer lock it
	// holds and follows the others' versions. Nil: the service is the
	// only one and trains every bandit. Ignored in step mode.
	Fleet Fleet
	// TrainerRetry is how often a replica holds an election
	// (Fleet.Lead): it renews its trainer leases and tries to take
	// those it does not hold. With store.Fleet, when a trainer's replica
	// dies another trains its bandits within TrainerRetry of PostgreSQL
	// seeing its session end, and when it stops renewing (frozen, cut
	// off) within the lease (serve --trainer-lease) plus TrainerRetry.
	// Zero means DefaultTrainerRetry.
	TrainerRetry time.Duration
	// FleetPoll is how often a replica polls for the versions and
	// bandit changes the fleet's announcements may have missed. Zero
	// means DefaultFleetPoll.
	FleetPoll time.Duration
	// MaxBandits bounds the bandits Create makes (each has its trainer
	// and, for refined-ts, a share of the refinement workers); zero
	// means DefaultMaxBandits. Stored bandits beyond it still load.
	MaxBandits int
}

// DefaultMaxBandits is ServiceConfig.MaxBandits's default.
const DefaultMaxBandits = 100

// Service runs the agents of every bandit in a store: it loads them on
// start, creates new ones, and routes decisions and rewards to them.
type Service struct {
	store  Store
	log    *slog.Logger
	obs    Observer
	pool   *refinePool
	step   *StepConfig
	seed   uint64
	seeds  atomic.Uint64
	loaded atomic.Bool
	closed atomic.Bool

	maxBandits int
	creating   int // Creates under way; guarded by mu

	mu     sync.RWMutex
	agents map[string]*Agent

	// life serializes the changes of each bandit (Update, Delete, and
	// those of other replicas: reconcile), by name (lockLife): a slow
	// change of one bandit holds no other's (issue 31, finding 6).
	life lifeLocks

	fleetState
}

// NewService returns a service on st. Call Load to load the stored
// bandits, and Close when done.
func NewService(st Store, cfg ServiceConfig) *Service {
	if cfg.Workers <= 0 && cfg.Step == nil {
		cfg.Workers = max(runtime.GOMAXPROCS(0)-1, 1)
	}
	if cfg.BackgroundCores <= 0 {
		cfg.BackgroundCores = max(runtime.GOMAXPROCS(0)-1, 1)
	}
	if cfg.Seed == 0 {
		cfg.Seed = mrand.Uint64()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	if cfg.MaxBandits <= 0 {
		cfg.MaxBandits = DefaultMaxBandits
	}
	if cfg.Step != nil {
		cfg.Workers, cfg.Fleet = 0, nil
	}
	if cfg.TrainerRetry <= 0 {
		cfg.TrainerRetry = DefaultTrainerRetry
	}
	if cfg.FleetPoll <= 0 {
		cfg.FleetPoll = DefaultFleetPoll
	}
	s := &Service{
		store:      st,
		log:        cfg.Logger,
		obs:        cfg.Observer,
		seed:       cfg.Seed,
		maxBandits: cfg.MaxBandits,
		step:       cfg.Step,
		pool:       newRefinePool(cfg.Workers, cfg.BackgroundCores, cfg.Seed, cfg.Logger, cfg.Observer),
		agents:     map[string]*Agent{},
		fleetState: fleetState{
			fleet:        cfg.Fleet,
			trainerRetry: cfg.TrainerRetry,
			fleetPoll:    cfg.FleetPoll,
			fleetKick:    make(chan struct{}, 1),
			fleetDone:    make(chan struct{}),
			fleetSeen:    map[string]time.Time{},
			fleetLogged:  map[string]time.Time{},
		},
	}
	if s.fleet != nil {
		s.fleetWG.Add(1)
		go s.fleetLoop()
	}
	return s
}

// Store returns the service's store.
func (s *Service) Store() Store { return s.store }

// Load loads every stored bandit: its configuration, latest snapshot and
// training rows, and starts its agent. Loaded reports true once it has
// succeeded.
func (s *Service) Load(ctx context.Context) error {
	bs, err := s.store.ListBandits(ctx)
	if err != nil {
		return fmt.Errorf("load bandits: %w", err)
	}
	start := time.Now()
	for _, b := range bs {
		s.mu.RLock()
		_, have := s.agents[b.Name]
		s.mu.RUnlock()
		if have {
			continue
		}
		cfg, err := ParseConfig(migrateConfig(b.Config))
		if err != nil {
			return fmt.Errorf("load bandit %s: stored configuration: %w", b.Name, err)
		}
		a, err := s.startAgent(ctx, b, cfg)
		if err != nil {
			return err
		}
		st := a.Status()
		s.log.Info("bandit loaded", "bandit", b.Name, "policy", cfg.Policy.Kind, "model_version", st.ModelVersion, "rows", a.data.Len())
	}
	s.loaded.Store(true)
	s.log.Info("every bandit loaded", "bandits", len(bs), "seconds", time.Since(start).Seconds())
	return nil
}

// Loaded reports whether Load has finished.
func (s *Service) Loaded() bool { return s.loaded.Load() }

// loadAgent builds the agent of b and loads it from the store, with
// its candidate (loadShadow) when cfg has one.
func (s *Service) loadAgent(ctx context.Context, b *Bandit, cfg *Config) (*Agent, error) {
	a, err := newAgent(b, cfg, s.store, s.pool, s.nextSeed(), s.log, s.obs, s.step)
	if err != nil {
		return nil, err
	}
	if s.fleet != nil {
		a.fl = &agentFleet{fleet: s.fleet, elected: make(chan struct{})}
	}
	if err := a.load(ctx); err != nil {
		return nil, err
	}
	sh, err := s.loadShadow(ctx, b, cfg)
	if err != nil {
		return nil, fmt.Errorf("bandit %s: %w", cfg.Name, err)
	}
	a.shadow.Store(sh)
	return a, nil
}

// startAgent builds, loads and starts the agent of b and registers it.
func (s *Service) startAgent(ctx context.Context, b *Bandit, cfg *Config) (*Agent, error) {
	return s.registerAgent(ctx, b, cfg, false)
}

// registerAgent builds, loads and starts the agent of b and registers it
// under its name; an agent already registered there is kept and returned
// unless replace.
func (s *Service) registerAgent(ctx context.Context, b *Bandit, cfg *Config, replace bool) (*Agent, error) {
	a, err := s.loadAgent(ctx, b, cfg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if old, ok := s.agents[cfg.Name]; ok && !replace {
		s.mu.Unlock()
		return old, nil
	}
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, ErrUnavailable
	}
	s.agents[cfg.Name] = a
	s.mu.Unlock()
	a.start()
	s.kickFleet()
	return a, nil
}

// Create validates cfg (defaults filled in), stores the bandit and
// starts its agent. ErrExists if the name is taken; a *ValidationError
// if the configuration is invalid; ErrLimit if the service has
// ServiceConfig.MaxBandits bandits already.
func (s *Service) Create(ctx context.Context, cfg *Config) (*Agent, error) {
	if s.closed.Load() {
		return nil, ErrUnavailable
	}
	SetDefaults(cfg)
	if err := Validate(cfg); err != nil {
		return nil, err
	}
	return s.create(ctx, cfg, nil)
}

// create is Create of a configuration whose defaults are filled in and
// that is valid (SetDefaults and Validate, or ParseConfig, ran once);
// snap, when not nil, is stored as the bandit's snapshot before its
// agent loads (Import).
func (s *Service) create(ctx context.Context, cfg *Config, snap *Snapshot) (*Agent, error) {
	if s.closed.Load() {
		return nil, ErrUnavailable
	}
	if err := DecisionBudget(cfg); err != nil {
		return nil, err
	}
	if len(cfg.Arms) < MinArms {
		return nil, invalid("arms", fmt.Sprintf("%s, want at least %d arms", plural.Count(len(cfg.Arms), "arm", "arms"), MinArms))
	}
	s.mu.Lock()
	if n := len(s.agents) + s.creating; n >= s.maxBandits {
		s.mu.Unlock()
		return nil, fmt.Errorf("the service has %s, its limit: %w", plural.Count(n, "bandit", "bandits"), ErrLimit)
	}
	s.creating++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.creating--
		s.mu.Unlock()
	}()
	if cfg.Shadow != nil {
		cfg.Shadow.Since = shadowNow()
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	b := &Bandit{Name: cfg.Name, Config: raw}
	if err := s.store.CreateBandit(ctx, b); err != nil {
		return nil, err
	}
	if snap != nil {
		snap.Bandit = cfg.Name
		if err := s.store.SaveSnapshot(ctx, snap); err != nil {
			return nil, err
		}
	}
	stored, err := s.store.GetBandit(ctx, cfg.Name)
	if err != nil {
		return nil, err
	}
	a, err := s.startAgent(ctx, stored, cfg)
	if err == nil {
		s.announceChanged(ctx, cfg.Name)
		a.awaitElection(ctx, max(s.trainerRetry, 5*time.Second))
	}
	return a, err
}

// Agent returns the named bandit's agent: ErrNotFound if there is none,
// ErrUnavailable if the bandits are still loading.
func (s *Service) Agent(name string) (*Agent, error) {
	s.mu.RLock()
	a, ok := s.agents[name]
	s.mu.RUnlock()
	switch {
	case ok:
		return a, nil
	case !s.loaded.Load():
		return nil, fmt.Errorf("bandit %s: the service is still loading: %w", name, ErrUnavailable)
	}
	return nil, fmt.Errorf("bandit %s: %w", name, ErrNotFound)
}

// Agents returns every agent, ordered by name.
func (s *Service) Agents() []*Agent {
	s.mu.RLock()
	out := make([]*Agent, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, a)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Agent) int { return strings.Compare(a.name, b.name) })
	return out
}

// Close stops every agent's goroutines and the refinement workers and
// persists each agent's latest posterior. It does not close the store.
func (s *Service) Close(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, a := range s.Agents() {
		if err := a.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", a.name, err))
		}
	}
	s.pool.close()
	if s.fleet != nil {
		close(s.fleetDone)
		s.fleetWG.Wait()
	}
	return errors.Join(errs...)
}

// migrateConfig rewrites a stored configuration of an earlier release
// to the current fields: policy.max_reuse became policy.max_sample_uses,
// refinement.max_staleness policy.max_versions_behind, and
// policy.max_wait is gone (decisions never wait for refinement). Anything
// else, or JSON it cannot read, is returned as it is for ParseConfig to
// judge.
func migrateConfig(raw json.RawMessage) json.RawMessage {
	var c map[string]json.RawMessage
	if json.Unmarshal(raw, &c) != nil {
		return raw
	}
	var pol, ref map[string]json.RawMessage
	if json.Unmarshal(c["policy"], &pol) != nil || json.Unmarshal(c["refinement"], &ref) != nil {
		return raw
	}
	_, wait := pol["max_wait"]
	reuse, hasReuse := pol["max_reuse"]
	stale, hasStale := ref["max_staleness"]
	if !wait && !hasReuse && !hasStale {
		return raw
	}
	delete(pol, "max_wait")
	delete(pol, "max_reuse")
	delete(ref, "max_staleness")
	if _, ok := pol["max_sample_uses"]; hasReuse && !ok {
		pol["max_sample_uses"] = reuse
	}
	if _, ok := pol["max_versions_behind"]; hasStale && !ok {
		pol["max_versions_behind"] = stale
	}
	var err error
	if c["policy"], err = json.Marshal(pol); err != nil {
		return raw
	}
	if ref != nil {
		if c["refinement"], err = json.Marshal(ref); err != nil {
			return raw
		}
	}
	out, err := json.Marshal(c)
	if err != nil {
		return raw
	}
	return out
}

// lifeLocks are the mutexes of lockLife, one per name while in use.
type lifeLocks struct {
	mu sync.Mutex
	m  map[string]*lifeLock
}

type lifeLock struct {
	sync.Mutex
	users int // holders and waiters; guarded by lifeLocks.mu
}

// lockLife locks the changes of the named bandit and returns the unlock.
func (s *Service) lockLife(name string) (unlock func()) {
	l := &s.life
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*lifeLock{}
	}
	ll := l.m[name]
	if ll == nil {
		ll = &lifeLock{}
		l.m[name] = ll
	}
	ll.users++
	l.mu.Unlock()
	ll.Lock()
	return func() {
		ll.Unlock()
		l.mu.Lock()
		if ll.users--; ll.users == 0 {
			delete(l.m, name)
		}
		l.mu.Unlock()
	}
}
