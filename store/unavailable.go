package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refinery-bandits/refinery/bandit"
)

// errorf is fmt.Errorf for the errors the PostgreSQL store returns: an
// error that says the database could not be reached or did not answer in
// time (IsUnavailable) is marked as bandit.ErrStoreUnavailable, through
// which the domain and the API learn it without importing this package.
func errorf(format string, args ...any) error {
	return markUnavailable(fmt.Errorf(format, args...))
}

// markUnavailable returns err, marked as bandit.ErrStoreUnavailable
// (errors.Is) when IsUnavailable(err); err itself stays in the chain.
func markUnavailable(err error) error {
	if err == nil || errors.Is(err, bandit.ErrStoreUnavailable) || !IsUnavailable(err) {
		return err
	}
	return &unavailableError{err}
}

// unavailableError is an error of an unavailable database.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{e.err, bandit.ErrStoreUnavailable} }

// IsUnavailable reports whether err says the database could not be
// reached or did not answer in time, rather than that it refused the
// request: a refused or reset connection, a connection closed by the
// server (terminated backend, shutdown), a server that cannot accept
// connections now, a timeout, a cancelled statement, or a
// serialization failure. Such an error is worth a retry later; the API
// answers it 503 with Retry-After (issue 16, finding 4). A write that
// failed so may have committed: the store's writes are idempotent, so
// retrying it with the same event ID and value is safe.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"): // connection_exception
			return true
		case strings.HasPrefix(pgErr.Code, "57P"): // admin_shutdown, crash_shutdown, cannot_connect_now, ...
			return true
		}
		switch pgErr.Code {
		case "53300", // too_many_connections
			"53400", // configuration_limit_exceeded
			"57014", // query_canceled (statement_timeout)
			"55P03", // lock_not_available (lock_timeout)
			"40001", // serialization_failure
			"40P01": // deadlock_detected
			return true
		}
		return false
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr),
		pgconn.Timeout(err),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.As(err, &netErr):
		return true
	}
	// pgconn reports a lost connection in errors without a type of
	// their own.
	msg := err.Error()
	for _, s := range []string{"conn closed", "conn busy", "connection refused", "connection reset", "the database system is starting up", "the database system is shutting down", "terminating connection", "broken pipe", "unexpected EOF", "failed to connect", "server closed the connection", "failed to deallocate", "closed pool"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
