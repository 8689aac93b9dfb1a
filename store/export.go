package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/refinery-bandits/refinery/bandit"
)

// sqlExport: a bandit's decisions made in [from, to), oldest first, with
// their rewards (one index range scan of decisions_bandit_created_at_idx
// and a lookup by unique key per row).
const sqlExport = `
SELECT ` + decisionColumns + `, r.value, r.received_at
FROM decisions d LEFT JOIN LATERAL (
	SELECT r.value, r.received_at FROM rewards r WHERE r.decision_id = d.id OFFSET 0) r ON true
WHERE d.bandit = $1 AND d.created_at >= $2 AND d.created_at < $3
ORDER BY d.created_at, d.id`

// Export calls fn for each decision of bandit name created in [from, to)
// (a zero from or to: unbounded), oldest first (ties by insertion), with
// its reward if it has one, Encoded filled in. It streams: one query
// whose rows are read as fn consumes them, so memory does not grow with
// the range; the query holds one connection until it ends. The records
// passed to fn are fn's to keep.
func (s *Postgres) Export(ctx context.Context, name string, from, to time.Time, fn func(*bandit.DecisionRecord) error) error {
	if err := s.banditExists(ctx, name); err != nil {
		return fmt.Errorf("store: export %s: %w", name, err)
	}
	lo := pgtype.Timestamptz{Time: from, Valid: true}
	if from.IsZero() {
		lo = pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	}
	hi := pgtype.Timestamptz{Time: to, Valid: true}
	if to.IsZero() {
		hi = pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	rows, err := s.pool.Query(ctx, sqlExport, name, lo, hi)
	if err != nil {
		return fmt.Errorf("store: export %s: %w", name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var value *float64
		var received *time.Time
		d, err := scanDecision(rows, &value, &received)
		if err != nil {
			return fmt.Errorf("store: export %s: %w", name, err)
		}
		rec := &bandit.DecisionRecord{Decision: *d}
		if value != nil && received != nil {
			rec.Reward = &bandit.Reward{Bandit: d.Bandit, EventID: d.EventID, Value: *value, ReceivedAt: received.UTC()}
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: export %s: %w", name, err)
	}
	return nil
}
