package bandit

import "errors"

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
