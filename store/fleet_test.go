package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/bandit"
)

// sameSchema returns a second store on s's schema with a pool of its
// own, as a second `refinery serve` has.
func sameSchema(t *testing.T, s *Postgres) *Postgres {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), s.pool.Config())
	if err != nil {
		t.Fatal(err)
	}
	s2, err := NewPostgres(pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s2.Close()
		pool.Close()
	})
	return s2
}

func newTestFleet(t *testing.T, s *Postgres) *Fleet {
	f := NewFleet(s, 50*time.Millisecond, 0, nil)
	t.Cleanup(func() { f.Close() })
	return f
}

// endLockSession has the server end f's lock session
// (pg_terminate_backend through s), as when its replica's connection
// dies; the backend ends a moment after the call returns.
func endLockSession(t *testing.T, s *Postgres, f *Fleet) {
	t.Helper()
	ctx := context.Background()
	var pid int
	if err := f.lock.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
}

func leads(t *testing.T, f *Fleet, bandits ...string) []string {
	t.Helper()
	got, err := f.Lead(context.Background(), bandits)
	if err != nil {
		t.Fatalf("Lead(%v): %v", bandits, err)
	}
	var out []string
	for b := range got {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// nextEvent returns the next event other than FleetResync, or fails
// after 5s.
func nextEvent(t *testing.T, f *Fleet) bandit.FleetEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev := <-f.Events():
			if ev.Kind != bandit.FleetResync {
				return ev
			}
		case <-timeout:
			t.Fatal("no fleet event within 5s")
		}
	}
}

// TestFleetLocks: of two replicas on one schema exactly one holds a
// bandit's trainer lock; a bandit no longer listed is released to the
// other; a replica in another schema leads its own bandit of the same
// name; a lock session ended by the server (pg_terminate_backend) frees
// the locks, Lead reports the error and holds none, and the next Lead
// connects again.
func TestFleetLocks(t *testing.T) {
	s1, _ := openTestPostgres(t, Config{})
	a, b := newTestFleet(t, s1), newTestFleet(t, sameSchema(t, s1))
	other, _ := openTestPostgres(t, Config{})
	c := newTestFleet(t, other)

	if got := leads(t, a, "x", "y"); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("A leads %v, want [x y]", got)
	}
	if got := leads(t, b, "x", "y", "z"); !slices.Equal(got, []string{"z"}) {
		t.Fatalf("B leads %v, want [z] (A holds x and y)", got)
	}
	if got := leads(t, c, "x"); !slices.Equal(got, []string{"x"}) {
		t.Fatalf("a replica in another schema leads %v, want [x]", got)
	}
	if got := leads(t, a, "y"); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("A leads %v after dropping x, want [y]", got)
	}
	if got := leads(t, b, "x", "y", "z"); !slices.Equal(got, []string{"x", "z"}) {
		t.Fatalf("B leads %v, want [x z] (A released x)", got)
	}
	if got := leads(t, a, "y"); !slices.Equal(got, []string{"y"}) {
		t.Fatalf("A leads %v again, want [y] (held, not taken twice)", got)
	}

	// The server ends A's lock session.
	ctx := context.Background()
	endLockSession(t, s1, a)
	// pg_terminate_backend signals the backend, which ends a moment later.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got := leads(t, b, "x", "y", "z")
		if slices.Equal(got, []string{"x", "y", "z"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B leads %v 5s after A's session ended, want [x y z]", got)
		}
	}
	got, err := a.Lead(ctx, []string{"y"})
	if err == nil || len(got) != 0 {
		t.Fatalf("A's Lead after its session ended = %v, %v; want none and an error", got, err)
	}
	if got := leads(t, a, "y", "w"); !slices.Equal(got, []string{"w"}) {
		t.Fatalf("A leads %v on a new session, want [w]", got)
	}

	// The replicas table: each replica's last election, this one marked.
	a.SetAddress("127.0.0.1:1")
	b.SetAddress("127.0.0.1:2")
	leads(t, a, "y", "w")
	leads(t, b, "x", "y", "z")
	rs, err := b.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].ID != a.ID() || rs[0].This || !slices.Equal(rs[0].Trains, []string{"w"}) || rs[0].Address != "127.0.0.1:1" ||
		rs[1].ID != b.ID() || !rs[1].This || !slices.Equal(rs[1].Trains, []string{"x", "y", "z"}) || rs[1].Address != "127.0.0.1:2" {
		t.Fatalf("B's Replicas = %+v, want A training [w] and B (this) training [x y z]", rs)
	}
	if rs[0].LastSeen.Before(rs[0].StartedAt) || time.Since(rs[1].LastSeen) > time.Minute {
		t.Errorf("replica times %+v", rs)
	}
	a.Close()
	if rs, err := b.Replicas(ctx); err != nil || len(rs) != 1 || rs[0].ID != b.ID() {
		t.Fatalf("Replicas after A closed = %+v, %v; want B alone", rs, err)
	}
	// A replica not seen for a minute is gone (its row aged by hand).
	if _, err := s1.pool.Exec(ctx, `INSERT INTO replicas VALUES ('old', 'x', now() - interval '2 hours', now() - interval '61 seconds', '{}')`); err != nil {
		t.Fatal(err)
	}
	leads(t, b, "x")
	var n int
	if err := s1.pool.QueryRow(ctx, `SELECT count(*) FROM replicas WHERE id = 'old'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows of a replica not seen for 61s after a heartbeat (%v), want 0", n, err)
	}
}

// TestFleetAnnouncements: Published and Changed reach every replica on
// the schema, the announcing one included, and not those of another
// schema; Versions is the newest snapshot of each live bandit.
func TestFleetAnnouncements(t *testing.T) {
	s1, _ := openTestPostgres(t, Config{})
	a, b := newTestFleet(t, s1), newTestFleet(t, sameSchema(t, s1))
	other, _ := openTestPostgres(t, Config{})
	c := newTestFleet(t, other)
	ctx := context.Background()
	for _, f := range []*Fleet{a, b, c} { // listening
		select {
		case ev := <-f.Events():
			if ev.Kind != bandit.FleetResync {
				t.Fatalf("first event %+v, want FleetResync", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no FleetResync within 5s of listening")
		}
	}
	if err := c.Changed(ctx, "other-schema"); err != nil {
		t.Fatal(err)
	}
	if err := a.Published(ctx, "my.bandit-1", 42); err != nil {
		t.Fatal(err)
	}
	if err := b.Changed(ctx, "toy"); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*Fleet{a, b} {
		if ev := nextEvent(t, f); ev != (bandit.FleetEvent{Kind: bandit.FleetPublished, Bandit: "my.bandit-1", Version: 42}) {
			t.Errorf("first event %+v, want my.bandit-1 published at 42", ev)
		}
		if ev := nextEvent(t, f); ev != (bandit.FleetEvent{Kind: bandit.FleetChanged, Bandit: "toy"}) {
			t.Errorf("second event %+v, want toy changed", ev)
		}
	}
	if ev := nextEvent(t, c); ev != (bandit.FleetEvent{Kind: bandit.FleetChanged, Bandit: "other-schema"}) {
		t.Errorf("the other schema's first event %+v, want its own bandit changed", ev)
	}

	for _, name := range []string{"p", "q", "r"} {
		if err := s1.CreateBandit(ctx, &bandit.Bandit{Name: name, Config: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, snap := range []struct {
		name string
		v    int64
	}{{"p", 1}, {"p", 3}, {"p", 2}, {"q", 7}, {"r", 1}} {
		if err := s1.SaveSnapshot(ctx, &bandit.Snapshot{Bandit: snap.name, Version: snap.v, Params: []byte{1}, Metrics: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s1.DeleteBandit(ctx, "r", false); err != nil {
		t.Fatal(err)
	}
	vs, err := a.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs["p"] != 3 || vs["q"] != 7 {
		t.Errorf("Versions = %v, want map[p:3 q:7] (r is deleted)", vs)
	}
}

// TestFleetLeaseOutlivesAFrozenHolder: a replica that stops calling
// Lead (frozen) keeps its session and its trainer lock, but not its
// lease: another replica leads the bandit once the lease has expired,
// with a higher token, though it cannot get the lock; the frozen one,
// back, no longer leads, gives the lock up, and the new leader takes it
// at its next election, so that its own death is noticed at once.
func TestFleetLeaseOutlivesAFrozenHolder(t *testing.T) {
	const lease = 400 * time.Millisecond
	s1, _ := openTestPostgres(t, Config{})
	a := NewFleet(s1, 50*time.Millisecond, lease, nil)
	t.Cleanup(func() { a.Close() })
	b := NewFleet(sameSchema(t, s1), 50*time.Millisecond, lease, nil)
	t.Cleanup(func() { b.Close() })
	ctx := context.Background()
	lead := func(f *Fleet) map[string]int64 {
		t.Helper()
		got, err := f.Lead(ctx, []string{"x"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := lead(a); got["x"] != 1 {
		t.Fatalf("A leads %v, want x with token 1", got)
	}
	start := time.Now()
	for {
		got := lead(b)
		if got["x"] != 0 {
			if got["x"] != 2 {
				t.Fatalf("B leads %v after A's lease expired, want x with token 2", got)
			}
			break
		}
		if time.Since(start) > lease+time.Second {
			t.Fatalf("B does not lead x %v after A froze, with a lease of %v", time.Since(start), lease)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if took := time.Since(start); took < lease-100*time.Millisecond {
		t.Fatalf("B took the lease %v after A's last renewal, before it expired (%v)", took, lease)
	}
	if b.held["x"] {
		t.Fatal("B holds the trainer lock that the frozen A still holds")
	}
	if got := lead(a); len(got) != 0 {
		t.Fatalf("A, back, leads %v; want nothing", got)
	}
	if a.held["x"] {
		t.Fatal("A kept the trainer lock of a bandit it no longer leads")
	}
	if got := lead(b); got["x"] != 2 || !b.held["x"] {
		t.Fatalf("B leads %v (lock %v) after A gave the lock up, want x with token 2 and the lock", got, b.held["x"])
	}
}

// TestFleetReplicasListLiveLeasesOnly: a replica is listed as training
// only the bandits whose lease it still holds (issue 30, finding 13: a
// SIGKILLed trainer was listed as training every bandit for a minute).
// A's lock session is ended by the server and A elects no more, as a
// killed process: B takes x and y over at its next elections, and A's
// row, still listed, trains nothing; C, frozen with a lease of its own,
// trains nothing once that lease has expired, though no one took it.
func TestFleetReplicasListLiveLeasesOnly(t *testing.T) {
	const lease = 400 * time.Millisecond
	s1, _ := openTestPostgres(t, Config{})
	a := NewFleet(s1, 50*time.Millisecond, lease, nil)
	t.Cleanup(func() { a.Close() })
	b := NewFleet(sameSchema(t, s1), 50*time.Millisecond, lease, nil)
	t.Cleanup(func() { b.Close() })
	c := NewFleet(sameSchema(t, s1), 50*time.Millisecond, lease, nil)
	t.Cleanup(func() { c.Close() })
	a.SetAddress("127.0.0.1:1")
	b.SetAddress("127.0.0.1:2")
	c.SetAddress("127.0.0.1:3")
	ctx := context.Background()
	trains := func() map[string][]string {
		t.Helper()
		rs, err := b.Replicas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]string{}
		for _, r := range rs {
			out[r.Address] = r.Trains
		}
		return out
	}
	leads(t, a, "x", "y")
	leads(t, b, "x", "y")
	leads(t, c, "w")
	if got := trains(); len(got) != 3 || !slices.Equal(got["127.0.0.1:1"], []string{"x", "y"}) || len(got["127.0.0.1:2"]) != 0 || !slices.Equal(got["127.0.0.1:3"], []string{"w"}) {
		t.Fatalf("replicas train %v; want A x and y, B nothing, C w", got)
	}

	endLockSession(t, s1, a)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got := leads(t, b, "x", "y"); slices.Equal(got, []string{"x", "y"}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B does not lead x and y 5s after A's session ended")
		}
	}
	got := trains()
	if _, listed := got["127.0.0.1:1"]; !listed || len(got["127.0.0.1:1"]) != 0 || !slices.Equal(got["127.0.0.1:2"], []string{"x", "y"}) {
		t.Fatalf("after A died and B took over, replicas train %v; want A listed training nothing, B x and y", got)
	}
	time.Sleep(lease + 100*time.Millisecond) // C's lease expires; no one takes w
	if got := trains(); len(got["127.0.0.1:3"]) != 0 {
		t.Fatalf("C, frozen past its lease, is listed training %v; want nothing", got["127.0.0.1:3"])
	}
}
