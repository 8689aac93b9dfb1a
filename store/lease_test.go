package store

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// TestTrainerLeases walks one lease through its life on PostgreSQL: the
// first claim takes it with token 1 for the lease length on the
// database's clock; its holder renews it (same token, later expiry);
// another replica cannot take it while it lives, takes it once expired
// with token 2, and at once, with token 3, when it has the trainer lock
// that the holder had; a snapshot written under a stale token is refused
// with bandit.ErrFenced and stores nothing, one under the live token is
// stored with it; a released lease is taken at once by the next claim,
// with a higher token.
func TestTrainerLeases(t *testing.T) {
	s, _ := openTestPostgres(t, Config{})
	ctx := context.Background()
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "toy", Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	const ttl = 5 * time.Second
	hold := func(t *testing.T, holder string, c LeaseClaim) (int64, bool) {
		t.Helper()
		got, err := s.HoldLeases(ctx, holder, []LeaseClaim{c}, ttl)
		if err != nil {
			t.Fatalf("HoldLeases(%s, %+v): %v", holder, c, err)
		}
		tok, ok := got[c.Bandit]
		return tok, ok
	}
	// remaining is how long the lease row lives on the database's clock.
	remaining := func(t *testing.T) (string, time.Duration) {
		t.Helper()
		var holder string
		var us int64
		if err := s.pool.QueryRow(ctx, `SELECT holder, (extract(epoch FROM expires_at - now()) * 1e6)::bigint FROM trainer_leases WHERE bandit = 'toy'`).Scan(&holder, &us); err != nil {
			t.Fatal(err)
		}
		return holder, time.Duration(us) * time.Microsecond
	}
	expire := func(t *testing.T) {
		t.Helper()
		if _, err := s.pool.Exec(ctx, `UPDATE trainer_leases SET expires_at = now() - interval '1 millisecond' WHERE bandit = 'toy'`); err != nil {
			t.Fatal(err)
		}
	}
	save := func(version, token int64) error {
		return s.SaveSnapshot(ctx, &bandit.Snapshot{Bandit: "toy", Version: version, Params: []byte{byte(version)}, Metrics: []byte(`{}`), LeaseToken: token})
	}

	tok, ok := hold(t, "A", LeaseClaim{Bandit: "toy"})
	if !ok || tok != 1 {
		t.Fatalf("the first claim got token %d (held %v), want 1", tok, ok)
	}
	if h, left := remaining(t); h != "A" || left <= ttl-time.Second || left > ttl {
		t.Fatalf("after the first claim the lease is %s's for %v, want A's for about %v", h, left, ttl)
	}
	if _, ok := hold(t, "B", LeaseClaim{Bandit: "toy"}); ok {
		t.Fatal("B took a live lease")
	}
	if _, ok := hold(t, "B", LeaseClaim{Bandit: "toy", Token: 1}); ok {
		t.Fatal("B renewed A's lease by naming its token")
	}
	if _, err := s.pool.Exec(ctx, `UPDATE trainer_leases SET expires_at = now() + interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if tok, ok := hold(t, "A", LeaseClaim{Bandit: "toy", Token: 1}); !ok || tok != 1 {
		t.Fatalf("A's renewal = token %d (held %v), want 1", tok, ok)
	}
	if _, left := remaining(t); left <= ttl-time.Second {
		t.Fatalf("after A's renewal the lease lives %v, want about %v", left, ttl)
	}
	if err := save(1, 1); err != nil {
		t.Fatalf("a snapshot under the live token: %v", err)
	}

	// A stops renewing: once expired, B takes the lease with token 2.
	expire(t)
	if tok, ok := hold(t, "B", LeaseClaim{Bandit: "toy"}); !ok || tok != 2 {
		t.Fatalf("B's claim to the expired lease = token %d (held %v), want 2", tok, ok)
	}
	// A wakes up: it can neither renew nor publish.
	if _, ok := hold(t, "A", LeaseClaim{Bandit: "toy", Token: 1, Locked: false}); ok {
		t.Fatal("A renewed a lease B took over")
	}
	if err := save(2, 1); !errors.Is(err, bandit.ErrFenced) {
		t.Fatalf("A's snapshot under its stale token 1 = %v, want ErrFenced", err)
	}
	if err := save(1, 1); !errors.Is(err, bandit.ErrFenced) {
		t.Fatalf("A's snapshot over an existing version under its stale token = %v, want ErrFenced", err)
	}
	snap, err := s.LatestSnapshot(ctx, "toy")
	if err != nil || snap.Version != 1 || snap.LeaseToken != 1 || snap.Params[0] != 1 {
		t.Fatalf("after the refused writes the newest snapshot is %+v, %v; want version 1 of token 1", snap, err)
	}
	if err := save(2, 2); err != nil {
		t.Fatalf("B's snapshot under token 2: %v", err)
	}
	if snap, err := s.LatestSnapshot(ctx, "toy"); err != nil || snap.Version != 2 || snap.LeaseToken != 2 {
		t.Fatalf("the newest snapshot is %+v, %v; want version 2 of token 2", snap, err)
	}

	// B holds the lease with its trainer lock; C gets the lock (B's
	// session ended) and takes the live lease at once.
	if tok, ok := hold(t, "B", LeaseClaim{Bandit: "toy", Token: 2, Locked: true}); !ok || tok != 2 {
		t.Fatalf("B's renewal with its lock = token %d (held %v), want 2", tok, ok)
	}
	if tok, ok := hold(t, "C", LeaseClaim{Bandit: "toy", Locked: true}); !ok || tok != 3 {
		t.Fatalf("C's claim with the lock B had = token %d (held %v), want 3", tok, ok)
	}
	if err := save(3, 2); !errors.Is(err, bandit.ErrFenced) {
		t.Fatalf("B's snapshot after C took over = %v, want ErrFenced", err)
	}
	// C renews without the lock (as a replica that took an expired lease
	// while the frozen holder kept the lock does): a claim with the lock
	// does not take a live lease whose holder did not have it.
	if tok, ok := hold(t, "C", LeaseClaim{Bandit: "toy", Token: 3, Locked: false}); !ok || tok != 3 {
		t.Fatalf("C's renewal without the lock = token %d (held %v), want 3", tok, ok)
	}
	if _, ok := hold(t, "D", LeaseClaim{Bandit: "toy", Locked: true}); ok {
		t.Fatal("D took a live lease whose holder never had the lock")
	}

	// Released, the lease goes to the next claim at once.
	if err := s.ReleaseLeases(ctx, "C", map[string]int64{"toy": 3}); err != nil {
		t.Fatal(err)
	}
	if tok, ok := hold(t, "A", LeaseClaim{Bandit: "toy"}); !ok || tok != 4 {
		t.Fatalf("A's claim to the released lease = token %d (held %v), want 4", tok, ok)
	}
	// A release under a stale token ends nothing.
	if err := s.ReleaseLeases(ctx, "C", map[string]int64{"toy": 3}); err != nil {
		t.Fatal(err)
	}
	if h, left := remaining(t); h != "A" || left <= 0 {
		t.Fatalf("after a stale release the lease is %s's for %v, want A's, live", h, left)
	}
	if _, err := s.HoldLeases(ctx, "A", nil, 0); err == nil {
		t.Error("HoldLeases with a zero lease length: nil error")
	}
}

// TestTrainerLeasesOneWinner: eight replicas claim one expired lease at
// once, 20 times over; each time exactly one gets it, with the token one
// above the last.
func TestTrainerLeasesOneWinner(t *testing.T) {
	s, _ := openTestPostgres(t, Config{})
	ctx := context.Background()
	last := int64(0)
	for round := range 20 {
		if _, err := s.pool.Exec(ctx, `UPDATE trainer_leases SET expires_at = now() - interval '1 millisecond'`); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		won := map[string]int64{}
		var wg sync.WaitGroup
		for r := range 8 {
			holder := string(rune('A' + r))
			wg.Go(func() {
				got, err := s.HoldLeases(ctx, holder, []LeaseClaim{{Bandit: "toy"}, {Bandit: holder}}, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if tok, ok := got["toy"]; ok {
					won[holder] = tok
				}
				if _, ok := got[holder]; !ok {
					t.Errorf("round %d: %s lost the lease of its own bandit", round, holder)
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("round %d: %v won the lease, want exactly one", round, won)
		}
		for _, tok := range won {
			if tok != last+1 {
				t.Fatalf("round %d: token %d, want %d", round, tok, last+1)
			}
			last = tok
		}
	}
}

// TestMemoryLeases: the in-memory store serves one process: every claim
// holds its lease (token 1), whoever claims, and no snapshot's token is
// refused.
func TestMemoryLeases(t *testing.T) {
	m := NewMemory()
	ctx := context.Background()
	if err := m.CreateBandit(ctx, &bandit.Bandit{Name: "toy", Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	for _, holder := range []string{"A", "B"} {
		got, err := m.HoldLeases(ctx, holder, []LeaseClaim{{Bandit: "toy"}, {Bandit: "x", Token: 7}}, time.Second)
		if want := map[string]int64{"toy": 1, "x": 1}; err != nil || !maps.Equal(got, want) {
			t.Fatalf("HoldLeases(%s) = %v, %v; want %v", holder, got, err, want)
		}
	}
	if err := m.ReleaseLeases(ctx, "A", map[string]int64{"toy": 1}); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int64{0, 1, 99} {
		if err := m.SaveSnapshot(ctx, &bandit.Snapshot{Bandit: "toy", Version: tok + 1, Metrics: []byte(`{}`), LeaseToken: tok}); err != nil {
			t.Fatalf("SaveSnapshot with lease token %d: %v", tok, err)
		}
	}
	if snap, err := m.LatestSnapshot(ctx, "toy"); err != nil || snap.Version != 100 || snap.LeaseToken != 99 {
		t.Fatalf("LatestSnapshot = %+v, %v; want version 100 of token 99", snap, err)
	}
}
