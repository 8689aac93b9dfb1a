package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store/storetest"
)

type attempt struct {
	id string
	i  int
}

// TestPostgresAcknowledgedWritesSurviveKilledConnections writes decisions
// and rewards from several goroutines while another connection kills the
// store's backends again and again (pg_terminate_backend), then closes the
// pool under the writers' feet without Close's flush, as a crash would.
// A second store on the same schema must then find every write that was
// acknowledged, with the acknowledged values; retrying the others must
// succeed, since both writes are idempotent.
func TestPostgresAcknowledgedWritesSurviveKilledConnections(t *testing.T) {
	pcfg, schema := storetest.FreshSchema(t)
	ctx := context.Background()
	if err := MigrateConfig(ctx, pcfg.ConnConfig, Up); err != nil {
		t.Fatal(err)
	}
	app := "durability_" + schema
	reopen := pcfg.Copy()
	pcfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewPostgres(pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "b", Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}

	const writers = 8
	var (
		mu         sync.Mutex
		decided    = map[string]*bandit.Decision{} // acknowledged decisions
		rewarded   = map[string]float64{}          // acknowledged rewards
		attempted  []attempt
		failures   atomic.Int64
		stop       = make(chan struct{})
		wg         sync.WaitGroup
		decisionOf = func(id string, i int) *bandit.Decision {
			return &bandit.Decision{Bandit: "b", EventID: id, Context: []byte(`{"i": 1}`), Encoded: []float64{float64(i), 0.5}, Arm: i % 2, Propensities: []float64{0.5, 0.5}, Policy: "uniform", Sample: bandit.SampleNone}
		}
	)
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				mu.Lock()
				attempted = append(attempted, attempt{id, i})
				mu.Unlock()
				stored, _, err := s.InsertDecision(ctx, decisionOf(id, i))
				if err != nil {
					failures.Add(1)
					continue
				}
				mu.Lock()
				decided[id] = stored
				mu.Unlock()
				if err := s.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: id, Value: float64(i)}); err != nil {
					failures.Add(1)
					continue
				}
				mu.Lock()
				rewarded[id] = float64(i)
				mu.Unlock()
			}
		})
	}

	admin, err := pgx.Connect(ctx, storetest.DatabaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int64
	for range 16 {
		time.Sleep(25 * time.Millisecond)
		var n int64
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		killed += n
	}
	// The crash: the pool goes away while writers are still writing, and
	// nobody calls s.Close.
	time.Sleep(20 * time.Millisecond)
	pool.Close()
	close(stop)
	wg.Wait()
	if killed == 0 {
		t.Fatal("no backend was terminated: the test did not test anything")
	}
	t.Logf("%d backends terminated; %d writes attempted, %d decisions and %d rewards acknowledged, %d writes failed",
		killed, len(attempted), len(decided), len(rewarded), failures.Load())

	// Restart on the same schema.
	pool2, err := pgxpool.NewWithConfig(ctx, reopen)
	if err != nil {
		t.Fatal(err)
	}
	defer pool2.Close()
	s2, err := NewPostgres(pool2, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for id, want := range decided {
		got, err := s2.GetDecision(ctx, "b", id)
		if err != nil {
			t.Errorf("acknowledged decision %s: %v", id, err)
			continue
		}
		if got.Arm != want.Arm || !got.CreatedAt.Equal(want.CreatedAt) || got.Encoded[0] != want.Encoded[0] {
			t.Errorf("acknowledged decision %s reads back as %+v, want %+v", id, got, want)
		}
	}
	stored := map[string]float64{}
	rows, err := pool2.Query(ctx, `SELECT d.event_id, r.value FROM rewards r JOIN decisions d ON d.id = r.decision_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var v float64
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		stored[id] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for id, want := range rewarded {
		if got, ok := stored[id]; !ok || got != want {
			t.Errorf("acknowledged reward %s = %v: stored %v (present %v)", id, want, got, ok)
		}
	}
	var trained int
	if err := s2.TrainingRows(ctx, "b", 0, 2, func(bandit.TrainingRow) error { trained++; return nil }); err != nil || trained != len(stored) {
		t.Errorf("TrainingRows read %d rows (%v), want the %d stored rewards", trained, err, len(stored))
	}

	// Retry everything that was attempted: idempotent writes succeed.
	for _, a := range attempted {
		if _, _, err := s2.InsertDecision(ctx, decisionOf(a.id, a.i)); err != nil {
			t.Fatalf("retrying decision %s: %v", a.id, err)
		}
		if err := s2.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: a.id, Value: float64(a.i)}); err != nil {
			t.Fatalf("retrying reward %s: %v", a.id, err)
		}
	}
	d, r, err := s2.Counts(ctx, "b")
	if err != nil || d != int64(len(attempted)) || r != int64(len(attempted)) {
		t.Errorf("after the retries, Counts = %d, %d, %v; want %d of each", d, r, err, len(attempted))
	}
}
