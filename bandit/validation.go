package bandit

import (
	"errors"
	"strings"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/internal/strictjson"
)

// Bounds on the numbers a bandit accepts, beyond what any JSON body may
// hold (strictjson.Check).
const (
	// MaxNumericAbs bounds the magnitude of a numeric context value, of a
	// numeric feature's center and of its standardized value: larger
	// finite numbers overflow the network's arithmetic (issue 16,
	// finding 2).
	MaxNumericAbs = 1e12
	// MaxRewardAbs bounds the magnitude of a reward and of a default
	// reward: the mean and variance of rewards near 1e308 overflow
	// (issue 16, finding 1).
	MaxRewardAbs = 1e12
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
func Shorten(s string, n int) string { return strictjson.Shorten(s, n) }

// CheckJSON checks the raw bytes of a JSON document for what decoding
// would hide (strictjson.Check: invalid UTF-8, NUL, lone surrogates,
// duplicate keys, nesting deeper than strictjson.MaxDepth, numbers no
// float64 holds) and returns a *ValidationError naming the field, or
// nil. Malformed JSON is left to the decoder.
func CheckJSON(data []byte) error { return checkJSON("", data) }

// checkJSON is CheckJSON for a document found at the path prefix.
func checkJSON(prefix string, data []byte) error {
	var e *strictjson.Error
	if err := strictjson.CheckAt(prefix, data); errors.As(err, &e) {
		return invalid(e.Field, e.Detail)
	}
	return nil
}

// invalid returns a *ValidationError with one field error.
func invalid(field, detail string) error {
	return &ValidationError{Errors: []FieldError{{Field: field, Detail: detail}}}
}
