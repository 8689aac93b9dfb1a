package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
)

// Memory is a bandit.Store that keeps everything in the process's memory.
// It is what `refinery serve` uses without a database URL, and what
// simulations use.
//
// It is honest about what it is: nothing survives the process, and
// Ephemeral reports true so that the service can say so. Otherwise it
// behaves as Postgres does (the same contract suite runs against both),
// and it is safe for concurrent use. Every write is visible to every
// read as soon as it returns.
type Memory struct {
	mu      sync.RWMutex
	closed  bool
	bandits map[string]*memBandit
	seq     int64 // last reward sequence number handed out, over all bandits
	keys    []*keys.Key
}

var _ bandit.Store = (*Memory)(nil)

type memBandit struct {
	b         *bandit.Bandit
	decisions map[string]*memDecision // by event ID
	// byTime holds the decisions in (CreatedAt, id) order for paging.
	byTime []*memDecision
	// rewards holds the rewards in seq order for the trainer.
	rewards   []*memDecision
	snapshots map[int64]*bandit.Snapshot
	latest    *bandit.Snapshot
	nextID    int64
	// deleted marks a bandit deleted without purge: its decisions and
	// rewards are kept and its name stays taken (DeleteBandit).
	deleted bool
}

type memDecision struct {
	d      *bandit.Decision
	id     int64 // insertion order, the tie-breaker of equal times
	reward *bandit.Reward
	seq    int64
}

// before reports whether a sorts before b in (CreatedAt, id) order.
func (a *memDecision) before(b *memDecision) bool {
	if c := a.d.CreatedAt.Compare(b.d.CreatedAt); c != 0 {
		return c < 0
	}
	return a.id < b.id
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{bandits: map[string]*memBandit{}}
}

// Ephemeral reports true: the in-memory store loses everything on exit.
func (m *Memory) Ephemeral() bool { return true }

// Ping reports ErrClosed after Close and nil otherwise.
func (m *Memory) Ping(context.Context) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return ErrClosed
	}
	return nil
}

// Close makes every later write fail with ErrClosed. Reads keep working,
// so that a service shutting down can still answer them. There is
// nothing to flush.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

// bandit returns the named bandit; the caller holds m.mu.
func (m *Memory) bandit(name string) (*memBandit, error) {
	mb, ok := m.bandits[name]
	if !ok || mb.deleted {
		return nil, bandit.ErrNotFound
	}
	return mb, nil
}

// CreateBandit stores a new bandit; bandit.ErrExists if the name is taken.
func (m *Memory) CreateBandit(_ context.Context, b *bandit.Bandit) error {
	nb, err := normBandit(b, now())
	if err != nil {
		return fmt.Errorf("store: create bandit: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if mb, ok := m.bandits[nb.Name]; ok {
		if mb.deleted {
			return fmt.Errorf("store: create bandit %s: %w: %w", nb.Name, bandit.ErrExists, bandit.ErrDeleted)
		}
		return fmt.Errorf("store: create bandit %s: %w", nb.Name, bandit.ErrExists)
	}
	m.bandits[nb.Name] = &memBandit{b: nb, decisions: map[string]*memDecision{}, snapshots: map[int64]*bandit.Snapshot{}}
	return nil
}

// UpdateBandit replaces a bandit's configuration; bandit.ErrNotFound if
// there is none.
func (m *Memory) UpdateBandit(_ context.Context, b *bandit.Bandit) error {
	nb, err := normBandit(b, now())
	if err != nil {
		return fmt.Errorf("store: update bandit: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	mb, err := m.bandit(nb.Name)
	if err != nil {
		return fmt.Errorf("store: update bandit %s: %w", nb.Name, err)
	}
	nb.CreatedAt = mb.b.CreatedAt
	if !b.ArchivedAt.IsZero() {
		nb.ArchivedAt = instant(b.ArchivedAt)
	}
	mb.b = nb
	return nil
}

// GetBandit returns one bandit; bandit.ErrNotFound if there is none.
func (m *Memory) GetBandit(_ context.Context, name string) (*bandit.Bandit, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return nil, fmt.Errorf("store: get bandit %s: %w", name, err)
	}
	return cloneBandit(mb.b), nil
}

// ListBandits returns every bandit ordered by name.
func (m *Memory) ListBandits(context.Context) ([]*bandit.Bandit, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]*bandit.Bandit, 0, len(m.bandits))
	for _, mb := range m.bandits {
		if !mb.deleted {
			out = append(out, cloneBandit(mb.b))
		}
	}
	slices.SortFunc(out, func(a, b *bandit.Bandit) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// InsertDecision stores d unless its event ID exists; see bandit.Store.
func (m *Memory) InsertDecision(_ context.Context, d *bandit.Decision) (*bandit.Decision, bool, error) {
	nd, err := normDecision(d)
	if err != nil {
		return nil, false, fmt.Errorf("store: insert decision: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.insertDecisionLocked(nd)
}

// InsertDecisions stores each of ds unless its event ID exists, under
// one hold of the lock; see bandit.Store. Nothing is stored when one of
// ds is not valid.
func (m *Memory) InsertDecisions(_ context.Context, ds []*bandit.Decision) ([]*bandit.Decision, []bool, error) {
	nds := make([]*bandit.Decision, len(ds))
	for i, d := range ds {
		nd, err := normDecision(d)
		if err != nil {
			return nil, nil, fmt.Errorf("store: insert decision: %w", err)
		}
		nds[i] = nd
	}
	stored, created := make([]*bandit.Decision, len(ds)), make([]bool, len(ds))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, nd := range nds {
		var err error
		if stored[i], created[i], err = m.insertDecisionLocked(nd); err != nil {
			return nil, nil, err
		}
	}
	return stored, created, nil
}

// insertDecisionLocked stores nd (normDecision's) unless its event ID
// exists; m.mu is held.
func (m *Memory) insertDecisionLocked(nd *bandit.Decision) (*bandit.Decision, bool, error) {
	if m.closed {
		return nil, false, ErrClosed
	}
	mb, err := m.bandit(nd.Bandit)
	if err != nil {
		return nil, false, fmt.Errorf("store: insert decision %s/%s: %w", nd.Bandit, nd.EventID, err)
	}
	if old, ok := mb.decisions[nd.EventID]; ok {
		return cloneDecision(old.d), false, nil
	}
	mb.nextID++
	md := &memDecision{d: nd, id: mb.nextID}
	mb.decisions[nd.EventID] = md
	i := sort.Search(len(mb.byTime), func(i int) bool { return md.before(mb.byTime[i]) })
	mb.byTime = slices.Insert(mb.byTime, i, md)
	return cloneDecision(nd), true, nil
}

// GetDecision returns one decision; bandit.ErrNotFound if there is none.
func (m *Memory) GetDecision(_ context.Context, name, eventID string) (*bandit.Decision, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return nil, fmt.Errorf("store: get decision %s/%s: %w", name, eventID, err)
	}
	md, ok := mb.decisions[eventID]
	if !ok {
		return nil, fmt.Errorf("store: get decision %s/%s: %w", name, eventID, bandit.ErrNotFound)
	}
	return cloneDecision(md.d), nil
}

// InsertReward stores the reward of a decision; see bandit.Store.
func (m *Memory) InsertReward(_ context.Context, r *bandit.Reward) error {
	nr, err := normReward(r)
	if err != nil {
		return fmt.Errorf("store: insert reward: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	mb, err := m.bandit(nr.Bandit)
	if err != nil {
		return fmt.Errorf("store: insert reward %s/%s: %w", nr.Bandit, nr.EventID, err)
	}
	md, ok := mb.decisions[nr.EventID]
	if !ok {
		return fmt.Errorf("store: insert reward %s/%s: %w", nr.Bandit, nr.EventID, bandit.ErrNotFound)
	}
	if md.reward != nil {
		if md.reward.Value != nr.Value {
			return fmt.Errorf("store: insert reward %s/%s: value %v, stored %v: %w",
				nr.Bandit, nr.EventID, nr.Value, md.reward.Value, bandit.ErrConflict)
		}
		return nil
	}
	m.seq++
	md.reward, md.seq = nr, m.seq
	mb.rewards = append(mb.rewards, md)
	return nil
}

// trainingChunk is how many rows TrainingRows copies per lock.
const trainingChunk = 1024

// TrainingRows calls fn for each rewarded decision with Seq > after, in
// Seq order, with the Context of rows encoded narrower than dim. It does
// not hold the store's lock while fn runs, so fn may use the store; rows
// rewarded meanwhile are included.
func (m *Memory) TrainingRows(ctx context.Context, name string, after int64, dim int, fn func(bandit.TrainingRow) error) error {
	rows := make([]bandit.TrainingRow, 0, trainingChunk)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		rows = rows[:0]
		m.mu.RLock()
		mb, err := m.bandit(name)
		if err != nil {
			m.mu.RUnlock()
			return fmt.Errorf("store: training rows %s: %w", name, err)
		}
		i := sort.Search(len(mb.rewards), func(i int) bool { return mb.rewards[i].seq > after })
		for ; i < len(mb.rewards) && len(rows) < trainingChunk; i++ {
			md := mb.rewards[i]
			r := bandit.TrainingRow{Seq: md.seq, Encoded: cloneFloats(md.d.Encoded), Arm: md.d.Arm, Reward: md.reward.Value}
			if len(r.Encoded) < dim {
				r.Context = md.d.Context
			}
			rows = append(rows, r)
		}
		m.mu.RUnlock()
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
			after = r.Seq
		}
		if len(rows) < trainingChunk {
			return nil
		}
	}
}

// Unrewarded returns up to limit decisions created before the given time
// that have no reward, oldest first.
func (m *Memory) Unrewarded(_ context.Context, name string, before time.Time, limit int) ([]*bandit.Decision, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return nil, fmt.Errorf("store: unrewarded %s: %w", name, err)
	}
	var out []*bandit.Decision
	// A scan from the oldest decision: fine for what the in-memory store
	// is for, where PostgreSQL uses a partial index.
	for _, md := range mb.byTime {
		if len(out) >= limit || !md.d.CreatedAt.Before(before) {
			break
		}
		if md.reward == nil {
			out = append(out, cloneDecision(md.d))
		}
	}
	return out, nil
}

// ListDecisions returns up to limit decisions created before the cursor
// (zero: from the newest), newest first, with their rewards.
func (m *Memory) ListDecisions(_ context.Context, name string, before time.Time, limit int) ([]*bandit.DecisionRecord, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return nil, fmt.Errorf("store: list decisions %s: %w", name, err)
	}
	i := len(mb.byTime)
	if !before.IsZero() {
		i = sort.Search(len(mb.byTime), func(i int) bool { return !mb.byTime[i].d.CreatedAt.Before(before) })
	}
	var out []*bandit.DecisionRecord
	for i--; i >= 0 && len(out) < limit; i-- {
		md := mb.byTime[i]
		rec := &bandit.DecisionRecord{Decision: *cloneDecision(md.d)}
		if md.reward != nil {
			r := *md.reward
			rec.Reward = &r
		}
		out = append(out, rec)
	}
	return out, nil
}

// Counts returns how many decisions and rewards the bandit has.
func (m *Memory) Counts(_ context.Context, name string) (decisions, rewards int64, err error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return 0, 0, fmt.Errorf("store: counts %s: %w", name, err)
	}
	return int64(len(mb.decisions)), int64(len(mb.rewards)), nil
}

// SaveSnapshot stores a snapshot, replacing one of the same version;
// bandit.ErrNotFound if the bandit does not exist. Its LeaseToken is
// kept and never refused: the in-memory store's leases are always held
// (HoldLeases).
func (m *Memory) SaveSnapshot(_ context.Context, s *bandit.Snapshot) error {
	ns, err := normSnapshot(s)
	if err != nil {
		return fmt.Errorf("store: save snapshot: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	mb, err := m.bandit(ns.Bandit)
	if err != nil {
		return fmt.Errorf("store: save snapshot %s@%d: %w", ns.Bandit, ns.Version, err)
	}
	mb.snapshots[ns.Version] = ns
	if mb.latest == nil || ns.Version >= mb.latest.Version {
		mb.latest = ns
	}
	return nil
}

// LatestSnapshot returns the snapshot of the highest version;
// bandit.ErrNotFound if the bandit has none.
func (m *Memory) LatestSnapshot(_ context.Context, name string) (*bandit.Snapshot, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err == nil && mb.latest == nil {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: latest snapshot %s: %w", name, err)
	}
	return cloneSnapshot(mb.latest), nil
}

// DeleteBandit deletes a bandit; see bandit.Store. Without purge the
// bandit's decisions and rewards are kept (and its name taken), as in
// PostgreSQL, though nothing here can read them back: the in-memory
// store has no export.
func (m *Memory) DeleteBandit(_ context.Context, name string, purge bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	mb, ok := m.bandits[name]
	if !ok || (mb.deleted && !purge) {
		return fmt.Errorf("store: delete bandit %s: %w", name, bandit.ErrNotFound)
	}
	if purge {
		delete(m.bandits, name)
		return nil
	}
	mb.deleted = true
	mb.snapshots, mb.latest = map[int64]*bandit.Snapshot{}, nil
	return nil
}

// record returns md with its reward as the caller's copy.
func (md *memDecision) record() *bandit.DecisionRecord {
	rec := &bandit.DecisionRecord{Decision: *cloneDecision(md.d), ID: md.id}
	if md.reward != nil {
		r := *md.reward
		rec.Reward = &r
	}
	return rec
}

// Decisions returns a page of the bandit's decisions; see bandit.Store.
func (m *Memory) Decisions(_ context.Context, name string, q bandit.DecisionQuery) ([]*bandit.DecisionRecord, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("store: decisions %s: limit %d, want > 0", name, q.Limit)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return nil, fmt.Errorf("store: decisions %s: %w", name, err)
	}
	since, until := instantOrZero(q.Since), instantOrZero(q.Until)
	i := sort.Search(len(mb.byTime), func(i int) bool { return !mb.byTime[i].d.CreatedAt.Before(since) })
	if q.AfterID > 0 {
		after := &memDecision{d: &bandit.Decision{CreatedAt: instantOrZero(q.AfterTime)}, id: q.AfterID}
		i = max(i, sort.Search(len(mb.byTime), func(i int) bool { return after.before(mb.byTime[i]) }))
	}
	out := []*bandit.DecisionRecord{}
	for ; i < len(mb.byTime) && len(out) < q.Limit; i++ {
		md := mb.byTime[i]
		if !until.IsZero() && !md.d.CreatedAt.Before(until) {
			break
		}
		out = append(out, md.record())
	}
	return out, nil
}

// instantOrZero is instant but for the zero time, which stays zero.
func instantOrZero(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return instant(t)
}

// DecisionRecord returns one decision with its reward; bandit.ErrNotFound
// if there is none.
func (m *Memory) DecisionRecord(_ context.Context, name, eventID string) (*bandit.DecisionRecord, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	mb, err := m.bandit(name)
	if err != nil {
		return nil, fmt.Errorf("store: decision %s/%s: %w", name, eventID, err)
	}
	md, ok := mb.decisions[eventID]
	if !ok {
		return nil, fmt.Errorf("store: decision %s/%s: %w", name, eventID, bandit.ErrNotFound)
	}
	return md.record(), nil
}
