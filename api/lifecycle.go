package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/refinery-bandits/refinery/api/wire"
	"github.com/refinery-bandits/refinery/bandit"
)

// Paging of GET /v1/bandits/{name}/decisions.
const (
	// DefaultDecisionPage is the page size without ?limit.
	DefaultDecisionPage = 100
	// MaxDecisionPage is the largest ?limit.
	MaxDecisionPage = 1000
)

// decisionRecordView is a stored decision as GET .../decisions returns
// it: the decision's members (without propensity, which is not stored),
// the context as the client sent it, and the reward, null while there is
// none. probabilities and scores name the arms the bandit had when it
// decided (arms added later are absent).
type decisionRecordView struct {
	wire.Decision
	// Slot is the decision's place in its ranking (POST .../rank), 1 at
	// the top; absent for a decision that is no ranking's.
	Slot int `json:"slot,omitempty"`
	// ShadowAbove, on a slot below the first with a shadow choice, is
	// the candidate's probability of the live arms of the slots above
	// over the live policy's: the weight the slot's decision takes in
	// the candidate's off-policy estimate (bandit.Decision.ShadowAbove).
	ShadowAbove *float64        `json:"shadow_above,omitempty"`
	Context     json.RawMessage `json:"context"`
	Reward      *rewardView     `json:"reward"`
}

// rewardView is a stored reward.
type rewardView struct {
	Value      float64   `json:"value"`
	ReceivedAt time.Time `json:"received_at"`
}

func newDecisionRecordView(arms []string, rec *bandit.DecisionRecord) decisionRecordView {
	v := decisionRecordView{Decision: newWireDecision(arms, &rec.Decision), Slot: rec.Slot, Context: rec.Context}
	if rec.Slot > 1 && rec.ShadowPropensities != nil {
		w := rec.ShadowAbove
		v.ShadowAbove = &w
	}
	if rec.Reward != nil {
		v.Reward = &rewardView{Value: rec.Reward.Value, ReceivedAt: rec.Reward.ReceivedAt}
	}
	return v
}

// decisionPage is the answer of GET .../decisions.
type decisionPage struct {
	Decisions []decisionRecordView `json:"decisions"`
	// NextCursor, present when there are more decisions in the range,
	// is the ?cursor of the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// encodeCursor makes the opaque cursor of the position after rec:
// base64url of "<created_at in Unix microseconds>.<ID>".
func encodeCursor(rec *bandit.DecisionRecord) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d", rec.CreatedAt.UnixMicro(), rec.ID))
}

func decodeCursor(c string) (time.Time, int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, 0, false
	}
	us, id, ok := strings.Cut(string(b), ".")
	if !ok {
		return time.Time{}, 0, false
	}
	t, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n <= 0 {
		return time.Time{}, 0, false
	}
	return time.UnixMicro(t).UTC(), n, true
}

// strictQuery parses the request's query as URL.Query does, except that
// a parameter holding a ';' (which URL.Query drops without a word, so
// that ?limit=5;limit=6 read as no limit at all) or a malformed escape
// is a field error naming it (issue 31, finding 12).
func strictQuery(r *http.Request) (url.Values, []bandit.FieldError) {
	vals := url.Values{}
	var errs []bandit.FieldError
	for seg := range strings.SplitSeq(r.URL.RawQuery, "&") {
		if seg == "" {
			continue
		}
		k, v, _ := strings.Cut(seg, "=")
		key, errK := url.QueryUnescape(k)
		if errK != nil {
			key = k
		}
		if name, _, semi := strings.Cut(key, ";"); semi || strings.Contains(v, ";") {
			errs = append(errs, bandit.FieldError{Field: bandit.Shorten(name, 64), Detail: "a ';' in the query: separate parameters with '&'"})
			continue
		}
		val, errV := url.QueryUnescape(v)
		if errK != nil || errV != nil {
			errs = append(errs, bandit.FieldError{Field: bandit.Shorten(key, 64), Detail: "malformed percent-encoding in the query"})
			continue
		}
		vals[key] = append(vals[key], val)
	}
	return vals, errs
}

// parseDecisionQuery reads ?since, ?until, ?limit and ?cursor; every
// problem is a field error named by its parameter.
func parseDecisionQuery(r *http.Request) (bandit.DecisionQuery, error) {
	q := bandit.DecisionQuery{Limit: DefaultDecisionPage}
	vals, errs := strictQuery(r)
	for k := range vals {
		switch k {
		case "since", "until", "limit", "cursor":
			if len(vals[k]) > 1 {
				errs = append(errs, bandit.FieldError{Field: k, Detail: "given more than once"})
			}
		default:
			errs = append(errs, bandit.FieldError{Field: k, Detail: "unknown query parameter: want since, until, limit or cursor"})
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if v := vals.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || t.Year() < 1 || t.Year() > 9999 {
				errs = append(errs, bandit.FieldError{Field: p.name, Detail: fmt.Sprintf("%q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", bandit.Shorten(v, 64))})
				continue
			}
			*p.dst = t
		}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
		errs = append(errs, bandit.FieldError{Field: "until", Detail: "want a time after since"})
	}
	if v := vals.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxDecisionPage {
			errs = append(errs, bandit.FieldError{Field: "limit", Detail: fmt.Sprintf("%q: want an integer in 1..%d", bandit.Shorten(v, 64), MaxDecisionPage)})
		} else {
			q.Limit = n
		}
	}
	if v := vals.Get("cursor"); v != "" {
		t, id, ok := decodeCursor(v)
		if !ok {
			errs = append(errs, bandit.FieldError{Field: "cursor", Detail: "not a cursor of this API: pass next_cursor of the previous page as it is"})
		} else {
			q.AfterTime, q.AfterID = t, id
		}
	}
	if len(errs) > 0 {
		return q, &bandit.ValidationError{Errors: errs}
	}
	return q, nil
}

// listDecisions is GET /v1/bandits/{name}/decisions: the bandit's
// decisions made in [since, until), oldest first (ties by insertion), a
// page of at most limit at a time, with their rewards.
func (s *Server) listDecisions(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	q, err := parseDecisionQuery(r)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	limit := q.Limit
	q.Limit++ // one more tells whether there is a next page
	recs, err := s.svc.Store().Decisions(r.Context(), a.Name(), q)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	page := decisionPage{Decisions: make([]decisionRecordView, 0, min(len(recs), limit))}
	if len(recs) > limit {
		recs = recs[:limit]
		page.NextCursor = encodeCursor(recs[limit-1])
	}
	arms := a.Config().Arms
	for _, rec := range recs {
		page.Decisions = append(page.Decisions, newDecisionRecordView(arms, rec))
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// getDecision is GET /v1/bandits/{name}/decisions/{event_id}.
func (s *Server) getDecision(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	eventID := chi.URLParam(r, "event_id")
	var rec *bandit.DecisionRecord
	err := bandit.ErrNotFound
	if bandit.ValidEventID(eventID) {
		rec, err = s.svc.Store().DecisionRecord(r.Context(), a.Name(), eventID)
	}
	if err != nil {
		if errors.Is(err, bandit.ErrNotFound) {
			err = withDetail(err, "no decision with event ID %q in bandit %q", eventID, a.Name())
		}
		s.writeProblem(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, newDecisionRecordView(a.Config().Arms, rec))
}

// patchView is the answer of PATCH /v1/bandits/{name}: the bandit as GET
// shows it, and what the change did to the live agent.
type patchView struct {
	*banditView
	Effects []string `json:"effects"`
}

// patchBandit is PATCH /v1/bandits/{name} (bandit.Patch,
// bandit.Service.Update).
func (s *Server) patchBandit(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	body, err := s.readBody(w, r, MaxConfigBytes)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	p, err := bandit.ParsePatch(body)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	na, effects, err := s.svc.Update(r.Context(), a.Name(), p)
	if err != nil {
		if errors.Is(err, bandit.ErrArchived) {
			err = withDetail(err, "bandit %q is archived: unarchive it with {\"archived\": false} (in the same patch or first) to change it", a.Name())
		}
		s.writeProblem(w, r, err)
		return
	}
	v, err := s.view(r.Context(), na, true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	if effects == nil {
		effects = []string{}
	}
	s.log.InfoContext(r.Context(), "bandit updated", append(logAttrs(r), "bandit", a.Name(), "effects", effects)...)
	s.writeJSON(w, r, http.StatusOK, patchView{banditView: v, Effects: effects})
}

// deleteBandit is DELETE /v1/bandits/{name}[?purge=true]: 204. Without
// purge the decision log stays (for export) and keeps the name.
func (s *Server) deleteBandit(w http.ResponseWriter, r *http.Request) {
	name := chi.URLParam(r, "name")
	purge := false
	vals, errs := strictQuery(r)
	if len(errs) > 0 {
		s.writeProblem(w, r, &bandit.ValidationError{Errors: errs})
		return
	}
	for k := range vals {
		if k != "purge" {
			s.writeProblem(w, r, &bandit.ValidationError{Errors: []bandit.FieldError{{Field: k, Detail: "unknown query parameter: want purge"}}})
			return
		}
	}
	switch v := vals.Get("purge"); v {
	case "", "false":
	case "true":
		purge = true
	default:
		s.writeProblem(w, r, &bandit.ValidationError{Errors: []bandit.FieldError{{Field: "purge", Detail: fmt.Sprintf("%q: want true or false", bandit.Shorten(v, 64))}}})
		return
	}
	if err := s.svc.Delete(r.Context(), name, purge); err != nil {
		if errors.Is(err, bandit.ErrNotFound) {
			err = withDetail(err, "no bandit named %q", name)
		}
		s.writeProblem(w, r, err)
		return
	}
	if s.shadowEstimate != nil {
		s.shadowEstimate.forget(name)
	}
	s.log.InfoContext(r.Context(), "bandit deleted", append(logAttrs(r), "bandit", name, "purge", purge)...)
	w.WriteHeader(http.StatusNoContent)
}
