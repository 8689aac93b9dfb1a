package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// Problem is an RFC 9457 problem details object, sent with content type
// application/problem+json. Besides the standard members (type is always
// "about:blank", so title is the HTTP status text) it has:
//
//   - request_id, the X-Request-Id of the request, to find it in the logs;
//   - field, the JSON path of the (first) offending field of a 400, such
//     as "context.odor", "value" or "policy.kind"; empty when the body
//     as a whole is at fault (malformed JSON, NaN or Infinity literals,
//     trailing data);
//   - errors, every field problem of a 400 as {field, detail}.
type Problem struct {
	Type      string              `json:"type"`
	Title     string              `json:"title"`
	Status    int                 `json:"status"`
	Detail    string              `json:"detail,omitempty"`
	Instance  string              `json:"instance,omitempty"`
	RequestID string              `json:"request_id,omitempty"`
	Field     *string             `json:"field,omitempty"`
	Errors    []bandit.FieldError `json:"errors,omitempty"`
}

// ProblemContentType is the media type of error responses.
const ProblemContentType = "application/problem+json"

// Errors of the HTTP layer itself.
var (
	errTooLarge  = errors.New("api: request body too large")
	errMediaType = errors.New("api: unsupported media type")
	errNoRoute   = errors.New("api: no such route")
	errMethod    = errors.New("api: method not allowed")
)

// problemTable maps errors to HTTP statuses: the first entry that
// errors.Is matches wins. Anything else is a 500, logged with the
// request ID and shown to the client only as "internal error".
var problemTable = []struct {
	err    error
	status int
}{
	{bandit.ErrInvalid, http.StatusBadRequest},
	{errTooLarge, http.StatusRequestEntityTooLarge},
	{errMediaType, http.StatusUnsupportedMediaType},
	{errNoRoute, http.StatusNotFound},
	{errMethod, http.StatusMethodNotAllowed},
	{bandit.ErrNotFound, http.StatusNotFound},
	{bandit.ErrExists, http.StatusConflict},
	{bandit.ErrConflict, http.StatusConflict},
	{bandit.ErrUnavailable, http.StatusServiceUnavailable},
	{store.ErrClosed, http.StatusServiceUnavailable},
	{context.Canceled, 499}, // the client went away; nobody reads this
	{context.DeadlineExceeded, http.StatusServiceUnavailable},
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
	p := Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Instance: r.URL.Path, RequestID: requestID(r.Context())}
	if p.Title == "" {
		p.Title = "Client Closed Request"
	}
	var ce *clientError
	var ve *bandit.ValidationError
	switch {
	case status == http.StatusInternalServerError:
		s.log.ErrorContext(r.Context(), "internal error", "request_id", p.RequestID, "method", r.Method, "path", r.URL.Path, "err", err)
		p.Detail = "internal error"
	case errors.As(err, &ve):
		p.Errors = ve.Errors
		f := ve.Errors[0].Field
		p.Field = &f
		p.Detail = ve.Errors[0].Detail
		if f != "" {
			p.Detail = f + ": " + p.Detail
		}
		if n := len(ve.Errors); n > 1 {
			p.Detail += fmt.Sprintf(" (and %d more problems, see errors)", n-1)
		}
	case errors.As(err, &ce):
		p.Detail = ce.detail
	default:
		p.Detail = http.StatusText(status)
	}
	if status >= 500 && status != http.StatusInternalServerError {
		s.log.WarnContext(r.Context(), "unavailable", "request_id", p.RequestID, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", ProblemContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// logAttrs is a helper for request logs.
func logAttrs(r *http.Request) []any {
	return []any{slog.String("request_id", requestID(r.Context())), slog.String("method", r.Method), slog.String("path", r.URL.Path)}
}
