package api

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// countingEstimator is a ShadowEstimator that counts its calls and
// returns a new estimate for each (Decisions the call's number), or err.
type countingEstimator struct {
	calls atomic.Int64
	err   error
	gate  chan struct{} // when not nil, each call waits for it to close
}

func (c *countingEstimator) estimate(_ context.Context, _ bandit.Store, _ string, _ time.Time) (*bandit.ShadowEstimate, error) {
	n := c.calls.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if c.err != nil {
		return nil, c.err
	}
	return &bandit.ShadowEstimate{Decisions: int(n)}, nil
}

// The shadow cache reuses a bandit's estimate while its candidate and
// counts are unchanged, however old, and for the interval after they
// change; a new candidate, the interval passing, a negative interval or
// a failed estimate make a new one; requests that miss together share
// one estimate.
func TestShadowCacheReusesAsConfigured(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	since := t0.Add(-time.Hour)
	type step struct {
		what               string
		after              time.Duration // since t0
		since              time.Time
		decisions, rewards int64
		want               int // the estimate's number (Decisions)
	}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		steps    []step
	}{
		{"an unchanged log is reused however old its estimate", 2 * time.Second, []step{
			{"first", 0, since, 10, 5, 1},
			{"same counts an hour later", time.Hour, since, 10, 5, 1},
		}},
		{"a changed log is reused within the interval, estimated after it", 2 * time.Second, []step{
			{"first", 0, since, 10, 5, 1},
			{"a new reward 1 s later", time.Second, since, 10, 6, 1},
			{"another 2 s after the estimate", 2 * time.Second, since, 11, 6, 2},
			{"the same counts again", 3 * time.Second, since, 11, 6, 2},
		}},
		{"a new candidate is estimated at once", 2 * time.Second, []step{
			{"first", 0, since, 10, 5, 1},
			{"a candidate set now", time.Millisecond, t0, 10, 5, 2},
		}},
		{"a negative interval reuses nothing", -1, []step{
			{"first", 0, since, 10, 5, 1},
			{"same counts, same time", 0, since, 10, 5, 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			est := &countingEstimator{}
			now := t0
			c := &shadowCache{estimate: est.estimate, interval: tc.interval, now: func() time.Time { return now }, bandits: map[string]*shadowEntry{}}
			for _, s := range tc.steps {
				now = t0.Add(s.after)
				got, err := c.get(ctx, nil, "b", s.since, s.decisions, s.rewards)
				if err != nil || got.Decisions != s.want {
					t.Fatalf("%s: estimate %+v, %v; want estimate number %d", s.what, got, err, s.want)
				}
			}
		})
	}

	t.Run("a failed estimate is not kept", func(t *testing.T) {
		est := &countingEstimator{err: errors.New("store down")}
		c := &shadowCache{estimate: est.estimate, interval: time.Hour, now: func() time.Time { return t0 }, bandits: map[string]*shadowEntry{}}
		for range 2 {
			if _, err := c.get(ctx, nil, "b", since, 1, 1); err == nil {
				t.Fatal("get = nil error, want the estimator's")
			}
		}
		if n := est.calls.Load(); n != 2 {
			t.Errorf("two gets after failures called the estimator %d times, want 2", n)
		}
	})

	t.Run("requests that miss together share one estimate", func(t *testing.T) {
		est := &countingEstimator{gate: make(chan struct{})}
		c := &shadowCache{estimate: est.estimate, interval: time.Hour, now: func() time.Time { return t0 }, bandits: map[string]*shadowEntry{}}
		const n = 8
		var wg sync.WaitGroup
		got := make([]*bandit.ShadowEstimate, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], _ = c.get(ctx, nil, "b", since, 1, 1)
			}()
		}
		for est.calls.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // the others reach the entry's lock
		close(est.gate)
		wg.Wait()
		for i, e := range got {
			if e != got[0] || e == nil {
				t.Fatalf("request %d got %p, request 0 %p: want one shared estimate", i, e, got[0])
			}
		}
		if calls := est.calls.Load(); calls != 1 {
			t.Errorf("%d requests at once called the estimator %d times, want 1", n, calls)
		}
	})
}
