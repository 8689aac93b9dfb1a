package store

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// Config tunes the PostgreSQL store. The zero value is ready to use.
type Config struct {
	// MaxBatch is the most decisions and rewards written in one
	// transaction. Zero means 256. One disables group commit: every write
	// is then its own transaction, run on the caller's goroutine (the
	// baseline the benchmark compares against).
	MaxBatch int
	// MaxDelay is how long a write may wait for others to join its batch
	// while another batch is being committed. A write that arrives when
	// nothing is being committed is sent at once, whatever MaxDelay is.
	// Zero means 2ms.
	MaxDelay time.Duration
	// MaxInFlight is how many batches may be committing at once, each on
	// its own connection. Zero means 1: the writes that arrive while a
	// batch commits make the next batch, so batches grow with the load
	// and PostgreSQL pays its per-commit cost (the statements' executor
	// start, the WAL flush: about a millisecond of its CPU on the bench
	// machine, BenchmarkCommit) once per batch. Two in flight sent a
	// batch every MaxDelay while one committed: smaller batches and more
	// PostgreSQL CPU per decision than with one (make bench-service at
	// 64 clients; bench/store-tuning.md). Rewards could not overlap anyway: a batch
	// holds its bandits' reward locks until it commits. The pool needs
	// at least this many connections besides those that reads use.
	MaxInFlight int
	// CommitTimeout bounds one batch's round trip to the database. Zero
	// means 5s: a database that does not answer makes the writes fail
	// (503 at the API) instead of hanging them.
	CommitTimeout time.Duration
	// Observer, when not nil, is told about every batch committed (or
	// failed): how many rows it had and how long its commit took.
	Observer Observer
	// Logger receives warnings about failed batches. Nil discards them.
	Logger *slog.Logger
}

// Defaults of Config; see its fields.
const (
	DefaultMaxBatch      = 256
	DefaultMaxDelay      = 2 * time.Millisecond
	DefaultMaxInFlight   = 1
	DefaultCommitTimeout = 5 * time.Second
)

func (c Config) validate() error {
	var errs []error
	if c.MaxBatch < 0 {
		errs = append(errs, fmt.Errorf("MaxBatch is %d, want 0 (default %d) or more", c.MaxBatch, DefaultMaxBatch))
	}
	if c.MaxDelay < 0 {
		errs = append(errs, fmt.Errorf("MaxDelay is %v, want 0 (default %v) or more", c.MaxDelay, DefaultMaxDelay))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("MaxInFlight is %d, want 0 (default %d) or more", c.MaxInFlight, DefaultMaxInFlight))
	}
	if c.CommitTimeout < 0 {
		errs = append(errs, fmt.Errorf("CommitTimeout is %v, want 0 (default %v) or more", c.CommitTimeout, DefaultCommitTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: config: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.MaxBatch = cmp.Or(c.MaxBatch, DefaultMaxBatch)
	c.MaxDelay = cmp.Or(c.MaxDelay, DefaultMaxDelay)
	c.MaxInFlight = cmp.Or(c.MaxInFlight, DefaultMaxInFlight)
	c.CommitTimeout = cmp.Or(c.CommitTimeout, DefaultCommitTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// The observer of the group commits is the domain's (bandit.StoreBatch,
// bandit.StoreObserver), so that the API implements it without
// importing this package.
type (
	// Batch describes one group commit (bandit.StoreBatch).
	Batch = bandit.StoreBatch
	// Observer is told about every batch the PostgreSQL store commits
	// (bandit.StoreObserver).
	Observer = bandit.StoreObserver
	// ObserverFunc adapts a function to Observer
	// (bandit.StoreObserverFunc).
	ObserverFunc = bandit.StoreObserverFunc
)
