package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/refinery-bandits/refinery/bandit"
)

// sqlDecisionRange: a bandit's decisions made in [$2, $3) after the
// cursor ($4, $5) in (created_at, id) order, oldest first, at most $6 of
// them (NULL: all), with their rewards (one index range scan of
// decisions_bandit_created_at_idx and a lookup by unique key per row).
// Export streams it whole; Decisions reads it a page at a time.
const sqlDecisionRange = `
SELECT ` + decisionColumns + `, r.value, r.received_at, d.id
FROM decisions d LEFT JOIN LATERAL (
	SELECT r.value, r.received_at FROM rewards r WHERE r.decision_id = d.id OFFSET 0) r ON true
WHERE d.bandit = $1 AND d.created_at >= $2 AND d.created_at < $3 AND (d.created_at, d.id) > ($4, $5)
ORDER BY d.created_at, d.id
LIMIT $6`

// timeBound is t as a query parameter, or the given infinity for a zero t.
func timeBound(t time.Time, inf pgtype.InfinityModifier) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
	}
	return pgtype.Timestamptz{Time: t, Valid: true}
}

// scanRecord scans a row of sqlDecisionRange.
func scanRecord(row pgx.Row) (*bandit.DecisionRecord, error) {
	var value *float64
	var received *time.Time
	var id int64
	d, err := scanDecision(row, &value, &received, &id)
	if err != nil {
		return nil, err
	}
	rec := &bandit.DecisionRecord{Decision: *d, ID: id}
	if value != nil && received != nil {
		rec.Reward = &bandit.Reward{Bandit: d.Bandit, EventID: d.EventID, Value: *value, ReceivedAt: received.UTC()}
	}
	return rec, nil
}

// Export calls fn for each decision of bandit name created in [from, to)
// (a zero from or to: unbounded), oldest first (ties by insertion), with
// its reward if it has one, Encoded filled in. It streams: one query
// whose rows are read as fn consumes them, so memory does not grow with
// the range; the query holds one connection until it ends. The records
// passed to fn are fn's to keep. A deleted bandit whose log was kept
// (DeleteBandit without purge) exports its log.
func (s *Postgres) Export(ctx context.Context, name string, from, to time.Time, fn func(*bandit.DecisionRecord) error) error {
	if err := s.banditExists(ctx, name); err != nil {
		return errorf("store: export %s: %w", name, err)
	}
	lo, hi := timeBound(from, pgtype.NegativeInfinity), timeBound(to, pgtype.Infinity)
	rows, err := s.pool.Query(ctx, sqlDecisionRange, name, lo, hi, lo, 0, nil)
	if err != nil {
		return errorf("store: export %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		rec, err := scanRecord(rows)
		if err != nil {
			return errorf("store: export %s: %w", name, err)
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return errorf("store: export %s: %w", name, err)
	}
	return nil
}

// Decisions returns a page of the bandit's decisions; see bandit.Store.
// ErrNotFound if the bandit does not exist (or was deleted).
func (s *Postgres) Decisions(ctx context.Context, name string, q bandit.DecisionQuery) ([]*bandit.DecisionRecord, error) {
	if q.Limit <= 0 {
		return nil, errorf("store: decisions %s: limit %d, want > 0", name, q.Limit)
	}
	if err := s.liveBandit(ctx, name); err != nil {
		return nil, errorf("store: decisions %s: %w", name, err)
	}
	lo, hi := timeBound(q.Since, pgtype.NegativeInfinity), timeBound(q.Until, pgtype.Infinity)
	after, afterID := lo, int64(0)
	if q.AfterID > 0 {
		after, afterID = pgtype.Timestamptz{Time: q.AfterTime, Valid: true}, q.AfterID
	}
	rows, err := s.pool.Query(ctx, sqlDecisionRange, name, lo, hi, after, afterID, q.Limit)
	if err != nil {
		return nil, errorf("store: decisions %s: %w", name, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*bandit.DecisionRecord, error) { return scanRecord(row) })
	if err != nil {
		return nil, errorf("store: decisions %s: %w", name, err)
	}
	return out, nil
}

// DecisionRecord returns one decision with its reward; ErrNotFound if
// there is none (or its bandit was deleted).
func (s *Postgres) DecisionRecord(ctx context.Context, name, eventID string) (*bandit.DecisionRecord, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, `
SELECT `+decisionColumns+`, r.value, r.received_at, d.id
FROM decisions d LEFT JOIN LATERAL (
	SELECT r.value, r.received_at FROM rewards r WHERE r.decision_id = d.id OFFSET 0) r ON true
WHERE d.bandit = $1 AND d.event_id = $2
	AND EXISTS (SELECT FROM bandits b WHERE b.name = d.bandit AND b.deleted_at IS NULL)`, name, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return nil, errorf("store: decision %s/%s: %w", name, eventID, err)
	}
	return rec, nil
}

// liveBandit is ErrNotFound unless the bandit exists and is not deleted.
func (s *Postgres) liveBandit(ctx context.Context, name string) error {
	var ok bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM bandits WHERE name = $1 AND deleted_at IS NULL)`, name).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return bandit.ErrNotFound
	}
	return nil
}

// DeleteBandit deletes a bandit; see bandit.Store.
//
// Without purge it marks the bandit deleted (the tombstone that keeps
// its log and its name) and deletes its snapshots. Decision inserts
// check for a live bandit in the same statement: one that started before
// the tombstone committed lands in the kept log, where it belongs; none
// lands after.
//
// A purge deletes the bandit's rewards, pending entries, decisions,
// snapshots and row in one transaction that first locks decisions
// against inserts (SHARE ROW EXCLUSIVE, for the transaction's length):
// an insert of this bandit's decisions that started before the purge
// has committed by then and is deleted with the rest, and one that
// waits on the lock finds no bandit. Other bandits' decision writes wait
// for the purge too; purges are rare.
func (s *Postgres) DeleteBandit(ctx context.Context, name string, purge bool) error {
	if !purge {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			return errorf("store: delete bandit %s: %w", name, err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		tag, err := tx.Exec(ctx, `UPDATE bandits SET deleted_at = $2 WHERE name = $1 AND deleted_at IS NULL`, name, now())
		if err == nil && tag.RowsAffected() == 0 {
			err = bandit.ErrNotFound
		}
		if err == nil {
			_, err = tx.Exec(ctx, `DELETE FROM snapshots WHERE bandit = $1`, name)
		}
		if err == nil {
			err = tx.Commit(ctx)
		}
		if err != nil {
			return errorf("store: delete bandit %s: %w", name, err)
		}
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE decisions IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `SELECT FROM bandits WHERE name = $1 FOR UPDATE`, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return bandit.ErrNotFound
		}
		for _, q := range []string{
			`DELETE FROM rewards WHERE bandit = $1`,
			`DELETE FROM unrewarded WHERE bandit = $1`,
			`DELETE FROM decisions WHERE bandit = $1`,
			`DELETE FROM snapshots WHERE bandit = $1`,
			`DELETE FROM bandits WHERE name = $1`,
		} {
			if _, err := tx.Exec(ctx, q, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return errorf("store: purge bandit %s: %w", name, err)
	}
	return nil
}

// KeptLog returns a deleted bandit whose decision log was kept
// (DeleteBandit without purge), for export; bandit.ErrNotFound if there
// is none.
func (s *Postgres) KeptLog(ctx context.Context, name string) (*bandit.Bandit, error) {
	b, err := scanBandit(s.pool.QueryRow(ctx, `SELECT `+banditColumns+` FROM bandits WHERE name = $1 AND deleted_at IS NOT NULL`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		err = bandit.ErrNotFound
	}
	if err != nil {
		return nil, errorf("store: kept log %s: %w", name, err)
	}
	return b, nil
}
