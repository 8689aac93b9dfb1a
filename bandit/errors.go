package bandit

import (
	"errors"
	"fmt"
	"time"
)

// Domain errors. Adapters (store, api) translate their own failures into
// these so that callers can test with errors.Is.
var (
	// ErrNotFound: the bandit, decision or snapshot does not exist.
	ErrNotFound = errors.New("bandit: not found")
	// ErrExists: a bandit with that name already exists.
	ErrExists = errors.New("bandit: already exists")
	// ErrConflict: the request contradicts what is already stored, for
	// example a different reward value for an event that already has one.
	ErrConflict = errors.New("bandit: conflict")
	// ErrDeleted: the name belongs to a deleted bandit whose decision
	// log was kept (Store.DeleteBandit without purge); it comes with
	// ErrExists from CreateBandit.
	ErrDeleted = errors.New("bandit: the name is held by a deleted bandit's decision log")
	// ErrArchived: the bandit is archived and takes no new decisions.
	ErrArchived = errors.New("bandit: archived")
	// ErrFenced: a snapshot was written under a trainer lease that
	// another replica has taken since (Snapshot.LeaseToken is stale);
	// nothing was stored.
	ErrFenced = errors.New("bandit: fenced: another replica holds the trainer lease")
)

// RewardConflictError is a reward for an event that already has a
// different one; errors.Is(err, ErrConflict) holds. When the stored
// reward is the bandit's reward.default, applied because no reward came
// within reward.wait, Default is true, so that the client learns why.
type RewardConflictError struct {
	EventID string
	// Stored is the reward the event has, ReceivedAt when it was stored.
	Stored     float64
	ReceivedAt time.Time
	// Default: Stored is reward.default, applied after Wait.
	Default bool
	Wait    time.Duration
}

func (e *RewardConflictError) Error() string {
	at := e.ReceivedAt.UTC().Format(time.RFC3339)
	if e.Default {
		return fmt.Sprintf("event %q already has the reward %g of reward.default, applied at %s because no reward came within reward.wait (%s)", e.EventID, e.Stored, at, e.Wait)
	}
	return fmt.Sprintf("event %q already has a different reward, %g, received at %s", e.EventID, e.Stored, at)
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *RewardConflictError) Unwrap() error { return ErrConflict }
