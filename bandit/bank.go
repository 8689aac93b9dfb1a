package bandit

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/nn"
)

// refined is one locally refined posterior sample in a bank: a full
// weight vector, read-only once banked, tagged with the posterior version
// it was refined from.
type refined struct {
	version int64
	w       []float64
	std     nn.Standardization // of the posterior it was refined from
	uses    int
}

// bank is a bounded store of refined samples for one bandit. Refinement
// workers put samples in; decisions take them out. A sample serves at
// most maxReuse decisions and is dropped once it is more than
// maxStale versions behind the newest published posterior.
type bank struct {
	mu       sync.Mutex
	samples  []*refined // oldest first
	capacity int
	maxReuse int
	maxStale int64
	version  int64 // newest published posterior version
	inflight int   // samples being refined for this bank
	changed  chan struct{}
	// onSpace, if set, is called (without b.mu) when room frees up.
	onSpace func()
	// Counters read by Status.
	produced, discarded, used, reused int64
}

func newBank(capacity, maxReuse, maxStale int) *bank {
	return &bank{capacity: capacity, maxReuse: maxReuse, maxStale: int64(maxStale), changed: make(chan struct{})}
}

// signal wakes every waiting taker; b.mu is held.
func (b *bank) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// fresh reports whether a sample of version v may still be used; b.mu
// is held.
func (b *bank) fresh(v int64) bool { return v >= b.version-b.maxStale }

// dropStale removes stale samples; b.mu is held. It returns how many.
func (b *bank) dropStale() int {
	n := 0
	kept := b.samples[:0]
	for _, s := range b.samples {
		if b.fresh(s.version) {
			kept = append(kept, s)
		} else {
			n++
		}
	}
	clear(b.samples[len(kept):])
	b.samples = kept
	b.discarded += int64(n)
	return n
}

// setVersion records a newly published posterior version and drops the
// samples it makes stale.
func (b *bank) setVersion(v int64) {
	b.mu.Lock()
	if v <= b.version {
		b.mu.Unlock()
		return
	}
	b.version = v
	b.dropStale()
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
	if len(b.samples)+b.inflight >= b.capacity {
		return false
	}
	b.inflight++
	return true
}

// needs reports whether the bank has room for another sample.
func (b *bank) needs() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.samples)+b.inflight < b.capacity
}

// put ends a reservation with a finished sample (w nil: the refinement
// failed or was abandoned). A stale sample is discarded; put reports
// whether the sample was kept.
func (b *bank) put(version int64, w []float64, std nn.Standardization) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inflight--
	if w == nil {
		return false
	}
	if !b.fresh(version) {
		b.discarded++
		return false
	}
	b.samples = append(b.samples, &refined{version: version, w: w, std: std})
	b.produced++
	b.signal()
	return true
}

// take returns n distinct refined samples for one decision, chosen
// uniformly at random with rng among the usable samples, waiting up to
// wait for the bank to hold n of them, and the other usable samples (at
// most extra), not consumed. The chosen samples are thus a uniform draw
// from got ∪ others, the pool a propensity estimate must resample from
// the same way (policy.ThompsonVote). Each use counts against the
// sample's maxReuse; used-up samples leave the bank. ok is false when the
// bank did not have n in time (or ctx ended): nothing is consumed.
func (b *bank) take(ctx context.Context, n, extra int, wait time.Duration, rng *rand.Rand) (got, others []*refined, ok bool) {
	deadline := time.Now().Add(wait)
	var timer *time.Timer
	b.mu.Lock()
	for {
		b.dropStale()
		if len(b.samples) >= n {
			break
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			b.mu.Unlock()
			return nil, nil, false
		}
		ch := b.changed
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(remaining)
			defer timer.Stop()
		}
		select {
		case <-ch:
		case <-timer.C:
		case <-ctx.Done():
			return nil, nil, false
		}
		b.mu.Lock()
	}
	// A partial Fisher-Yates shuffle of a copy: its first n are a
	// uniform draw without replacement.
	pool := slices.Clone(b.samples)
	for i := range n {
		j := i + rng.IntN(len(pool)-i)
		pool[i], pool[j] = pool[j], pool[i]
	}
	got = pool[:n:n]
	others = pool[n:min(len(pool), n+extra)]
	for _, s := range got {
		s.uses++
		b.used++
		if s.uses > 1 {
			b.reused++
		}
	}
	kept := b.samples[:0]
	for _, s := range b.samples {
		if s.uses < b.maxReuse {
			kept = append(kept, s)
		}
	}
	clear(b.samples[len(kept):])
	b.samples = kept
	b.mu.Unlock()
	if b.onSpace != nil {
		b.onSpace()
	}
	return got, others, true
}

// bankStatus is a bank's state for the status endpoint and metrics.
type bankStatus struct {
	Depth, InFlight                   int
	Produced, Discarded, Used, Reused int64
}

func (b *bank) status() bankStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bankStatus{Depth: len(b.samples), InFlight: b.inflight, Produced: b.produced, Discarded: b.discarded, Used: b.used, Reused: b.reused}
}

// usable returns the number of samples a decision could take now.
func (b *bank) usable() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.dropStale()
	return len(b.samples)
}
