package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// analyzeAt are the numbers of rows a store has written after which it
// has PostgreSQL analyze the tables that grow.
//
// Why: each connection plans a prepared statement once (a generic plan)
// and keeps the plan until a table it reads changes shape or statistics.
// Planned while the tables are empty and never analyzed, a statement
// can get a plan that is as cheap as any on an empty table and
// proportional to the table later: the lookup of a reward's decision by
// (bandit, event_id) was planned on the (bandit, created_at) index,
// which reads every decision of the bandit (see
// TestPlansAfterTheTablesGrow). ANALYZE gives the planner the tables'
// statistics and invalidates the cached plans, so every connection plans
// again, with index lookups. Autovacuum does the same where it runs; this
// does it where it does not (this machine's cluster has it off), at a
// cost of one ANALYZE (at most 30,000 sampled rows per table) at each of
// these points.
var analyzeAt = []int64{1_000, 10_000, 100_000}

// sqlAnalyze analyzes the tables that grow, except unrewarded: it holds
// the few decisions awaiting their rewards, and analyzed it looks as
// small as it is live, which makes a sequential scan its cheapest plan;
// without autovacuum its dead rows then pile up under that plan. Never
// analyzed, its size is taken from its pages (at least ten), and the
// range lookup of the rewards statement stays an index scan.
const sqlAnalyze = `ANALYZE decisions, rewards`

// analyzer counts the rows a store writes and analyzes its tables at
// analyzeAt.
type analyzer struct {
	written atomic.Int64
	next    atomic.Int32 // the index in analyzeAt of the next point
	wg      sync.WaitGroup
}

// wrote counts n rows committed and starts an ANALYZE in the background
// when the count passes the next point.
func (s *Postgres) wrote(n int) {
	a := &s.analyzer
	w := a.written.Add(int64(n))
	i := a.next.Load()
	if int(i) >= len(analyzeAt) || w < analyzeAt[i] || !a.next.CompareAndSwap(i, i+1) {
		return
	}
	a.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := s.pool.Exec(ctx, sqlAnalyze); err != nil {
			s.cfg.Logger.Warn("store: analyzing the tables failed; statements may keep plans made on small tables", "rows_written", w, "err", err)
		}
	})
}
