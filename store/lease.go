package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultLease is the default length of a trainer lease (serve
// --trainer-lease): a replica that stops renewing its leases (frozen by
// SIGSTOP, cut off from the database, or a process whose session
// PostgreSQL has not yet seen end) loses them this long after its last
// renewal at the latest.
const DefaultLease = 5 * time.Second

// LeaseClaim is a replica's claim to a bandit's trainer lease at an
// election (TrainerLeases.HoldLeases).
type LeaseClaim struct {
	Bandit string
	// Token is the fencing token of the lease the claimant holds, zero
	// if it holds none.
	Token int64
	// Locked says that the claimant holds the bandit's trainer lock (a
	// session-level advisory lock, Fleet). Getting it from a holder that
	// had it means the holder's session ended: the claimant takes the
	// lease at once instead of waiting for it to expire.
	Locked bool
}

// TrainerLeases records which replica trains each bandit: a lease per
// bandit with its holder, a fencing token that rises by one at each
// change of holder, and an expiry that the holder renews. Postgres keeps
// them in the trainer_leases table, visible to every replica; Memory,
// a single process, holds every lease always.
type TrainerLeases interface {
	// HoldLeases renews the leases the claims hold (same token, same
	// holder) and takes those that are free, expired, or whose holder
	// had the trainer lock that the claim now has (with the token plus
	// one), for ttl from now on the store's clock. It returns the token
	// of every lease holder holds after the call; a claim it lacks in
	// the result is held by another replica.
	HoldLeases(ctx context.Context, holder string, claims []LeaseClaim, ttl time.Duration) (map[string]int64, error)
	// ReleaseLeases ends the leases of holder listed in held (bandit to
	// token) that it still holds, so that another replica takes them at
	// its next election.
	ReleaseLeases(ctx context.Context, holder string, held map[string]int64) error
}

var (
	_ TrainerLeases = (*Postgres)(nil)
	_ TrainerLeases = (*Memory)(nil)
)

// HoldLeases renews and takes trainer leases (TrainerLeases) in one
// statement. A lease is renewed when its token and holder are the
// claim's, and taken, with token + 1, when it has expired or when the
// claim has the trainer lock that its holder had; a bandit without a
// lease row gets one with token 1. Concurrent claims to one lease are
// serialized by its row lock and re-checked against the row the winner
// wrote, so at most one replica holds a lease at any time of the
// database's clock.
func (s *Postgres) HoldLeases(ctx context.Context, holder string, claims []LeaseClaim, ttl time.Duration) (map[string]int64, error) {
	if ttl <= 0 {
		return nil, errorf("store: hold trainer leases: ttl %v, want > 0", ttl)
	}
	names := make([]string, len(claims))
	tokens := make([]int64, len(claims))
	locked := make([]bool, len(claims))
	for i, c := range claims {
		names[i], tokens[i], locked[i] = c.Bandit, c.Token, c.Locked
	}
	rows, err := s.pool.Query(ctx, `
		WITH c AS (SELECT * FROM unnest($2::text[], $3::bigint[], $4::boolean[]) AS c(bandit, token, locked)),
		upd AS (
			UPDATE trainer_leases l SET
				holder = $1,
				token = CASE WHEN l.token = c.token AND l.holder = $1 THEN l.token ELSE l.token + 1 END,
				locked = c.locked,
				expires_at = now() + $5::bigint * interval '1 microsecond'
			FROM c
			WHERE l.bandit = c.bandit AND ((l.token = c.token AND l.holder = $1) OR l.expires_at <= now() OR (c.locked AND l.locked))
			RETURNING l.bandit, l.token),
		ins AS (
			INSERT INTO trainer_leases (bandit, holder, token, locked, expires_at)
			SELECT c.bandit, $1, 1, c.locked, now() + $5::bigint * interval '1 microsecond' FROM c
			WHERE NOT EXISTS (SELECT FROM trainer_leases l WHERE l.bandit = c.bandit)
			ON CONFLICT (bandit) DO NOTHING
			RETURNING bandit, token)
		SELECT bandit, token FROM upd UNION ALL SELECT bandit, token FROM ins`,
		holder, names, tokens, locked, ttl.Microseconds())
	if err != nil {
		return nil, errorf("store: hold trainer leases: %w", err)
	}
	out := map[string]int64{}
	var name string
	var token int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &token}, func() error {
		out[name] = token
		return nil
	}); err != nil {
		return nil, errorf("store: hold trainer leases: %w", err)
	}
	return out, nil
}

// ReleaseLeases ends holder's leases listed in held (TrainerLeases): they
// expire now, keeping their tokens, so that the next holder's is higher.
func (s *Postgres) ReleaseLeases(ctx context.Context, holder string, held map[string]int64) error {
	if len(held) == 0 {
		return nil
	}
	names := make([]string, 0, len(held))
	tokens := make([]int64, 0, len(held))
	for b, t := range held {
		names, tokens = append(names, b), append(tokens, t)
	}
	_, err := s.pool.Exec(ctx, `
		UPDATE trainer_leases l SET expires_at = now(), locked = false
		FROM unnest($2::text[], $3::bigint[]) AS c(bandit, token)
		WHERE l.bandit = c.bandit AND l.token = c.token AND l.holder = $1`, holder, names, tokens)
	if err != nil {
		return errorf("store: release trainer leases: %w", err)
	}
	return nil
}

// memoryLeaseToken is the token of every lease of the in-memory store.
const memoryLeaseToken = 1

// HoldLeases holds every claimed lease, with token 1: the in-memory
// store serves one process, which trains every bandit.
func (m *Memory) HoldLeases(_ context.Context, _ string, claims []LeaseClaim, _ time.Duration) (map[string]int64, error) {
	out := make(map[string]int64, len(claims))
	for _, c := range claims {
		out[c.Bandit] = memoryLeaseToken
	}
	return out, nil
}

// ReleaseLeases does nothing: the in-memory store's leases are always
// held.
func (m *Memory) ReleaseLeases(context.Context, string, map[string]int64) error { return nil }
