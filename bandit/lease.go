package bandit

import (
	"context"
	"errors"
	"fmt"
)

// saveFenced stores snap under this replica's trainer lease: in a fleet
// with the lease's token (Snapshot.LeaseToken), which the store checks,
// and not at all without a lease (the election took it away while a
// retraining ran: a snapshot without a token would not be checked);
// without a fleet unchecked. A snapshot refused because another replica
// took the lease steps this replica down (fence). It reports whether
// snap was stored.
func (a *Agent) saveFenced(ctx context.Context, snap *Snapshot) (bool, error) {
	if a.fl != nil {
		snap.LeaseToken = a.fl.token.Load()
		if snap.LeaseToken == 0 {
			return false, nil
		}
	}
	err := a.store.SaveSnapshot(ctx, snap)
	if a.fence(snap.Version, err) {
		return false, nil
	}
	return err == nil, err
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
