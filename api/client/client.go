// Package client is a typed Go client of Refinery's HTTP API, the
// routes of api/openapi.json (served at GET /openapi.json).
//
// Client speaks to the service through net/http: create and read
// bandits, decide, reward, read and import snapshots, health and
// readiness. Every answer other than the documented success is an
// *Error carrying the RFC 9457 problem. Conn is one keep-alive HTTP/1.1
// connection that writes its requests and reads the answers itself,
// allocating nothing per request in the steady state, for load
// generators whose own CPU must not compete with the service's.
//
// The configuration, status, propensity, patch and snapshot types are
// the service's own (package bandit/spec, which package bandit names by
// aliases), and a decision's members are those the service's answers
// embed (package api/wire), so that they cannot drift from what it
// accepts and answers; the contract test of package api checks the
// answers against the OpenAPI document, and the client's tests against
// the service (api/goclient_test.go) decode them strictly. Neither of
// those packages links the service's model: this one needs only the
// standard library and them (TestClientLinksNoModel).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/refinery-bandits/refinery/api/wire"
	"github.com/refinery-bandits/refinery/bandit/spec"
)

// Client is a client of one Refinery service. It is safe for concurrent
// use.
type Client struct {
	base string
	hc   *http.Client
	key  string // API key, sent as Authorization: Bearer
}

// DefaultTimeout bounds a request of a Client made with a nil
// *http.Client.
const DefaultTimeout = 30 * time.Second

// New returns a client of the service at baseURL (such as
// "http://127.0.0.1:8080"). hc nil means an http.Client with
// DefaultTimeout.
func New(baseURL string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: %q is not an http:// or https:// URL", baseURL)
	}
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), hc: hc}, nil
}

// WithAPIKey returns a copy of c that sends the API key secret (from
// 'refinery keys create') as "Authorization: Bearer <secret>" with every
// request; a service that requires keys answers 401 without one and 403
// when its scope does not cover the route.
func (c *Client) WithAPIKey(secret string) *Client {
	cc := *c
	cc.key = secret
	return &cc
}

// BaseURL returns the service's URL.
func (c *Client) BaseURL() string { return c.base }

// Bandit is a stored bandit: its configuration with every default
// filled in, when it was created and, except in the answer to
// CreateBandit's import counterpart, its live status.
type Bandit struct {
	spec.Config
	CreatedAt time.Time `json:"created_at"`
	// ArchivedAt is set while the bandit is archived.
	ArchivedAt *time.Time `json:"archived_at,omitempty"`
	Status     *Status    `json:"status,omitempty"`
}

// BanditUpdate is the answer to UpdateBandit: the changed bandit and
// what the change did to it, in words.
type BanditUpdate struct {
	Bandit
	Effects []string `json:"effects"`
}

// Status is a bandit's live status.
type Status struct {
	// Decisions and Rewards are the stored counts; TrainerLag the stored
	// rewards the published posterior has not been trained on.
	Decisions  int64 `json:"decisions"`
	Rewards    int64 `json:"rewards"`
	TrainerLag int64 `json:"trainer_lag"`
	// ShadowEstimate is the off-policy estimate of the candidate
	// (shadow) against the live policy; nil without a shadow.
	ShadowEstimate *spec.ShadowEstimate `json:"shadow_estimate,omitempty"`
	spec.Status
}

// DecisionRequest asks for a decision.
type DecisionRequest struct {
	// EventID is the client's idempotency key; empty: the server makes
	// one.
	EventID string `json:"event_id,omitempty"`
	// Context holds one value per feature: a string for categorical
	// features, a number for numeric ones. Any value that encodes as a
	// JSON object (a map, a struct, a json.RawMessage).
	Context any `json:"context"`
	// ExcludedArms may not be chosen.
	ExcludedArms []string `json:"excluded_arms,omitempty"`
}

// Decision is the service's decision. Its Probabilities are the
// propensities of every arm for the context; Scores the policy's scores.
type Decision struct {
	wire.Decision
	// Propensity says how the probabilities were estimated; nil on a
	// replay.
	Propensity *spec.Propensity `json:"propensity,omitempty"`
	// Replayed is true when the event ID was decided before and the
	// stored decision was returned (200 rather than 201).
	Replayed bool `json:"-"`
}

// Readiness is the answer of /readyz.
type Readiness struct {
	Status         string            `json:"status"`
	Checks         map[string]string `json:"checks"`
	EphemeralStore bool              `json:"ephemeral_store"`
}

// Problem is an RFC 9457 problem details object, the body of every
// error answer (wire.Problem).
type Problem = wire.Problem

// Error is an answer other than the documented success.
type Error struct {
	Method, Path string
	StatusCode   int
	// Problem is the answer's problem details (zero when the body was
	// not one); Body the raw body, at most 64 KiB.
	Problem Problem
	Body    []byte
	// RetryAfter is the answer's Retry-After (429, 503); zero if none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Problem.Detail
	if msg == "" {
		msg = strings.TrimSpace(string(e.Body))
	}
	// The service's detail of a field problem starts with the field
	// already; name it only when it does not (issue 30, finding 10).
	if f := e.Problem.Field; f != "" && !strings.HasPrefix(msg, f+": ") {
		msg = f + ": " + msg
	}
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode), msg)
}

// StatusCode returns the HTTP status of an *Error in err's chain, or 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// Temporary reports whether err is an answer that says to retry: 429,
// or 503 (for a decision or a reward, a 503 may have committed; retry
// with the same event ID and value).
func Temporary(err error) bool {
	code := StatusCode(err)
	return code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable
}

// maxErrorBody bounds the body an Error keeps.
const maxErrorBody = 64 << 10

// do sends a request with body (nil: none; []byte and json.RawMessage
// as they are; anything else as JSON) and decodes a JSON answer of one
// of the statuses ok into out (nil: discard). It returns the status.
func (c *Client) do(ctx context.Context, method, path string, body, out any, ok ...int) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, fmt.Errorf("client: %s %s: encode the body: %w", method, path, err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	for _, code := range ok {
		if resp.StatusCode != code {
			continue
		}
		if out == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			return code, err
		}
		if w, isWriter := out.(io.Writer); isWriter {
			_, err = io.Copy(w, resp.Body)
			return code, err
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return code, fmt.Errorf("client: %s %s: decode the answer: %w", method, path, err)
		}
		return code, nil
	}
	e := &Error{Method: method, Path: path, StatusCode: resp.StatusCode}
	e.Body, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = json.Unmarshal(e.Body, &e.Problem)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return resp.StatusCode, e
}

// CreateBandit creates a bandit from its configuration: a
// *spec.Config, or anything that encodes as one (a map, or the JSON
// itself as []byte or json.RawMessage). It returns the stored bandit,
// defaults filled in.
func (c *Client) CreateBandit(ctx context.Context, cfg any) (*Bandit, error) {
	var b Bandit
	if _, err := c.do(ctx, http.MethodPost, "/v1/bandits", cfg, &b, http.StatusCreated); err != nil {
		return nil, err
	}
	return &b, nil
}

// Bandit returns the bandit named name with its live status.
func (c *Client) Bandit(ctx context.Context, name string) (*Bandit, error) {
	var b Bandit
	if _, err := c.do(ctx, http.MethodGet, "/v1/bandits/"+url.PathEscape(name), nil, &b, http.StatusOK); err != nil {
		return nil, err
	}
	return &b, nil
}

// Bandits returns every bandit, by name, with its live status.
func (c *Client) Bandits(ctx context.Context) ([]Bandit, error) {
	var out struct {
		Bandits []Bandit `json:"bandits"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/v1/bandits", nil, &out, http.StatusOK); err != nil {
		return nil, err
	}
	return out.Bandits, nil
}

// Decide asks bandit name for a decision.
func (c *Client) Decide(ctx context.Context, name string, req DecisionRequest) (*Decision, error) {
	var d Decision
	code, err := c.do(ctx, http.MethodPost, "/v1/bandits/"+url.PathEscape(name)+"/decisions", req, &d, http.StatusCreated, http.StatusOK)
	if err != nil {
		return nil, err
	}
	d.Replayed = code == http.StatusOK
	return &d, nil
}

// Reward records the reward of the decision eventID of bandit name. The
// same value again succeeds (idempotent); another value is a 409 Error.
func (c *Client) Reward(ctx context.Context, name, eventID string, value float64) error {
	body := strconv.AppendFloat([]byte(`{"value":`), value, 'g', -1, 64)
	_, err := c.do(ctx, http.MethodPost, "/v1/bandits/"+url.PathEscape(name)+"/events/"+url.PathEscape(eventID)+"/reward",
		append(body, '}'), nil, http.StatusNoContent)
	return err
}

// Healthz returns nil while the service process serves.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, http.StatusOK)
	return err
}

// Ready returns the readiness of the service; a service that is not
// ready answers with a 503 Error, and its Readiness too.
func (c *Client) Ready(ctx context.Context) (*Readiness, error) {
	var r Readiness
	if _, err := c.do(ctx, http.MethodGet, "/readyz", nil, &r, http.StatusOK); err != nil {
		var e *Error
		if errors.As(err, &e) && json.Unmarshal(e.Body, &r) == nil && r.Status != "" {
			return &r, err
		}
		return nil, err
	}
	return &r, nil
}

// Metrics writes the service's Prometheus text exposition to w.
func (c *Client) Metrics(ctx context.Context, w io.Writer) error {
	_, err := c.do(ctx, http.MethodGet, "/metrics", nil, w, http.StatusOK)
	return err
}

// Get writes the 200 answer of GET path (such as a profile of
// /debug/pprof, which is not part of the API) to w.
func (c *Client) Get(ctx context.Context, path string, w io.Writer) error {
	_, err := c.do(ctx, http.MethodGet, path, nil, w, http.StatusOK)
	return err
}

// Snapshot returns bandit name's snapshot: its configuration and
// published posterior, versioned and checksummed.
func (c *Client) Snapshot(ctx context.Context, name string) (*spec.SnapshotFile, error) {
	var f spec.SnapshotFile
	if _, err := c.do(ctx, http.MethodGet, "/v1/bandits/"+url.PathEscape(name)+"/snapshot", nil, &f, http.StatusOK); err != nil {
		return nil, err
	}
	return &f, nil
}

// ImportSnapshot creates a bandit from a snapshot (a *spec.SnapshotFile,
// or its JSON as []byte or json.RawMessage) and returns it. A snapshot of
// another model layout, altered, or whose posterior does not fit its
// configuration is a 400 Error naming the member at fault.
func (c *Client) ImportSnapshot(ctx context.Context, snapshot any) (*Bandit, error) {
	var b Bandit
	if _, err := c.do(ctx, http.MethodPost, "/v1/snapshots", snapshot, &b, http.StatusCreated); err != nil {
		return nil, err
	}
	return &b, nil
}

// DecisionRecord is a stored decision with its context and reward (GET
// /v1/bandits/{name}/decisions/{event_id}). Probabilities and Scores name
// the arms the bandit had when it decided.
type DecisionRecord struct {
	wire.Decision
	// Slot is the decision's place in its ranking (Rank), 1 at the top;
	// 0 for a decision that is no ranking's.
	Slot int `json:"slot,omitempty"`
	// ShadowAbove, on a slot below the first with a shadow choice, is
	// the weight of the slots above in the candidate's off-policy
	// estimate of this slot: its probability of the live arms above
	// over the live policy's. Nil otherwise.
	ShadowAbove *float64 `json:"shadow_above,omitempty"`
	// Context is the context exactly as it was sent.
	Context json.RawMessage `json:"context"`
	// Reward is nil while the decision has none.
	Reward *StoredReward `json:"reward"`
}

// StoredReward is a decision's reward.
type StoredReward struct {
	Value      float64   `json:"value"`
	ReceivedAt time.Time `json:"received_at"`
}

// DecisionQuery selects decisions: made in [Since, Until) (zero:
// unbounded), Limit per page (zero: the server's default, 100), from
// Cursor (the previous page's NextCursor; empty: the first page).
type DecisionQuery struct {
	Since, Until time.Time
	Limit        int
	Cursor       string
}

// DecisionPage is one page of a bandit's decisions, oldest first.
type DecisionPage struct {
	Decisions []DecisionRecord `json:"decisions"`
	// NextCursor is the Cursor of the next page; empty on the last.
	NextCursor string `json:"next_cursor"`
}

// Decisions returns one page of bandit name's decisions.
func (c *Client) Decisions(ctx context.Context, name string, q DecisionQuery) (*DecisionPage, error) {
	v := url.Values{}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.Format(time.RFC3339Nano))
	}
	if !q.Until.IsZero() {
		v.Set("until", q.Until.Format(time.RFC3339Nano))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	path := "/v1/bandits/" + url.PathEscape(name) + "/decisions"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var p DecisionPage
	if _, err := c.do(ctx, http.MethodGet, path, nil, &p, http.StatusOK); err != nil {
		return nil, err
	}
	return &p, nil
}

// AllDecisions calls fn for each of bandit name's decisions that q
// selects, oldest first, following the pages' cursors from q.Cursor.
func (c *Client) AllDecisions(ctx context.Context, name string, q DecisionQuery, fn func(DecisionRecord) error) error {
	for {
		p, err := c.Decisions(ctx, name, q)
		if err != nil {
			return err
		}
		for _, d := range p.Decisions {
			if err := fn(d); err != nil {
				return err
			}
		}
		if p.NextCursor == "" {
			return nil
		}
		q.Cursor = p.NextCursor
	}
}

// Decision returns bandit name's decision eventID with its reward, if
// any; a 404 Error if there is none.
func (c *Client) Decision(ctx context.Context, name, eventID string) (*DecisionRecord, error) {
	var d DecisionRecord
	if _, err := c.do(ctx, http.MethodGet, "/v1/bandits/"+url.PathEscape(name)+"/decisions/"+url.PathEscape(eventID), nil, &d, http.StatusOK); err != nil {
		return nil, err
	}
	return &d, nil
}

// UpdateBandit changes bandit name with patch: a *spec.Patch, or
// anything that encodes as one (a map, or the JSON as []byte or
// json.RawMessage), e.g. {"add_arms": ["c"], "training": {"lr": 0.01}}.
// A change the bandit cannot take is a 400 Error naming the member; a
// change of an archived bandit that does not unarchive it is a 409.
func (c *Client) UpdateBandit(ctx context.Context, name string, patch any) (*BanditUpdate, error) {
	var b BanditUpdate
	if _, err := c.do(ctx, http.MethodPatch, "/v1/bandits/"+url.PathEscape(name), patch, &b, http.StatusOK); err != nil {
		return nil, err
	}
	return &b, nil
}

// DeleteBandit deletes bandit name. Without purge its decision log is
// kept (for export) and keeps the name taken; with purge the log goes
// too and the name is free (also for a bandit deleted before).
func (c *Client) DeleteBandit(ctx context.Context, name string, purge bool) error {
	path := "/v1/bandits/" + url.PathEscape(name)
	if purge {
		path += "?purge=true"
	}
	_, err := c.do(ctx, http.MethodDelete, path, nil, nil, http.StatusNoContent)
	return err
}
