package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refinery-bandits/refinery/bandit"
)

// The store reports an unavailable database through the domain's
// bandit.ErrStoreUnavailable (errors.Is), keeping the cause in the
// chain, and only then: a refused request (a unique violation, a
// missing bandit) is not unavailability.
func TestErrorsOfAnUnavailableDatabaseAreTheDomains(t *testing.T) {
	shutdown := &pgconn.PgError{Code: "57P01"} // admin_shutdown
	for _, tt := range []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"a closed store", fmt.Errorf("store: insert decision b/e: %w", ErrClosed), true},
		{"a terminated backend", errorf("store: get bandit b: %w", shutdown), true},
		{"a timeout", errorf("store: counts b: %w", context.DeadlineExceeded), true},
		{"a refused connection", errorf("store: list bandits: %w", errors.New("failed to connect to `host=127.0.0.1`: connection refused")), true},
		{"a unique violation", errorf("store: create key: %w", &pgconn.PgError{Code: uniqueViolation}), false},
		{"a missing bandit", errorf("store: get bandit b: %w", bandit.ErrNotFound), false},
	} {
		if got := errors.Is(tt.err, bandit.ErrStoreUnavailable); got != tt.unavailable {
			t.Errorf("%s: errors.Is(%v, bandit.ErrStoreUnavailable) = %v, want %v", tt.name, tt.err, got, tt.unavailable)
		}
	}
	err := errorf("store: get bandit b: %w", shutdown)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "57P01" || err.Error() != "store: get bandit b: "+shutdown.Error() {
		t.Errorf("the marked error %q lost its cause or its message", err)
	}
	if again := markUnavailable(fmt.Errorf("store: retry: %w", err)); errors.Unwrap(again) != err {
		t.Errorf("marked twice: %#v", again)
	}
}
