package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/api/wire"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/plural"
)

// Problem is the body of every error answer: wire.Problem, whose
// documentation lists its members.
type Problem = wire.Problem

// ProblemContentType is the media type of error responses.
const ProblemContentType = "application/problem+json"

// Errors of the HTTP layer itself.
var (
	errTooLarge  = errors.New("api: request body too large")
	errMediaType = errors.New("api: unsupported media type")
	errNoRoute   = errors.New("api: no such route")
	errMethod    = errors.New("api: method not allowed")
	// errBodyTimeout: the body did not arrive within Config.BodyReadTimeout.
	errBodyTimeout = errors.New("api: request body timeout")
	// errOverloaded: no room for the request within AdmissionWait.
	errOverloaded = errors.New("api: overloaded")
	// errHost: a Host header outside Config.AllowedHosts.
	errHost = errors.New("api: misdirected request")
)

// Limits on what an error answer echoes (issue 16, finding 8): a 1 MB
// configuration must not become a 20 MB problem, nor a long path a long
// 404.
const (
	// MaxProblemErrors is the most field errors a 400 lists; "detail"
	// says how many more there were.
	MaxProblemErrors = 20
	// MaxEchoBytes is the most bytes of any client-supplied text (a
	// field path, a detail quoting a value, the request path) an error
	// answer repeats; longer text is cut and marked with "...".
	MaxEchoBytes = 256
)

// problemTable maps errors to HTTP statuses: the first entry that
// errors.Is matches wins. Anything else is a 500, logged with the
// request ID and shown to the client only as "internal error".
var problemTable = []struct {
	err    error
	status int
}{
	{bandit.ErrInvalid, http.StatusBadRequest},
	{errNoKey, http.StatusUnauthorized},
	{errScope, http.StatusForbidden},
	{errCrossOrigin, http.StatusForbidden},
	{errHost, http.StatusMisdirectedRequest},
	{errTooLarge, http.StatusRequestEntityTooLarge},
	{errMediaType, http.StatusUnsupportedMediaType},
	{errNoRoute, http.StatusNotFound},
	{errBodyTimeout, http.StatusRequestTimeout},
	{errOverloaded, http.StatusTooManyRequests},
	{errKeyLookups, http.StatusTooManyRequests},
	{bandit.ErrLimit, http.StatusForbidden},
	{errMethod, http.StatusMethodNotAllowed},
	{bandit.ErrNotFound, http.StatusNotFound},
	{bandit.ErrExists, http.StatusConflict},
	{bandit.ErrConflict, http.StatusConflict},
	{bandit.ErrArchived, http.StatusConflict},
	{bandit.ErrUnavailable, http.StatusServiceUnavailable},
	{context.Canceled, 499}, // the client went away; nobody reads this
	{context.DeadlineExceeded, http.StatusServiceUnavailable},
	// The database is unreachable or did not answer in time (last: an
	// error of the request, such as the client going away, comes first).
	{bandit.ErrStoreUnavailable, http.StatusServiceUnavailable},
}

// clientError carries a message meant for the client.
type clientError struct {
	err    error
	detail string
}

func (e *clientError) Error() string { return e.detail + ": " + e.err.Error() }
func (e *clientError) Unwrap() error { return e.err }

// withDetail wraps err with the detail the client sees.
func withDetail(err error, format string, args ...any) error {
	return &clientError{err: err, detail: fmt.Sprintf(format, args...)}
}

// writeProblem answers err as problem+json.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	for _, e := range problemTable {
		if errors.Is(err, e.err) {
			status = e.status
			break
		}
	}
	if status == http.StatusServiceUnavailable && !errors.Is(err, bandit.ErrUnavailable) {
		s.storeFailedAt.Store(time.Now().UnixNano())
	}
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Instance: echo(r.URL.Path), RequestID: requestID(r.Context())}
	if p.Title == "" {
		p.Title = "Client Closed Request"
	}
	var ce *clientError
	var ve *bandit.ValidationError
	var ae *authError
	switch {
	case errors.As(err, &ae):
		w.Header().Set("WWW-Authenticate", ae.challenge)
		p.Detail = echo(ae.detail)
	case status == http.StatusInternalServerError:
		if s.logs.allow() {
			s.log.ErrorContext(r.Context(), "internal error", "request_id", p.RequestID, "method", r.Method, "path", echo(r.URL.Path), "err", err, "suppressed", s.logs.suppressed())
		}
		p.Detail = "internal error"
	case errors.As(err, &ve) && len(ve.Errors) > 0:
		n := min(len(ve.Errors), MaxProblemErrors)
		p.Errors = make([]bandit.FieldError, n)
		for i, fe := range ve.Errors[:n] {
			p.Errors[i] = bandit.FieldError{Field: echo(fe.Field), Detail: echo(fe.Detail)}
		}
		f := p.Errors[0].Field
		p.Field = f
		p.Detail = p.Errors[0].Detail
		if f != "" {
			p.Detail = f + ": " + p.Detail
		}
		if more := len(ve.Errors) + ve.Omitted - 1; more > 0 {
			p.Detail += " (and " + plural.Count(more, "more problem", "more problems") + ", see errors"
			if len(ve.Errors)+ve.Omitted > n {
				p.Detail += fmt.Sprintf(", which lists the first %d", n)
			}
			p.Detail += ")"
		}
	case errors.As(err, &ce):
		p.Detail = echo(ce.detail)
	case status == http.StatusServiceUnavailable && !errors.Is(err, bandit.ErrUnavailable):
		p.Detail = "the database is unavailable; retry later (a write may have committed: retrying it with the same event ID and value is safe)"
	default:
		p.Detail = http.StatusText(status)
	}
	if status >= 500 && status != http.StatusInternalServerError && s.logs.allow() {
		s.log.WarnContext(r.Context(), "unavailable", "request_id", p.RequestID, "path", echo(r.URL.Path), "err", err, "suppressed", s.logs.suppressed())
	}
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if st := state(r.Context()); r.ContentLength != 0 && (st == nil || !st.bodyRead) {
		// Answered before its body was read (401, 404, 413, ...): close
		// the connection after the answer rather than wait for the rest
		// of the body to drain it (issue 31, finding 12), but only after
		// earlyLinger, so that a client still writing its body reads the
		// answer before the close: a close with its bytes unread resets
		// the connection, and a reset discards the answer in flight (a
		// 413 then reached the client as "broken pipe").
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(earlyLinger))
	}
	w.Header().Set("Content-Type", ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// earlyLinger is how long a connection answered before its body was read
// may still deliver that body before the server stops reading it.
const earlyLinger = 750 * time.Millisecond

// echo cuts client-supplied text to MaxEchoBytes for an error answer.
func echo(s string) string { return bandit.Shorten(s, MaxEchoBytes) }

// logLimiter lets through at most burst error logs per second, so that
// an outage that fails every request logs a few lines a second, not one
// per request (issue 16, finding 4: 86,795 lines in 11 s); it counts
// what it holds back.
type logLimiter struct {
	mu      sync.Mutex
	second  int64
	n       int
	dropped int64
}

const logBurst = 5

// allow reports whether one more line may be logged now.
func (l *logLimiter) allow() bool {
	now := time.Now().Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now != l.second {
		l.second, l.n = now, 0
	}
	if l.n >= logBurst {
		l.dropped++
		return false
	}
	l.n++
	return true
}

// suppressed returns and resets the count of lines held back.
func (l *logLimiter) suppressed() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dropped
	l.dropped = 0
	return d
}

// logAttrs is a helper for request logs.
func logAttrs(r *http.Request) []any {
	return []any{slog.String("request_id", requestID(r.Context())), slog.String("method", r.Method), slog.String("path", r.URL.Path)}
}
