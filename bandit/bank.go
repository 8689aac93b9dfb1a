package bandit

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/nn"
)

// refined is one locally refined posterior sample in a bank: a full
// weight vector, read-only once banked and made ready for the fast engine
// (it serves many decisions), tagged with the posterior version it was
// refined from and the time it was banked.
type refined struct {
	version int64
	w       *nn.Weights
	std     nn.Standardization // of the posterior it was refined from
	at      time.Time
	uses    int
}

// bankBounds are the operator's bounds on the use of one refined sample
// (policy.max_sample_uses, max_sample_age, max_versions_behind).
type bankBounds struct {
	maxUses   int
	maxAge    time.Duration
	maxBehind int64
}

// bank is a bounded store of refined samples for one bandit. Refinement
// workers put samples in; decisions take them without ever waiting. A
// sample is usable while it has served fewer than maxUses decisions, is
// at most maxAge old and at most maxBehind versions behind the newest
// published posterior. Samples that leave the bank for these bounds are
// kept aside, the freshest few, for the decisions that find fewer usable
// samples than they need: those act on the freshest refined samples past
// their bounds (and say so) rather than fall back to mean-field samples,
// which happens only before the bank's first samples.
type bank struct {
	mu       sync.Mutex
	samples  []*refined // usable (up to the last prune), oldest first
	retired  []*refined // past their bounds, freshest first, at most capacity
	capacity int
	bounds   bankBounds
	clock    Clock
	version  int64 // newest published posterior version
	inflight int   // samples being refined for this bank
	// onSpace, if set, is called (without b.mu) when room frees up.
	onSpace func()
	// Counters read by Status.
	produced, discarded, used, reused, beyond int64
}

func newBank(capacity int, bounds bankBounds, clock Clock) *bank {
	return &bank{capacity: capacity, bounds: bounds, clock: clock}
}

// fresh reports whether s may still serve a decision at now; b.mu is
// held.
func (b *bank) fresh(s *refined, now time.Time) bool {
	return s.version >= b.version-b.bounds.maxBehind && now.Sub(s.at) <= b.bounds.maxAge && s.uses < b.bounds.maxUses
}

// prune moves the samples past their bounds aside; b.mu is held. It
// returns how many.
func (b *bank) prune(now time.Time) int {
	n := 0
	kept := b.samples[:0]
	for _, s := range b.samples {
		if b.fresh(s, now) {
			kept = append(kept, s)
		} else {
			b.retire(s)
			n++
		}
	}
	clear(b.samples[len(kept):])
	b.samples = kept
	return n
}

// retire keeps s among the freshest samples past their bounds; b.mu is
// held.
func (b *bank) retire(s *refined) {
	if s.uses == 0 {
		b.discarded++
	}
	b.retired = append(b.retired, s)
	slices.SortStableFunc(b.retired, func(x, y *refined) int {
		return cmp.Or(cmp.Compare(y.version, x.version), y.at.Compare(x.at))
	})
	if len(b.retired) > b.capacity {
		clear(b.retired[b.capacity:])
		b.retired = b.retired[:b.capacity]
	}
}

// setBounds replaces the bank's bounds (a PATCH of the bandit's
// policy, Agent.reconfigure): the samples banked stay, and those past
// the new bounds are moved aside at once.
func (b *bank) setBounds(bounds bankBounds) {
	b.mu.Lock()
	b.bounds = bounds
	pruned := b.prune(b.clock.Now())
	b.mu.Unlock()
	if pruned > 0 && b.onSpace != nil {
		b.onSpace()
	}
}

// setVersion records a newly published posterior version and moves the
// samples it makes too old aside.
func (b *bank) setVersion(v int64) {
	b.mu.Lock()
	if v <= b.version {
		b.mu.Unlock()
		return
	}
	b.version = v
	b.prune(b.clock.Now())
	b.mu.Unlock()
	if b.onSpace != nil {
		b.onSpace()
	}
}

// reserve claims room for one sample being refined; false if the bank
// is full (counting samples in flight).
func (b *bank) reserve() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(b.clock.Now())
	if len(b.samples)+b.inflight >= b.capacity {
		return false
	}
	b.inflight++
	return true
}

// put ends a reservation with a finished sample (w nil: the refinement
// failed or was abandoned). A sample already past its bounds is
// discarded; put reports whether the sample was kept.
func (b *bank) put(version int64, w *nn.Weights, std nn.Standardization) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	if w == nil {
		return false
	}
	s := &refined{version: version, w: w, std: std, at: b.clock.Now()}
	if !b.fresh(s, s.at) {
		b.discarded++
		return false
	}
	b.samples = append(b.samples, s)
	b.produced++
	return true
}

// usable returns the number of samples a decision could take now.
func (b *bank) usable() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(b.clock.Now())
	return len(b.samples)
}

// taken describes the samples one decision acts on.
type taken struct {
	// got are the decision's samples; pool is got followed by the other
	// usable samples (not consumed), from which got was a uniform draw.
	got, pool []*refined
	// beyond: the bank had fewer usable samples than the decision
	// needs, and got holds the freshest samples past their bounds.
	beyond bool
	// uses is the mean number of decisions got's samples have served,
	// this one included; age the oldest's age; behind how many versions
	// the oldest is behind the newest published.
	uses   float64
	age    time.Duration
	behind int64
}

// take returns n distinct refined samples for one decision, without
// waiting: n drawn uniformly at random with rng among the usable samples,
// with the rest of them as the pool a propensity estimate must resample
// from the same way (policy.ThompsonVote); or, when fewer than n are
// usable, those and the freshest samples past their bounds (beyond).
// Each use counts against the sample's bound. ok is false when the bank
// has never had n samples: the decision must use mean-field samples.
//
// Contract: take is safe for concurrent use and never waits for a
// refinement (b.mu is held for the draw only). The samples it returns
// are shared, read-only, by every decision that takes them: never modify
// their weights; they stay valid after take returns (nothing reuses them).
func (b *bank) take(n int, rng *rand.Rand) (t taken, ok bool) {
	b.mu.Lock()
	now := b.clock.Now()
	b.prune(now)
	switch {
	case len(b.samples) >= n:
		// A partial Fisher-Yates shuffle of a copy: its first n are a
		// uniform draw without replacement.
		t.pool = slices.Clone(b.samples)
		for i := range n {
			j := i + rng.IntN(len(t.pool)-i)
			t.pool[i], t.pool[j] = t.pool[j], t.pool[i]
		}
		t.got = t.pool[:n:n]
	case len(b.samples)+len(b.retired) >= n:
		t.beyond = true
		t.got = slices.Concat(b.samples, b.retired[:n-len(b.samples)])
		t.pool = t.got
		b.beyond++
	default:
		b.mu.Unlock()
		return taken{}, false
	}
	t.age, t.behind = 0, 0
	for _, s := range t.got {
		s.uses++
		b.used++
		if s.uses > 1 {
			b.reused++
		}
		t.uses += float64(s.uses) / float64(n)
		t.age = max(t.age, now.Sub(s.at))
		t.behind = max(t.behind, b.version-s.version)
	}
	pruned := b.prune(now)
	b.mu.Unlock()
	if pruned > 0 && b.onSpace != nil {
		b.onSpace()
	}
	return t, true
}

// bankStatus is a bank's state for the status endpoint and metrics.
type bankStatus struct {
	Depth, InFlight                           int
	Produced, Discarded, Used, Reused, Beyond int64
}

func (b *bank) status() bankStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.prune(b.clock.Now())
	return bankStatus{Depth: len(b.samples), InFlight: b.inflight, Produced: b.produced, Discarded: b.discarded, Used: b.used, Reused: b.reused, Beyond: b.beyond}
}
