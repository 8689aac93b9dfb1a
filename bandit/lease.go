package bandit

import (
	"context"
	"errors"
	"fmt"
)

// leaseToken returns the fencing token that the snapshots this agent
// persists carry: its trainer lease's in a fleet, zero without one
// (nothing to check).
func (a *Agent) leaseToken() int64 {
	if a.fl == nil {
		return 0
	}
	return a.fl.token.Load()
}

// fence handles a snapshot of version refused by the store because
// another replica took the trainer lease it was written under (err is
// ErrFenced): this replica steps down at once, without waiting for the
// next election, and its trainer goroutine installs the newest stored
// version (the successor's) before following. It logs once per lost
// lease. It reports whether err was ErrFenced.
func (a *Agent) fence(version int64, err error) bool {
	if a.fl == nil || !errors.Is(err, ErrFenced) {
		return false
	}
	token := a.fl.token.Load()
	a.fl.stale.Store(true)
	a.fl.leading.Store(false)
	a.fl.token.Store(0)
	if a.fl.fenced.Swap(token) != token {
		a.log.Warn("another replica took the trainer lease over: this replica's posterior version was not persisted, and it steps down to follow", "version", version, "token", token)
	}
	a.notify()
	return true
}

// unfence installs the newest stored snapshot after a fenced write,
// whatever its version: this replica's posterior was trained on a lease
// it had lost, and versions after a failover may repeat numbers
// (nextVersion goes on from the last persisted), so only the store's
// is the fleet's.
func (a *Agent) unfence(ctx context.Context) error {
	snap, err := a.store.LatestSnapshot(ctx, a.name)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return fmt.Errorf("follow %s: %w", a.name, err)
	case snap.Version != a.model.Load().version || snap.LeaseToken != a.fl.fenced.Load():
		prev := a.model.Load()
		if err := a.install(ctx, snap, true); err != nil {
			return err
		}
		a.followLag(prev)
	}
	a.fl.stale.Store(false)
	_, err = a.readRows(ctx)
	return err
}
