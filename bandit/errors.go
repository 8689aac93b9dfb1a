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
)
