package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// openTestPostgres returns a store on a fresh, migrated schema, with its
// own pool; both are closed when the test ends.
func openTestPostgres(t testing.TB, cfg Config) (*Postgres, *pgxpool.Pool) {
	t.Helper()
	pcfg, _ := storetest.FreshSchema(t)
	SetSessionDefaults(pcfg.ConnConfig.RuntimeParams)
	ctx := context.Background()
	if err := MigrateConfig(ctx, pcfg.ConnConfig, Up); err != nil {
		t.Fatalf("migrate up: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatalf("open pool: %v", err)
	}
	s, err := NewPostgres(pool, cfg)
	if err != nil {
		pool.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		pool.Close()
	})
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	return s, pool
}

func TestPostgresContract(t *testing.T) {
	storetest.DatabaseURL(t) // skip, or under CI fail, once rather than per subtest
	tests := []struct {
		name string
		cfg  Config
	}{
		{"with group commit", Config{}},
		{"with two batches in flight at a time", Config{MaxInFlight: 2}},
		{"with each write its own transaction", Config{MaxBatch: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg != (Config{}) && testing.Short() {
				t.Skip("only the default configuration in -short mode")
			}
			storetest.Run(t, func(t *testing.T) bandit.Store {
				s, _ := openTestPostgres(t, tt.cfg)
				return s
			})
		})
	}
}

// batchLog records the batches an Observer sees.
type batchLog struct {
	mu      sync.Mutex
	batches []Batch
}

func (l *batchLog) ObserveBatch(b Batch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, b)
}

func (l *batchLog) all() []Batch {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Batch(nil), l.batches...)
}

func TestPostgresGroupCommitBatchesConcurrentWrites(t *testing.T) {
	log := &batchLog{}
	s, _ := openTestPostgres(t, Config{Observer: log})
	ctx := context.Background()
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "b", Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	const callers, each = 32, 20
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("%d-%d", c, i)
				if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "b", EventID: id}); err != nil {
					t.Error(err)
					return
				}
				if err := s.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: id, Value: 1}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var decisions, rewards, largest int
	for _, b := range log.all() {
		decisions += b.Decisions
		rewards += b.Rewards
		largest = max(largest, b.Size())
		if b.Err != nil || b.Commit <= 0 {
			t.Errorf("batch %+v: want no error and a positive commit time", b)
		}
	}
	if decisions != callers*each || rewards != callers*each {
		t.Errorf("the observer saw %d decisions and %d rewards, want %d of each", decisions, rewards, callers*each)
	}
	if n := len(log.all()); n >= 2*callers*each || largest < 2 {
		t.Errorf("%d writes went out in %d batches, the largest of %d rows: want several rows per batch", 2*callers*each, n, largest)
	}
	t.Logf("%d writes in %d batches, largest %d", 2*callers*each, len(log.all()), largest)
}

// holdRewardLock takes, on a connection of its own, the advisory lock
// under which the store numbers bandit name's rewards, so that a batch
// with a reward for that bandit stalls until release is called.
func holdRewardLock(t *testing.T, pool *pgxpool.Pool, name string) (release func()) {
	t.Helper()
	conn, err := pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_lock($1, hashtext($2))`, rewardLockSpace, name); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1, hashtext($2))`, rewardLockSpace, name); err != nil {
				t.Error(err)
			}
			conn.Release()
		})
	}
	t.Cleanup(release)
	return release
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (c *committer) pendingLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// committingAlone reports whether one batch is committing and no write
// waits: a stalled write's batch has left. (pendingLen() == 0 alone is
// true too before the stalled write is enqueued at all.)
func (c *committer) committingAlone() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending) == 0 && c.inflight == 1
}

func TestPostgresBadRowFailsAlone(t *testing.T) {
	log := &batchLog{}
	s, pool := openTestPostgres(t, Config{MaxInFlight: 1, Observer: log})
	ctx := context.Background()
	for _, name := range []string{"b", "blocker"} {
		if err := s.CreateBandit(ctx, &bandit.Bandit{Name: name, Config: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "blocker", EventID: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "b", EventID: "rewarded", Arm: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: "rewarded", Value: 1}); err != nil {
		t.Fatal(err)
	}

	// Stall one batch, so that the writes below gather into the next.
	release := holdRewardLock(t, pool, "blocker")
	blocked := make(chan error, 1)
	go func() { blocked <- s.InsertReward(ctx, &bandit.Reward{Bandit: "blocker", EventID: "x", Value: 1}) }()
	waitFor(t, "the first batch is committing", func() bool { return s.gc.committingAlone() && len(log.all()) == 3 })

	type call struct {
		name    string
		run     func() (created bool, err error)
		created bool
		want    error // nil: success; errAny: some error
	}
	errAny := errors.New("any error")
	decide := func(id string, ctxJSON string) func() (bool, error) {
		return func() (bool, error) {
			_, created, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "b", EventID: id, Context: json.RawMessage(ctxJSON)})
			return created, err
		}
	}
	reward := func(id string, v float64) func() (bool, error) {
		return func() (bool, error) {
			return false, s.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: id, Value: v})
		}
	}
	calls := []call{
		// PostgreSQL rejects a lone UTF-16 surrogate in jsonb;
		// encoding/json does not, so only the server catches it.
		{"a context PostgreSQL rejects fails", decide("bad", `{"a": "\ud800"}`), false, errAny},
		{"a duplicate event ID is not created", decide("rewarded", `{}`), false, nil},
		{"a reward for an unknown event is not found", reward("unknown", 1), false, bandit.ErrNotFound},
		{"a reward conflicting with the stored one conflicts", reward("rewarded", 2), false, bandit.ErrConflict},
		{"the same reward again is accepted", reward("rewarded", 1), false, nil},
		{"a decision for a missing bandit is not found", func() (bool, error) {
			_, created, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "nope", EventID: "e"})
			return created, err
		}, false, bandit.ErrNotFound},
	}
	for i := range 10 {
		calls = append(calls, call{fmt.Sprintf("good decision %d is created", i), decide(fmt.Sprintf("good%d", i), `{"i": 1}`), true, nil})
	}
	var wg sync.WaitGroup
	results := make([]struct {
		created bool
		err     error
	}, len(calls))
	for i, c := range calls {
		wg.Go(func() { results[i].created, results[i].err = c.run() })
	}
	waitFor(t, "every write is waiting for the next batch", func() bool { return s.gc.pendingLen() == len(calls) })
	release()
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Errorf("the stalled reward = %v", err)
	}
	for i, c := range calls {
		got := results[i]
		switch {
		case c.want == errAny && got.err == nil:
			t.Errorf("%s: got nil, want an error", c.name)
		case c.want != errAny && !errors.Is(got.err, c.want):
			t.Errorf("%s: got %v, want %v", c.name, got.err, c.want)
		case got.created != c.created:
			t.Errorf("%s: created = %v, want %v", c.name, got.created, c.created)
		}
	}
	// The two rewards for "rewarded" share a key, so the second waits for
	// the next batch; everything else goes in one.
	batches := log.all()[4:] // after the set-up's three and the stalled one
	if len(batches) != 2 || batches[0].Size() != len(calls)-1 || batches[1].Size() != 1 || batches[0].Err != nil || batches[1].Err != nil {
		t.Errorf("batches after the stall = %+v, want one of %d writes and one of 1, without batch errors", batches, len(calls)-1)
	}
	for i := range 10 {
		if _, err := s.GetDecision(ctx, "b", fmt.Sprintf("good%d", i)); err != nil {
			t.Errorf("good decision %d: %v", i, err)
		}
	}
	if _, err := s.GetDecision(ctx, "b", "bad"); !errors.Is(err, bandit.ErrNotFound) {
		t.Errorf("the rejected decision: GetDecision = %v, want ErrNotFound", err)
	}
}

func TestPostgresCloseFlushesPendingWrites(t *testing.T) {
	s, pool := openTestPostgres(t, Config{MaxInFlight: 1})
	ctx := context.Background()
	for _, name := range []string{"b", "blocker"} {
		if err := s.CreateBandit(ctx, &bandit.Bandit{Name: name, Config: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "blocker", EventID: "x"}); err != nil {
		t.Fatal(err)
	}
	release := holdRewardLock(t, pool, "blocker")
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.InsertReward(ctx, &bandit.Reward{Bandit: "blocker", EventID: "x", Value: 1}); err != nil {
			t.Errorf("the stalled reward = %v", err)
		}
	})
	waitFor(t, "the first batch is committing", func() bool { return s.gc.committingAlone() })
	const n = 20
	for i := range n {
		wg.Go(func() {
			if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "b", EventID: fmt.Sprint(i)}); err != nil {
				t.Errorf("pending decision %d = %v, want it flushed by Close", i, err)
			}
		})
	}
	waitFor(t, "every decision is pending", func() bool { return s.gc.pendingLen() == n })
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	waitFor(t, "Close has begun", s.closed.Load)
	if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "b", EventID: "late"}); !errors.Is(err, ErrClosed) {
		t.Errorf("a write after Close began = %v, want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while writes were pending")
	case <-time.After(50 * time.Millisecond):
	}
	release()
	<-closed
	wg.Wait()
	var count int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM decisions WHERE bandit = 'b'`).Scan(&count); err != nil || count != n {
		t.Errorf("after Close, %d decisions are stored (%v), want %d", count, err, n)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for none
	}{
		{"the zero config is valid", Config{}, ""},
		{"group commit can be turned off", Config{MaxBatch: 1}, ""},
		{"a negative batch size is rejected", Config{MaxBatch: -1}, "MaxBatch is -1"},
		{"a negative delay is rejected", Config{MaxDelay: -time.Millisecond}, "MaxDelay is -1ms"},
		{"a negative number of batches in flight is rejected", Config{MaxInFlight: -2}, "MaxInFlight is -2"},
		{"a negative commit timeout is rejected", Config{CommitTimeout: -time.Second}, "CommitTimeout is -1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.validate()
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
