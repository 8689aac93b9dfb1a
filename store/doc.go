// Package store persists Refinery's bandits, decisions, rewards and
// posterior snapshots. It has two implementations of bandit.Store with the
// same behaviour, checked by one contract suite (package storetest):
//
//   - Postgres, on PostgreSQL through a pgx v5 pool. Decisions and rewards
//     are written with group commit: the rows of concurrent callers are
//     batched into one transaction and each caller is answered after that
//     transaction commits, so an acknowledged write is durable.
//   - Memory, a map behind a mutex, for `make run` without a database and
//     for simulations. It is not durable: Ephemeral reports true and
//     everything is lost when the process exits.
//
// The schema lives in package migrations; Migrate applies it.
//
// Conventions shared by both stores:
//   - Times are returned in UTC, truncated to microseconds (PostgreSQL's
//     resolution). A zero CreatedAt or ReceivedAt is set to the current
//     time; a non-zero one is kept, so that simulations and tests can use
//     their own clock. Bandit timestamps are always set by the store.
//   - JSON values (configuration, context, metrics) must be valid JSON
//     without NUL characters; an empty one is stored as {}. PostgreSQL
//     keeps them as jsonb, so what is read back is equal as JSON but not
//     necessarily byte for byte (key order, white space).
//   - Empty float slices are read back as nil.
//   - Inputs are never modified, and returned values share no memory with
//     the store.
package store
