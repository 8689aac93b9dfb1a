package api

import (
	"context"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// DefaultShadowEstimateInterval is Config.ShadowEstimateInterval's
// default: a busy bandit's estimate (two pages of its log) is made at
// most every 2 s however many clients GET it and dashboards poll it.
const DefaultShadowEstimateInterval = 2 * time.Second

// shadowCache keeps the newest shadow estimate of each bandit, so that
// GET /v1/bandits/{name} and the dashboard do not read the newest
// simulators.ShadowWindow decisions again on every request. An estimate
// is reused while the bandit's candidate (its since) and its decision
// and reward counts are those it was made at, and also, when they have
// changed, until it is interval old; a negative interval reuses none.
// One estimate of a bandit is made at a time: requests that miss
// together wait for it and share it. It is safe for concurrent use.
type shadowCache struct {
	estimate ShadowEstimator
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	bandits map[string]*shadowEntry
}

// shadowEntry is one bandit's estimate and what it was made at; mu is
// held while it is made.
type shadowEntry struct {
	mu                 sync.Mutex
	since              time.Time
	decisions, rewards int64
	at                 time.Time
	est                *bandit.ShadowEstimate
}

// get returns the estimate of the named bandit's candidate set at since,
// with decisions and rewards its current counts: the cached one when it
// may be reused, else a new one. The estimate is shared: callers must not
// modify it.
func (c *shadowCache) get(ctx context.Context, st bandit.Store, name string, since time.Time, decisions, rewards int64) (*bandit.ShadowEstimate, error) {
	if c.interval < 0 {
		return c.estimate(ctx, st, name, since)
	}
	c.mu.Lock()
	e := c.bandits[name]
	if e == nil {
		e = &shadowEntry{}
		c.bandits[name] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	now := c.now()
	if e.est != nil && e.since.Equal(since) &&
		(e.decisions == decisions && e.rewards == rewards || now.Sub(e.at) < c.interval) {
		return e.est, nil
	}
	est, err := c.estimate(ctx, st, name, since)
	if err != nil {
		return nil, err
	}
	e.since, e.decisions, e.rewards, e.at, e.est = since, decisions, rewards, now, est
	return est, nil
}

// forget drops the named bandit's estimate (the bandit was deleted).
func (c *shadowCache) forget(name string) {
	c.mu.Lock()
	delete(c.bandits, name)
	c.mu.Unlock()
}
