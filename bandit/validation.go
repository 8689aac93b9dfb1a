package bandit

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// More domain errors (see errors.go).
var (
	// ErrInvalid: the request is malformed or breaks the bandit's
	// schema; the error is a *ValidationError naming the fields.
	ErrInvalid = errors.New("bandit: invalid")
	// ErrUnavailable: the service cannot answer now (still loading, or
	// shutting down); the client may retry.
	ErrUnavailable = errors.New("bandit: unavailable")
	// ErrStoreUnavailable: the store could not reach its database, or
	// the database did not answer in time, rather than refused the
	// request (a lost or refused connection, a timeout, a shutdown, a
	// closed store); the client may retry. A Store reports it wrapped
	// (errors.Is), with the cause.
	ErrStoreUnavailable = errors.New("bandit: store unavailable")
	// ErrLimit: the request is valid but would take the service past a
	// limit set by its operator (ServiceConfig.MaxBandits).
	ErrLimit = errors.New("bandit: limit reached")
)

// FieldError is one problem with one field of a request (spec.FieldError).
type FieldError = spec.FieldError

// ValidationError lists every problem found with a request. It matches
// ErrInvalid under errors.Is.
type ValidationError struct {
	Errors []FieldError
	// Omitted counts the problems found beyond MaxFieldErrors, which
	// are not listed.
	Omitted int
}

// MaxFieldErrors is the most problems a ValidationError lists; a body
// can hold hundreds of thousands (issue 16, finding 8).
const MaxFieldErrors = 100

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, f := range e.Errors {
		if f.Field == "" {
			parts[i] = f.Detail
		} else {
			parts[i] = f.Field + ": " + f.Detail
		}
	}
	return "bandit: invalid: " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Shorten cuts s to at most n bytes, on a rune boundary, marking the
// cut with "...": for messages that quote what a client sent.
func Shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// invalid returns a *ValidationError with one field error.
func invalid(field, detail string) error {
	return &ValidationError{Errors: []FieldError{{Field: field, Detail: detail}}}
}
