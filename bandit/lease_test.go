package bandit_test

import (
	"context"
	"errors"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// freezable is a fleet whose elections can be frozen: while frozen, Lead
// answers what it answered last without asking the database, as a
// replica that was stopped (SIGSTOP) and resumes believes before its
// next election, and renews nothing.
type freezable struct {
	bandit.Fleet
	frozen atomic.Bool
	mu     sync.Mutex
	last   map[string]int64
}

func (f *freezable) Lead(ctx context.Context, bandits []string) (map[string]int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozen.Load() {
		return maps.Clone(f.last), nil
	}
	got, err := f.Fleet.Lead(ctx, bandits)
	f.last = maps.Clone(got)
	return got, err
}

// fenceSpy counts the snapshots the store refused with ErrFenced.
type fenceSpy struct {
	bandit.Store
	fenced atomic.Int64
}

func (s *fenceSpy) SaveSnapshot(ctx context.Context, snap *bandit.Snapshot) error {
	err := s.Store.SaveSnapshot(ctx, snap)
	if errors.Is(err, bandit.ErrFenced) {
		s.fenced.Add(1)
	}
	return err
}

// TestReplicasFencedTrainerStepsDown is finding 9 of issue 31 in one
// process: replica A trains; its elections freeze, so it renews no lease
// but believes it trains; B takes the lease over within the lease plus an
// election (plus slack), with a higher token; A, given rewards, trains
// and tries to persist under its stale token: the store refuses
// (ErrFenced), no snapshot of A's token is stored after the takeover, A
// steps down at once and serves the newest stored version, and B goes on
// training. Once A's elections resume it does not train again.
func TestReplicasFencedTrainerStepsDown(t *testing.T) {
	url := migratedURL(t)
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	spy := &fenceSpy{Store: st}
	fleetA := store.NewFleet(st, 100*time.Millisecond, testLease, testLogger(t).With("replica", "A"))
	fz := &freezable{Fleet: fleetA}
	trainedA := &trainCounter{}
	svcA := bandit.NewService(spy, bandit.ServiceConfig{Workers: 1, Seed: 7, Logger: testLogger(t).With("replica", "A"), Observer: trainedA,
		Fleet: fz, TrainerRetry: testTrainerRetry, FleetPoll: testFleetPoll})
	if err := svcA.Load(ctx); err != nil {
		t.Fatal(err)
	}
	a := &replica{name: "A", st: st, fleet: fleetA, svc: svcA, trained: trainedA}
	t.Cleanup(a.close)
	cfg := smallConfig(bandit.MeanFieldTS)
	if _, err := a.svc.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A to train the bandit", func() bool { return a.agent(t).Leading() })
	b := startReplica(t, "B", url, testFleetPoll)
	traffic(t, a, b, 20, 0)
	waitFor(t, "A to train on every reward", func() bool { return a.agent(t).Status().TrainedRows == 20 })
	waitFor(t, "B to serve A's version", func() bool {
		return b.agent(t).Status().ModelVersion == a.agent(t).Status().ModelVersion
	})
	var tokenA int64
	if err := st.Pool().QueryRow(ctx, `SELECT token FROM trainer_leases WHERE bandit = 'toy'`).Scan(&tokenA); err != nil {
		t.Fatal(err)
	}
	if b.agent(t).Leading() {
		t.Fatal("B trains beside A")
	}

	fz.frozen.Store(true)
	frozeAt := time.Now()
	waitFor(t, "B to take the training over", func() bool { return b.agent(t).Leading() })
	took := time.Since(frozeAt)
	bound := testLease + testTrainerRetry + time.Second // slack for the loaded machine
	t.Logf("B trains %v after A's elections froze (lease %v, elections every %v)", took.Round(time.Millisecond), testLease, testTrainerRetry)
	if took > bound {
		t.Errorf("B took the training over %v after A froze, want within %v", took, bound)
	}
	if took < testLease-testTrainerRetry {
		t.Errorf("B took the training over %v after A froze, before A's lease (%v from its last renewal) expired", took, testLease)
	}
	if !a.agent(t).Leading() {
		t.Fatal("A, frozen, stepped down before trying to persist: the test shows nothing")
	}
	var tokenB int64
	if err := st.Pool().QueryRow(ctx, `SELECT token FROM trainer_leases WHERE bandit = 'toy'`).Scan(&tokenB); err != nil || tokenB <= tokenA {
		t.Fatalf("the lease's token after the takeover is %d (%v), want above A's %d", tokenB, err, tokenA)
	}
	var lastA int64
	if err := st.Pool().QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM snapshots WHERE bandit = 'toy' AND lease_token = $1`, tokenA).Scan(&lastA); err != nil {
		t.Fatal(err)
	}

	// Rewards wake A's trainer (its frozen elections still wake it): it
	// trains and is refused.
	traffic(t, b, a, 20, 1)
	waitFor(t, "A's snapshot to be refused", func() bool { return spy.fenced.Load() > 0 })
	waitFor(t, "A to step down", func() bool { return !a.agent(t).Leading() })
	if a.trained.n.Load() == 0 {
		t.Fatal("A never trained")
	}
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM snapshots WHERE bandit = 'toy' AND lease_token = $1 AND version > $2`, tokenA, lastA).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d snapshots of A's token %d past its last version %d before the takeover (%v), want 0", n, tokenA, lastA, err)
	}
	waitFor(t, "B to train on every reward", func() bool { return b.agent(t).Status().TrainedRows == 40 })
	// B persists after it publishes: wait for its snapshot, not only its
	// status (CI saw the status first).
	var latest *bandit.Snapshot
	waitFor(t, "the newest snapshot to be B's", func() bool {
		var err error
		latest, err = st.LatestSnapshot(ctx, "toy")
		return err == nil && latest.LeaseToken == tokenB
	})
	waitFor(t, "A to serve the newest stored version, B's", func() bool {
		s, err := st.LatestSnapshot(ctx, "toy")
		return err == nil && a.agent(t).Status().ModelVersion == s.Version
	})
	t.Logf("A's snapshots refused: %d; A's token %d, B's %d; the newest version %d is B's", spy.fenced.Load(), tokenA, tokenB, latest.Version)

	// A's elections resume: it does not take the lease back.
	fz.frozen.Store(false)
	time.Sleep(3 * testTrainerRetry)
	if a.agent(t).Leading() || !b.agent(t).Leading() {
		t.Fatalf("after A's elections resumed A leads %v, B %v; want B alone", a.agent(t).Leading(), b.agent(t).Leading())
	}
	last := b.agent(t).Status().ModelVersion
	traffic(t, a, b, 10, 2)
	waitFor(t, "B to train on", func() bool { return b.agent(t).Status().ModelVersion > last })
	dec, rew, err := st.Counts(ctx, "toy")
	if err != nil || dec != 50 || rew != 50 {
		t.Fatalf("Counts = %d decisions, %d rewards, %v; want 50, 50", dec, rew, err)
	}
}
