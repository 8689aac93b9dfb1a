package store

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/bandit"
)

// hotStatements are the store's statements whose cost must not grow
// with the tables.
var hotStatements = []struct{ name, sql string }{
	{"insert decisions", sqlInsertDecisions},
	{"insert rewards", sqlInsertRewards},
	{"training rows", sqlTrainingRows},
	{"unrewarded", sqlUnrewarded},
	{"list decisions", sqlListDecisions},
}

// genericPlans returns the generic plan (the plan a connection caches
// for a prepared statement) of each hot statement, as EXPLAIN prints it.
func genericPlans(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := context.Background()
	pc, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The connection's session settings change: it is not given back.
	conn := pc.Hijack()
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	plans := map[string]string{}
	for i, st := range hotStatements {
		name := fmt.Sprintf("plan_test_%d", i)
		if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+st.sql); err != nil {
			t.Fatalf("%s: prepare: %v", st.name, err)
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT cardinality(parameter_types) FROM pg_prepared_statements WHERE name = $1`, name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		// The values do not matter to a generic plan.
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", n), ", ")
		rows, err := conn.Query(ctx, "EXPLAIN EXECUTE "+name+"("+nulls+")")
		if err != nil {
			t.Fatalf("%s: explain: %v", st.name, err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: explain: %v", st.name, err)
		}
		plans[st.name] = plan.String()
	}
	return plans
}

var seqScan = regexp.MustCompile(`Seq Scan on (decisions|rewards|unrewarded)\b`)

// TestPlansNeverScanTheGrowingTables: a connection typically plans its
// statements while the tables are empty and keeps the plans as they
// grow. Even then (the tables empty and never analyzed, where a
// sequential scan looks cheapest), no hot statement reads decisions,
// rewards or unrewarded by a sequential scan, which would read the
// whole table on every batch, training read or dashboard page.
func TestPlansNeverScanTheGrowingTables(t *testing.T) {
	_, pool := openTestPostgres(t, Config{})
	for name, plan := range genericPlans(t, pool) {
		if m := seqScan.FindString(plan); m != "" {
			t.Errorf("%s: the generic plan on empty tables has %q:\n%s", name, m, plan)
		}
	}
}

// TestPlansAfterTheTablesGrow: once the store has written its first
// thousand rows it has the tables analyzed (analyzeAt), after which
// every connection plans again, and the lookup of a reward's decision
// uses the unique (bandit, event_id) index: planned on empty tables it
// may use the (bandit, created_at) index instead, which reads every
// decision of the bandit per reward.
func TestPlansAfterTheTablesGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a thousand rows")
	}
	s, pool := openTestPostgres(t, Config{})
	ctx := context.Background()
	if err := s.CreateBandit(ctx, &bandit.Bandit{Name: "b", Config: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	const pairs = 520 // 1,040 rows: past the first point of analyzeAt
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < pairs; i += 16 {
				id := fmt.Sprint(i)
				if _, _, err := s.InsertDecision(ctx, &bandit.Decision{Bandit: "b", EventID: id, Context: []byte(`{}`), Encoded: []float64{1, 0}}); err != nil {
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
	// ANALYZE runs in the background; it sets pg_class.reltuples.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var tuples float64
		if err := pool.QueryRow(ctx, `SELECT reltuples FROM pg_class WHERE oid = 'decisions'::regclass`).Scan(&tuples); err != nil {
			t.Fatal(err)
		}
		if tuples > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("decisions was not analyzed within 30s of the store writing its first thousand rows")
		}
		time.Sleep(50 * time.Millisecond)
	}
	plans := genericPlans(t, pool)
	for name, plan := range plans {
		if m := seqScan.FindString(plan); m != "" {
			t.Errorf("%s: the generic plan has %q:\n%s", name, m, plan)
		}
	}
	if p := plans["insert rewards"]; !strings.Contains(p, "decisions_bandit_event_id_key") || strings.Contains(p, "decisions_bandit_created_at_idx") {
		t.Errorf("insert rewards: the decision is not looked up by its unique (bandit, event_id) index:\n%s", p)
	}
}
