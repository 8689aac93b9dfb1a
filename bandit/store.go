package bandit

import (
	"context"
	"time"
)

// Store is the persistence the domain needs. Implementations: the
// PostgreSQL store and the in-memory store in package store; both pass
// the same contract suite.
//
// Writes are durable when they return nil: an acknowledged decision or
// reward survives a crash of the process (the in-memory store is the
// documented exception: it survives nothing).
type Store interface {
	// CreateBandit stores a new bandit; ErrExists if the name is taken.
	CreateBandit(ctx context.Context, b *Bandit) error
	// UpdateBandit replaces the configuration and ArchivedAt of an
	// existing bandit; ErrNotFound if there is none.
	UpdateBandit(ctx context.Context, b *Bandit) error
	// GetBandit returns one bandit; ErrNotFound if there is none (or it
	// was deleted).
	GetBandit(ctx context.Context, name string) (*Bandit, error)
	// ListBandits returns every bandit but the deleted, ordered by name.
	ListBandits(ctx context.Context) ([]*Bandit, error)
	// DeleteBandit deletes a bandit and its snapshots. Without purge its
	// decisions and rewards stay (the decision log, for export and
	// audit) and so does its name: CreateBandit of that name fails with
	// ErrExists and ErrDeleted until a purge, so that a new bandit never
	// inherits another's log. With purge the decisions and rewards go
	// too and the name is free. ErrNotFound if there is no such bandit,
	// or only a deleted one's log and purge is false.
	DeleteBandit(ctx context.Context, name string, purge bool) error

	// InsertDecision stores d unless a decision with the same event ID
	// already exists for that bandit. It returns the stored decision and
	// whether it was created by this call: on an existing event ID it
	// returns the earlier decision and created == false, so that the
	// caller can return it (idempotency) or report a conflict.
	// ErrNotFound if the bandit does not exist.
	InsertDecision(ctx context.Context, d *Decision) (stored *Decision, created bool, err error)
	// InsertDecisions stores each of ds as InsertDecision does, written
	// together: the PostgreSQL store hands them to its group committer
	// at once, so that they go in one commit (two when they straddle its
	// MaxBatch with other pending writes). It returns
	// per decision, in order, the stored one and whether this call
	// created it, once every one is durable; an error if any failed
	// (others may be stored: each is idempotent to retry). Event IDs
	// within ds must be distinct.
	InsertDecisions(ctx context.Context, ds []*Decision) (stored []*Decision, created []bool, err error)
	// GetDecision returns one decision; ErrNotFound if there is none.
	GetDecision(ctx context.Context, bandit, eventID string) (*Decision, error)
	// InsertReward stores the reward of a decision. ErrNotFound if the
	// event is unknown; nil without a new row if the same value is
	// already stored; ErrConflict if a different value is.
	InsertReward(ctx context.Context, r *Reward) error

	// TrainingRows streams the bandit's rewarded decisions with Seq >
	// after, in Seq order, calling fn for each; fn's error stops the
	// read and is returned. A row's Context is read only if its Encoded
	// is shorter than dim (a decision made before the bandit grew, which
	// the reader encodes again); other rows have a nil Context. The
	// Encoded slice passed to fn may be reused after fn returns.
	TrainingRows(ctx context.Context, bandit string, after int64, dim int, fn func(TrainingRow) error) error
	// Unrewarded returns decisions made before the given time that have
	// no reward, oldest first, at most limit of them, for the reward
	// wait/default policy.
	Unrewarded(ctx context.Context, bandit string, before time.Time, limit int) ([]*Decision, error)
	// ListDecisions pages through the bandit's decisions newest first:
	// at most limit decisions created before the cursor (zero time: from
	// the newest), with their rewards.
	ListDecisions(ctx context.Context, bandit string, before time.Time, limit int) ([]*DecisionRecord, error)
	// Decisions returns a page of the bandit's decisions with their
	// rewards, oldest first in (CreatedAt, ID) order, as q selects.
	Decisions(ctx context.Context, bandit string, q DecisionQuery) ([]*DecisionRecord, error)
	// DecisionRecord returns one decision with its reward, if any;
	// ErrNotFound if there is none.
	DecisionRecord(ctx context.Context, bandit, eventID string) (*DecisionRecord, error)
	// Counts returns how many decisions and rewards the bandit has.
	Counts(ctx context.Context, bandit string) (decisions, rewards int64, err error)

	// SaveSnapshot stores a posterior snapshot; saving a version that
	// exists replaces it.
	SaveSnapshot(ctx context.Context, s *Snapshot) error
	// LatestSnapshot returns the bandit's newest snapshot; ErrNotFound
	// if it has none.
	LatestSnapshot(ctx context.Context, bandit string) (*Snapshot, error)

	// Ping checks that the store is reachable and its schema current.
	Ping(ctx context.Context) error
	// Ephemeral reports whether the store loses everything on exit (the
	// in-memory store).
	Ephemeral() bool
	// Close flushes pending writes and releases resources.
	Close() error
}
