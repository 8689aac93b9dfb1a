package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refinery-bandits/refinery/bandit"
)

// write is one caller's decision or reward on its way through a batch.
// The committing goroutine sets the outcome fields, then closes done.
type write struct {
	d *bandit.Decision // exactly one of d and r is set
	r *bandit.Reward

	stored   *bandit.Decision
	created  bool
	err      error // this row's outcome, already wrapped
	lookup   bool  // the outcome must be read after commit
	decision int64 // a reward's decision ID, for that lookup
	done     chan struct{}
}

func (w *write) fail(err error) {
	if w.d != nil {
		w.err = errorf("store: insert decision %s/%s: %w", w.d.Bandit, w.d.EventID, err)
	} else {
		w.err = errorf("store: insert reward %s/%s: %w", w.r.Bandit, w.r.EventID, err)
	}
}

func (w *write) reset() { w.stored, w.created, w.err, w.lookup, w.decision = nil, false, nil, false, 0 }

// submit hands ws to the group committer together, or commits them
// alone when group commit is off, and waits for their outcomes. It
// returns an error only when they were not all answered (closed store,
// cancelled context); each w.err holds the row's own outcome.
func (s *Postgres) submit(ctx context.Context, ws ...*write) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if len(ws) == 0 {
		return nil
	}
	if s.gc == nil {
		for len(ws) > 0 { // a batch holds each key once (split)
			ws = s.commit(ctx, ws)
		}
		return nil
	}
	for _, w := range ws {
		w.done = make(chan struct{})
	}
	if err := s.gc.enqueue(ws...); err != nil {
		return err
	}
	for _, w := range ws {
		select {
		case <-w.done:
		case <-ctx.Done():
			// The rows may still commit; the caller may retry, since
			// both writes are idempotent.
			return ctx.Err()
		}
	}
	return nil
}

// committer gathers writes into batches; at most MaxInFlight batches
// commit at once. When there is room for one more, the pending writes
// are sent as a batch as soon as
//   - MaxBatch of them are waiting, or the oldest has waited MaxDelay;
//   - no batch is committing, unless one committed less than MaxDelay
//     ago and fewer writes are waiting than it carried: its callers,
//     just answered, are likely to write again at once, and sending the
//     first of them alone would split every later batch in two
//     (measured: batches of 1 and 63 in turn for 64 callers).
//
// So a lone write on an idle store goes at once, and under load the
// writes that arrive while batches commit form the next batch: batches
// grow with the number of callers.
type committer struct {
	s *Postgres

	mu       sync.Mutex
	pending  []*write
	inflight int
	closing  bool
	// The MaxDelay timer of the oldest pending write: armed once per
	// batch; gen tells a current timer from one whose batch has left.
	armed, fired bool
	gen          uint64
	// The size of the last batch committed, and until when its callers
	// are expected back.
	expect   int
	expectBy time.Time
	wg       sync.WaitGroup
}

// ready reports whether the pending writes should go now; c.mu is held
// and there is room for another batch in flight.
func (c *committer) ready() bool {
	switch {
	case len(c.pending) >= c.s.cfg.MaxBatch || c.fired || c.closing:
		return true
	case c.inflight > 0:
		return false
	case time.Now().Before(c.expectBy):
		return len(c.pending) >= c.expect
	default:
		return true
	}
}

func (c *committer) enqueue(ws ...*write) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrClosed
	}
	c.pending = append(c.pending, ws...)
	c.dispatchLocked()
	return nil
}

// dispatchLocked starts as many batches as the rules allow; c.mu is held.
func (c *committer) dispatchLocked() {
	cfg := &c.s.cfg
	for len(c.pending) > 0 && c.inflight < cfg.MaxInFlight {
		if !c.ready() {
			if !c.armed {
				c.armed = true
				gen := c.gen
				time.AfterFunc(cfg.MaxDelay, func() {
					c.mu.Lock()
					defer c.mu.Unlock()
					if gen == c.gen {
						c.fired = true
						c.dispatchLocked()
					}
				})
			}
			return
		}
		var batch []*write
		if n := cfg.MaxBatch; len(c.pending) > n {
			batch = slices.Clone(c.pending[:n])
			c.pending = slices.Clone(c.pending[n:])
		} else {
			batch, c.pending = c.pending, nil
		}
		c.gen++
		c.armed, c.fired = false, false
		c.inflight++
		c.wg.Add(1)
		go c.run(batch)
	}
}

func (c *committer) run(batch []*write) {
	defer c.wg.Done()
	again := c.s.commit(context.Background(), batch)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inflight--
	c.expect, c.expectBy = len(batch)-len(again), time.Now().Add(c.s.cfg.MaxDelay)
	c.pending = append(again, c.pending...)
	c.dispatchLocked()
}

// close stops new writes and waits until every pending one is answered.
func (c *committer) close() {
	c.mu.Lock()
	c.closing = true
	c.dispatchLocked()
	c.mu.Unlock()
	c.wg.Wait()
}

// rewardLockSpace is the first key of the per-bandit advisory locks under
// which rewards are numbered (the second is hashtext(bandit)); "REF1".
// Two-key advisory locks do not collide with one-key (bigint) ones.
const rewardLockSpace = 0x52454631

// The batch statements take one array per column, a row per element, so
// that a batch is one statement per kind of row whatever its size: per-row
// statements cost the server about five times more per row (measured with
// pgbench). The float vectors of all decisions travel as one flat array,
// cut per row by offset and lengths.
//
// They never let the planner choose how to find rows in the tables that
// grow (decisions, rewards, unrewarded): a prepared statement's plan is
// made once per connection, typically while the tables are small, and a
// hash join over a sequential scan, cheapest on an empty table, then
// reads the whole table on every batch for the life of the connection
// (measured: the previous form of the decisions statement scanned all of
// decisions per batch once the table held thousands of rows, and
// planning every execution instead, plan_cache_mode force_custom_plan,
// cost PostgreSQL CPU on every row: bench/store-tuning.md). Lookups are scalar subqueries
// on a unique key, run per input row, whose cheapest plan is an index
// lookup at any table size; the delete from unrewarded is bounded to the
// batch's range of decision IDs, an index range at any size. Which
// unique index a lookup uses the planner can only tell once the tables
// have statistics: the store analyzes them as they grow (analyze.go).
// TestPlans* check the generic plans, which the store's connections use
// (SetSessionDefaults).
const (
	// sqlInsertDecisions inserts the decisions whose event IDs are new,
	// with their unrewarded entries, and returns per input row, in
	// order, whether it was inserted. A row that was not (its event ID
	// exists, or its bandit does not) is looked up after commit.
	sqlInsertDecisions = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::jsonb[], $5::integer[], $6::integer[], $7::integer[], $8::integer[],
		$9::integer[], $10::text[], $11::bigint[], $12::text[], $13::timestamptz[], $14::integer[], $15::integer[], $16::integer[], $17::float8[])
	WITH ORDINALITY AS t(bandit, event_id, context, start, enc_len, prop_len, score_len, arm, policy, model_version, sample, created_at, shadow_arm, shadow_len, slot, shadow_above, ord)
), ins AS (
	INSERT INTO decisions AS d (bandit, event_id, context, encoded, arm, propensities, scores, policy, model_version, sample, created_at, shadow_arm, shadow_propensities, slot, shadow_above)
	SELECT i.bandit, i.event_id, i.context,
		($4::float8[])[i.start + 1 : i.start + i.enc_len],
		i.arm,
		($4::float8[])[i.start + i.enc_len + 1 : i.start + i.enc_len + i.prop_len],
		($4::float8[])[i.start + i.enc_len + i.prop_len + 1 : i.start + i.enc_len + i.prop_len + i.score_len],
		i.policy, i.model_version, i.sample, i.created_at,
		CASE WHEN i.shadow_len > 0 THEN i.shadow_arm END,
		CASE WHEN i.shadow_len > 0 THEN ($4::float8[])[i.start + i.enc_len + i.prop_len + i.score_len + 1 : i.start + i.enc_len + i.prop_len + i.score_len + i.shadow_len] END,
		NULLIF(i.slot, 0),
		CASE WHEN i.shadow_len > 0 AND i.slot > 0 THEN i.shadow_above END
	FROM input i
	WHERE EXISTS (SELECT FROM bandits b WHERE b.name = i.bandit AND b.deleted_at IS NULL)
	ORDER BY i.ord
	ON CONFLICT (bandit, event_id) DO NOTHING
	RETURNING d.id, d.bandit, d.event_id, d.created_at
), pending AS (
	INSERT INTO unrewarded (decision_id, bandit, created_at) SELECT id, bandit, created_at FROM ins
)
SELECT ins.id IS NOT NULL
FROM input i
LEFT JOIN ins ON ins.bandit = i.bandit AND ins.event_id = i.event_id
ORDER BY i.ord`

	// sqlLockRewards takes a bandit's reward lock until commit.
	sqlLockRewards = `SELECT pg_advisory_xact_lock($1::integer, hashtext($2::text))`

	// sqlInsertRewards inserts the rewards of decisions that have none,
	// removes those decisions from unrewarded, and returns per input
	// row, in order: the decision's ID (NULL: no such decision), whether
	// the reward was inserted, and the stored value if one was already
	// visible to the statement.
	sqlInsertRewards = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::float8[], $4::timestamptz[])
	WITH ORDINALITY AS t(bandit, event_id, value, received_at, ord)
), dec AS (
	SELECT i.*, (SELECT d.id FROM decisions d WHERE d.bandit = i.bandit AND d.event_id = i.event_id) AS id
	FROM input i
), ins AS (
	INSERT INTO rewards (decision_id, bandit, value, received_at)
	SELECT id, bandit, value, received_at FROM dec WHERE id IS NOT NULL
	ORDER BY ord
	ON CONFLICT (decision_id) DO NOTHING
	RETURNING decision_id
), settled AS (
	DELETE FROM unrewarded
	WHERE decision_id BETWEEN (SELECT min(decision_id) FROM ins) AND (SELECT max(decision_id) FROM ins)
		AND decision_id IN (SELECT decision_id FROM ins)
)
SELECT dec.id, ins.decision_id IS NOT NULL,
	CASE WHEN dec.id IS NOT NULL AND ins.decision_id IS NULL THEN (SELECT r.value FROM rewards r WHERE r.decision_id = dec.id) END
FROM dec
LEFT JOIN ins ON ins.decision_id = dec.id
ORDER BY dec.ord`
)

func decisionArgs(ws []*write) []any {
	n := len(ws)
	var (
		bandits, eventIDs, policies, samples = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		contexts                             = make([][]byte, n)
		starts, encLen, propLen, scoreLen    = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		arms, shadowArms, shadowLen, slots   = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		shadowAbove                          = make([]float64, n)
		versions                             = make([]int64, n)
		createdAt                            = make([]time.Time, n)
		size                                 int
	)
	for _, w := range ws {
		size += len(w.d.Encoded) + len(w.d.Propensities) + len(w.d.Scores) + len(w.d.ShadowPropensities)
	}
	flat := make([]float64, 0, size)
	for k, w := range ws {
		d := w.d
		bandits[k], eventIDs[k], contexts[k] = d.Bandit, d.EventID, d.Context
		starts[k] = int32(len(flat))
		encLen[k], propLen[k], scoreLen[k] = int32(len(d.Encoded)), int32(len(d.Propensities)), int32(len(d.Scores))
		flat = append(append(append(append(flat, d.Encoded...), d.Propensities...), d.Scores...), d.ShadowPropensities...)
		arms[k], policies[k], versions[k], samples[k], createdAt[k] = int32(d.Arm), d.Policy, d.ModelVersion, string(d.Sample), d.CreatedAt
		shadowArms[k], shadowLen[k] = int32(d.ShadowArm), int32(len(d.ShadowPropensities))
		slots[k], shadowAbove[k] = int32(d.Slot), d.ShadowAbove
	}
	return []any{bandits, eventIDs, contexts, flat, starts, encLen, propLen, scoreLen, arms, policies, versions, samples, createdAt, shadowArms, shadowLen, slots, shadowAbove}
}

func rewardArgs(ws []*write) []any {
	n := len(ws)
	bandits, eventIDs, values, received := make([]string, n), make([]string, n), make([]float64, n), make([]time.Time, n)
	for k, w := range ws {
		bandits[k], eventIDs[k], values[k], received[k] = w.r.Bandit, w.r.EventID, w.r.Value, w.r.ReceivedAt
	}
	return []any{bandits, eventIDs, values, received}
}

// scanDecisionOutcomes reads sqlInsertDecisions' rows into ws: an
// inserted row is stored as sent; the others are looked up after commit.
func scanDecisionOutcomes(rows pgx.Rows, ws []*write) error {
	defer rows.Close()
	k := 0
	for ; rows.Next(); k++ {
		if k >= len(ws) {
			return fmt.Errorf("insert decisions: more result rows than the %d sent", len(ws))
		}
		w := ws[k]
		var inserted bool
		if err := rows.Scan(&inserted); err != nil {
			return err
		}
		if inserted {
			w.stored, w.created = w.d, true
		} else {
			w.lookup = true
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if k != len(ws) {
		return fmt.Errorf("insert decisions: %d result rows for %d sent", k, len(ws))
	}
	return nil
}

// scanRewardOutcomes reads sqlInsertRewards' rows into ws.
func scanRewardOutcomes(rows pgx.Rows, ws []*write) error {
	defer rows.Close()
	k := 0
	for ; rows.Next(); k++ {
		if k >= len(ws) {
			return fmt.Errorf("insert rewards: more result rows than the %d sent", len(ws))
		}
		w := ws[k]
		var id *int64
		var inserted bool
		var value *float64
		if err := rows.Scan(&id, &inserted, &value); err != nil {
			return err
		}
		switch {
		case id == nil:
			w.fail(bandit.ErrNotFound)
		case inserted:
		case value == nil:
			w.lookup, w.decision = true, *id
		default:
			w.checkReward(*value)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if k != len(ws) {
		return fmt.Errorf("insert rewards: %d result rows for %d sent", k, len(ws))
	}
	return nil
}

// checkReward compares w's value with the stored one.
func (w *write) checkReward(stored float64) {
	if stored != w.r.Value {
		w.fail(fmt.Errorf("value %v, stored %v: %w", w.r.Value, stored, bandit.ErrConflict))
	}
}

// split sorts a batch into its decisions and its rewards, each in key
// order so that concurrent batches take row locks in the same order and
// cannot deadlock. A second write of a key already in the batch is
// returned in again, for the next batch: it is then answered against
// the first one's outcome, as it would be had it come a little later.
func split(batch []*write) (ds, rs, again []*write) {
	for _, w := range batch {
		if w.d != nil {
			ds = append(ds, w)
		} else {
			rs = append(rs, w)
		}
	}
	key := func(w *write) (string, string) {
		if w.d != nil {
			return w.d.Bandit, w.d.EventID
		}
		return w.r.Bandit, w.r.EventID
	}
	order := func(a, b *write) int {
		ab, ae := key(a)
		bb, be := key(b)
		return cmp.Or(cmp.Compare(ab, bb), cmp.Compare(ae, be))
	}
	dedup := func(ws []*write) (unique, dups []*write) {
		slices.SortStableFunc(ws, order)
		for _, w := range ws {
			if len(unique) > 0 && order(unique[len(unique)-1], w) == 0 {
				dups = append(dups, w)
				continue
			}
			unique = append(unique, w)
		}
		return unique, dups
	}
	ds, again = dedup(ds)
	rs, dups := dedup(rs)
	return ds, rs, append(again, dups...)
}

// commit writes a batch in one transaction and answers its writes, except
// those it returns, which belong in the next batch.
func (s *Postgres) commit(ctx context.Context, batch []*write) (again []*write) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommitTimeout)
	defer cancel()
	ds, rs, again := split(batch)

	err := s.sendBatch(ctx, ds, rs)
	if err != nil && retryAlone(err) {
		s.cfg.Logger.Warn("store: batch failed; retrying its rows one by one", "rows", len(ds)+len(rs), "err", err)
		err = s.rowByRow(ctx, ds, rs)
	}
	if err == nil {
		s.lookups(ctx, ds, rs)
		s.wrote(len(ds) + len(rs))
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.ObserveBatch(Batch{Decisions: len(ds), Rewards: len(rs), Commit: time.Since(start), Err: err})
	}
	for _, ws := range [][]*write{ds, rs} {
		for _, w := range ws {
			if err != nil {
				w.fail(err)
			}
			if w.done != nil {
				close(w.done)
			}
		}
	}
	return again
}

// retryAlone reports whether a failed batch is known to have been rolled
// back without effect, so that its rows can be retried one by one: the
// server rejected a statement, or the batch was never sent. After any
// other error (a lost connection) the outcome is unknown and every caller
// gets the error.
func retryAlone(err error) bool {
	var pgErr *pgconn.PgError
	var pre pgx.ErrPreprocessingBatch
	if IsUnavailable(err) {
		// A shutdown or terminated backend is a PgError too; retrying
		// row by row would only multiply the failures (issue 16).
		return false
	}
	return errors.As(err, &pgErr) || errors.As(err, &pre)
}

// lockKeys returns the distinct bandits of the (sorted) rewards, whose
// reward locks the batch takes.
func (s *Postgres) lockKeys(rs []*write) []string {
	if s.unordered {
		return nil
	}
	var keys []string
	for _, w := range rs {
		if len(keys) == 0 || keys[len(keys)-1] != w.r.Bandit {
			keys = append(keys, w.r.Bandit)
		}
	}
	return keys
}

// sendBatch runs the batch as one pipelined implicit transaction: one
// round trip, committed by the pipeline's closing Sync.
func (s *Postgres) sendBatch(ctx context.Context, ds, rs []*write) error {
	b := &pgx.Batch{}
	if len(ds) > 0 {
		b.Queue(sqlInsertDecisions, decisionArgs(ds)...)
	}
	keys := s.lockKeys(rs)
	for _, k := range keys {
		b.Queue(sqlLockRewards, rewardLockSpace, k)
	}
	if len(rs) > 0 {
		b.Queue(sqlInsertRewards, rewardArgs(rs)...)
	}
	br := s.pool.SendBatch(ctx, b)
	err := func() error {
		if len(ds) > 0 {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			if err := scanDecisionOutcomes(rows, ds); err != nil {
				return err
			}
		}
		for range keys {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if len(rs) > 0 {
			rows, err := br.Query()
			if err != nil {
				return err
			}
			if err := scanRewardOutcomes(rows, rs); err != nil {
				return err
			}
		}
		return nil
	}()
	// Close reads up to the Sync's ReadyForQuery: the commit.
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		for _, w := range ds {
			w.reset()
		}
		for _, w := range rs {
			w.reset()
		}
	}
	return err
}

// rowByRow runs the rows in one transaction, each in a savepoint of its
// own, so that a row the server rejects fails alone. It is the slow path
// after a batch failed.
func (s *Postgres) rowByRow(ctx context.Context, ds, rs []*write) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }() // a no-op after Commit
	one := func(w *write, sql string, args []any, scan func(pgx.Rows, []*write) error) error {
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		rows, err := sp.Query(ctx, sql, args...)
		if err == nil {
			err = scan(rows, []*write{w})
		}
		if err == nil {
			return sp.Commit(ctx)
		}
		if rerr := sp.Rollback(ctx); rerr != nil {
			return rerr
		}
		if !retryAlone(err) {
			return err
		}
		w.reset()
		w.fail(err)
		return nil
	}
	for _, w := range ds {
		if err := one(w, sqlInsertDecisions, decisionArgs([]*write{w}), scanDecisionOutcomes); err != nil {
			return err
		}
	}
	for _, k := range s.lockKeys(rs) {
		if _, err := tx.Exec(ctx, sqlLockRewards, rewardLockSpace, k); err != nil {
			return err
		}
	}
	for _, w := range rs {
		if err := one(w, sqlInsertRewards, rewardArgs([]*write{w}), scanRewardOutcomes); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// lookups settles, after commit, the rows whose outcome depended on a row
// that another transaction committed while the batch ran, and tells a
// missing bandit from such a row.
func (s *Postgres) lookups(ctx context.Context, ds, rs []*write) {
	for _, w := range ds {
		if !w.lookup || w.err != nil {
			continue
		}
		d, err := s.getDecision(ctx, w.d.Bandit, w.d.EventID)
		if err != nil {
			w.fail(err) // bandit.ErrNotFound: no such bandit
			continue
		}
		w.stored = d
	}
	for _, w := range rs {
		if !w.lookup || w.err != nil {
			continue
		}
		var value float64
		if err := s.pool.QueryRow(ctx, `SELECT value FROM rewards WHERE decision_id = $1`, w.decision).Scan(&value); err != nil {
			w.fail(err)
			continue
		}
		w.checkReward(value)
	}
}
