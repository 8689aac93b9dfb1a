package bandit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Fleet is how the replicas of a service that share one store (several
// `refinery serve` processes on one PostgreSQL database) coordinate;
// store.Fleet implements it on PostgreSQL. A service without a fleet is
// the only one on its store and trains every bandit.
//
// What each replica holds and what is shared: decisions, rewards,
// bandits and snapshots are in the store, which every replica reads and
// writes (a reward is accepted by any replica: the store looks its
// decision up, wherever it was taken). Each replica holds in memory, per
// bandit, an agent: the configuration and encoder, the training rows read
// so far (its cursor), the published posterior and, for refined-ts, its
// bank of refined samples, refined by its own workers from the version
// it holds. One replica per bandit, the one holding the bandit's trainer
// lease (Lead), trains and persists posterior versions, each under the
// lease's fencing token (Snapshot.LeaseToken), so that a trainer whose
// lease another replica took cannot persist over it; the others
// follow: they read the rows too and install each version the trainer
// persists (every training.snapshot_every versions), told by Events or,
// failing that, by polling Versions.
type Fleet interface {
	// Lead makes this replica the trainer of as many of bandits as it
	// can and gives up the lead of every bandit it held that is not in
	// the list. It returns the bandits this replica trains now, each
	// with the fencing token of its lease (> 0), which the snapshots it
	// persists carry. It is called every ServiceConfig.TrainerRetry
	// and renews the leases it returns. An error means the replica
	// cannot tell (its lock session is lost): it trains none until a
	// later call succeeds.
	Lead(ctx context.Context, bandits []string) (map[string]int64, error)
	// Published tells every replica that version of bandit is stored.
	Published(ctx context.Context, bandit string, version int64) error
	// Changed tells every replica that bandit was created, changed or
	// deleted.
	Changed(ctx context.Context, bandit string) error
	// Events delivers what Published and Changed announce, from every
	// replica this one included, and a FleetResync event when
	// announcements may have been missed (the listening session was
	// lost and is back).
	Events() <-chan FleetEvent
	// Versions returns the newest stored snapshot version of every
	// bandit that has one: the poll that stands in for lost events.
	Versions(ctx context.Context) (map[string]int64, error)
	// Replicas lists the replicas seen lately, this one included, with
	// the bandits each trains, for the dashboard.
	Replicas(ctx context.Context) ([]Replica, error)
}

// Replica is one replica of a fleet as the others see it.
type Replica struct {
	// ID is random per process; Address is where it listens.
	ID      string `json:"id"`
	Address string `json:"address"`
	// This is true for the replica that answers.
	This      bool      `json:"this"`
	StartedAt time.Time `json:"started_at"`
	// LastSeen is its last election (every TrainerRetry while it lives).
	LastSeen time.Time `json:"last_seen"`
	// Trains names the bandits it trained then whose trainer lease it
	// still holds (none once a dead replica's leases expired or were
	// taken over).
	Trains []string `json:"trains"`
}

// Replicas lists the replicas of the service's fleet (Fleet.Replicas);
// nil without a fleet.
func (s *Service) Replicas(ctx context.Context) ([]Replica, error) {
	if s.fleet == nil {
		return nil, nil
	}
	return s.fleet.Replicas(ctx)
}

// FleetEventKind says what a FleetEvent announces.
type FleetEventKind int

const (
	// FleetPublished: Bandit's posterior Version is stored.
	FleetPublished FleetEventKind = iota
	// FleetChanged: Bandit was created, changed or deleted.
	FleetChanged
	// FleetResync: announcements may have been missed; poll now.
	FleetResync
)

// FleetEvent is one announcement of a Fleet.
type FleetEvent struct {
	Kind    FleetEventKind
	Bandit  string
	Version int64
}

// Defaults of ServiceConfig.TrainerRetry and FleetPoll.
const (
	DefaultTrainerRetry = time.Second
	DefaultFleetPoll    = 5 * time.Second
)

// agentFleet is an agent's part in a fleet.
type agentFleet struct {
	fleet Fleet
	// leading is set by the service's elections (Service.elect), and
	// token to the fencing token of the lease they got (0: none).
	leading atomic.Bool
	token   atomic.Int64
	// fenced is the token of the last lease the store refused a snapshot
	// under (fence); stale is set then, until the trainer goroutine
	// installs the newest stored version.
	fenced atomic.Int64
	stale  atomic.Bool
	// want is the newest version the fleet announced; the trainer
	// goroutine installs it unless it holds it already.
	want atomic.Int64
	// led is whether the trainer goroutine trained as the leader last
	// time; owned by it.
	led bool
	// elected is closed by the first election that decided whether this
	// replica trains the bandit (awaitElection).
	elected     chan struct{}
	electedOnce sync.Once
}

// fleetWork is the trainer goroutine's work in a fleet: the leader
// trains (after installing the newest stored version when it has just
// taken over, so that versions go on from it), the others follow.
func (a *Agent) fleetWork(ctx context.Context) error {
	if !a.fl.leading.Load() {
		a.fl.led = false
		if a.fl.stale.Load() {
			return a.unfence(ctx)
		}
		return a.follow(ctx, false)
	}
	if !a.fl.led {
		if err := a.follow(ctx, true); err != nil {
			return err
		}
		a.fl.led = true
		a.log.Info("this replica trains the bandit", "model_version", a.model.Load().version)
	}
	return a.trainOnce(ctx)
}

// follow reads the training rows stored since the cursor and, when the
// fleet announced a newer version than the published one (or always,
// with check), installs the store's newest snapshot if it is newer.
func (a *Agent) follow(ctx context.Context, check bool) error {
	cur := a.model.Load().version
	if check || a.fl.want.Load() > cur {
		snap, err := a.store.LatestSnapshot(ctx, a.name)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("follow %s: %w", a.name, err)
		case snap.Version > cur:
			prev := a.model.Load()
			if err := a.install(ctx, snap, true); err != nil {
				return err
			}
			a.followLag(prev)
			return nil
		}
	}
	_, err := a.readRows(ctx)
	return err
}

// followLag keeps TrainerLag true on a replica that follows: once it
// installs a version after prev, the rows that version has not seen were
// committed after the trainer read its rows, which was after it
// published prev, a moment before this replica installed prev
// (prev.trainedAt): the oldest pending reward is counted from then, or
// from the oldest this replica accepted since, whichever is later. None
// is pending when the version has seen every row read.
func (a *Agent) followLag(prev *model) {
	if m := a.model.Load(); m.rows >= a.data.Len() {
		a.pendingSince.Store(0)
		return
	}
	floor := prev.trainedAt
	if floor.IsZero() {
		floor = a.clock.Now()
	}
	if since := a.pendingSince.Load(); since < floor.UnixNano() {
		a.pendingSince.Store(floor.UnixNano())
	}
}

// announce tells the fleet that version is stored.
func (a *Agent) announce(ctx context.Context, version int64) {
	if a.fl == nil {
		return
	}
	if err := a.fl.fleet.Published(ctx, a.name, version); err != nil && ctx.Err() == nil {
		a.log.Warn("announcing a new posterior version failed; the other replicas will poll it", "version", version, "err", err)
	}
}

// Leading reports whether this replica trains the bandit: always
// without a fleet, when it holds the bandit's trainer lease in one.
func (a *Agent) Leading() bool { return a.fl == nil || a.fl.leading.Load() }

// fleetLoop runs the service's part in the fleet until Close: elections
// every TrainerRetry (and when an agent is added), the announcements of
// the other replicas, and polls every FleetPoll.
func (s *Service) fleetLoop() {
	defer s.fleetWG.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.fleetDone
		cancel()
	}()
	elect := time.NewTicker(s.trainerRetry)
	defer elect.Stop()
	poll := time.NewTicker(s.fleetPoll)
	defer poll.Stop()
	events := s.fleet.Events()
	s.elect(ctx)
	for {
		select {
		case <-s.fleetDone:
			return
		case <-elect.C:
			s.elect(ctx)
		case <-s.fleetKick:
			s.elect(ctx)
		case <-poll.C:
			s.poll(ctx)
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			switch ev.Kind {
			case FleetPublished:
				if a, err := s.Agent(ev.Bandit); err == nil && a.fl != nil && ev.Version > a.model.Load().version {
					a.fl.want.Store(ev.Version)
					a.notify()
				}
			case FleetChanged:
				s.reconcileLater(ev.Bandit)
			case FleetResync:
				s.poll(ctx)
			}
		}
	}
}

// kickFleet has the fleet loop hold an election now (a new agent).
func (s *Service) kickFleet() {
	if s.fleet == nil {
		return
	}
	select {
	case s.fleetKick <- struct{}{}:
	default:
	}
}

// elect takes the trainer leases of the bandits this replica can lead
// and gives up those of bandits it no longer has; each agent learns
// whether it trains.
func (s *Service) elect(ctx context.Context) {
	agents := s.Agents()
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = a.name
	}
	electCtx, cancel := context.WithTimeout(ctx, max(s.trainerRetry, 5*time.Second))
	defer cancel()
	lead, err := s.fleet.Lead(electCtx, names)
	if err != nil && ctx.Err() != nil {
		return // shutting down (Close): the agents are closed as they are
	}
	if err != nil && electCtx.Err() == nil {
		s.fleetErr("trainer election failed; this replica trains no bandit until it succeeds", err)
	}
	for _, a := range agents {
		token := lead[a.name]
		now := token > 0
		if now && token == a.fl.fenced.Load() {
			// The store refused this token already: the lease was lost
			// in between and the election is stale.
			now, token = false, 0
		}
		a.fl.token.Store(token)
		was := a.fl.leading.Swap(now)
		if was && !now {
			a.log.Warn("this replica no longer trains the bandit")
		}
		if now || was {
			// Rewards accepted by the other replicas wake no trainer
			// here: the trainer reads the rows at least this often.
			a.notify()
		}
		if err == nil {
			a.fl.electedOnce.Do(func() { close(a.fl.elected) })
		}
	}
}

// awaitElection waits, at most d, until an election has decided whether
// this replica trains a (kickFleet asks for one), so that the answer to
// the bandit's creation says "trainer": true when it is, instead of false
// until the next election a moment later (issue 30, polish).
func (a *Agent) awaitElection(ctx context.Context, d time.Duration) {
	if a.fl == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-a.fl.elected:
	case <-ctx.Done():
	case <-t.C:
	}
}

// poll stands in for announcements that were lost: newer snapshot
// versions, and bandits created, changed or deleted elsewhere.
func (s *Service) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(s.fleetPoll, 5*time.Second))
	defer cancel()
	vs, err := s.fleet.Versions(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.fleetErr("polling the posterior versions failed", err)
		}
		return
	}
	for _, a := range s.Agents() {
		if v := vs[a.name]; a.fl != nil && v > a.model.Load().version {
			a.fl.want.Store(v)
			a.notify()
		}
	}
	if !s.loaded.Load() {
		// Load is loading the stored bandits; a reconciliation now would
		// load them a second time, as if made on another replica.
		return
	}
	bs, err := s.store.ListBandits(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.fleetErr("polling the bandits failed", err)
		}
		return
	}
	stored := map[string]bool{}
	for _, b := range bs {
		stored[b.Name] = true
		s.mu.RLock()
		seen, ok := s.fleetSeen[b.Name]
		s.mu.RUnlock()
		if !ok || !seen.Equal(b.UpdatedAt) {
			s.reconcileLater(b.Name)
		}
	}
	for _, a := range s.Agents() {
		if !stored[a.name] {
			s.reconcileLater(a.name)
		}
	}
}

// fleetErr logs a fleet failure, the same one at most once a minute.
func (s *Service) fleetErr(msg string, err error) {
	s.mu.Lock()
	last, ok := s.fleetLogged[msg]
	if !ok || time.Since(last) >= time.Minute {
		s.fleetLogged[msg] = time.Now()
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		s.log.Error(msg, "err", err)
	}
}

// reconcileLater brings the named bandit's agent in line with the store
// in a goroutine of its own, so that loading a bandit never holds up
// the elections.
func (s *Service) reconcileLater(name string) {
	s.fleetWG.Add(1)
	go func() {
		defer s.fleetWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.reconcile(ctx, name); err != nil && !s.closed.Load() {
			s.log.Error("following a change of the bandit made on another replica failed; the next poll retries", "bandit", name, "err", err)
		}
	}()
}

// reconcile brings the named bandit's agent in line with the stored
// bandit, after a change made on any replica: a new bandit is loaded, a
// deleted one stopped, an archived one archived, a change of settings
// that apply in place applied (Agent.reconfigure), any other changed
// configuration loaded anew (with the posterior the changing replica
// stored, Service.Update).
func (s *Service) reconcile(ctx context.Context, name string) error {
	defer s.lockLife(name)()
	if s.closed.Load() {
		return nil
	}
	b, err := s.store.GetBandit(ctx, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	s.mu.RLock()
	a, have := s.agents[name]
	s.mu.RUnlock()
	if b == nil {
		if have {
			a.stop()
			s.mu.Lock()
			if s.agents[name] == a {
				delete(s.agents, name)
			}
			delete(s.fleetSeen, name)
			s.mu.Unlock()
			s.log.Info("bandit deleted on another replica", "bandit", name)
		}
		return nil
	}
	cfg, err := ParseConfig(migrateConfig(b.Config))
	if err != nil {
		return fmt.Errorf("stored configuration: %w", err)
	}
	switch {
	case !have:
		if _, err := s.startAgent(ctx, b, cfg); err != nil {
			return err
		}
		if s.loaded.Load() {
			s.log.Info("bandit created on another replica", "bandit", name)
		} else {
			// Announced while Load runs: it may be an old one.
			s.log.Info("bandit loaded", "bandit", name, "policy", cfg.Policy.Kind)
		}
	case sameConfig(a.Config(), *cfg):
		a.setArchived(b.ArchivedAt)
	case a.changesInPlace(cfg):
		a.reconfigure(cfg)
		a.setArchived(b.ArchivedAt)
	default:
		// The replica that changed the bandit stored what the new agent
		// loads (with a grown posterior, Service.Update): this one's is
		// not persisted over it.
		a.stop()
		if _, err := s.replaceAgent(ctx, b, cfg); err != nil {
			return s.reinstate(a, err)
		}
		s.log.Info("bandit changed on another replica", "bandit", name)
	}
	s.mu.Lock()
	s.fleetSeen[name] = b.UpdatedAt
	s.mu.Unlock()
	return nil
}

// sameConfig reports whether two configurations are the same.
func sameConfig(a, b Config) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// announceChanged tells the fleet that the named bandit changed.
func (s *Service) announceChanged(ctx context.Context, name string) {
	if s.fleet == nil {
		return
	}
	if err := s.fleet.Changed(context.WithoutCancel(ctx), name); err != nil {
		s.log.Warn("announcing a change of the bandit failed; the other replicas will poll it", "bandit", name, "err", err)
	}
}

// fleetState is the Service's part in a fleet; see fleetLoop.
type fleetState struct {
	fleet        Fleet
	trainerRetry time.Duration
	fleetPoll    time.Duration
	fleetKick    chan struct{}
	fleetDone    chan struct{}
	fleetWG      sync.WaitGroup
	// fleetSeen is each bandit's UpdatedAt when it was last reconciled;
	// fleetLogged when each fleet failure was last logged. Guarded by
	// Service.mu.
	fleetSeen   map[string]time.Time
	fleetLogged map[string]time.Time
}
