package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/refinery-bandits/refinery/bandit"
)

// MaxBatchBytes is the body limit of POST .../decision-batches: room for
// bandit.MaxBatchContexts contexts of about 20 KB each.
const MaxBatchBytes = 2 << 20

// decisionBatchRequest is the body of POST .../decision-batches.
type decisionBatchRequest struct {
	Contexts     []json.RawMessage `json:"contexts"`
	EventIDs     []string          `json:"event_ids"`
	ExcludedArms []string          `json:"excluded_arms"`
}

// decideBatch answers POST /v1/bandits/{name}/decision-batches
// (bandit.Agent.DecideBatch): {"decisions": [decision, ...]} in the
// order of the contexts, each as POST .../decisions answers it (with
// "propensity" when new, without on a replay); 201 when any decision is
// new, 200 when every one is a replay.
func (s *Server) decideBatch(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	var req decisionBatchRequest
	if !s.decodeBody(w, r, MaxBatchBytes, &req) {
		return
	}
	outs, err := a.DecideBatch(r.Context(), bandit.BatchRequest{Contexts: req.Contexts, EventIDs: req.EventIDs, Excluded: req.ExcludedArms})
	if err != nil {
		s.writeProblem(w, r, s.decideError(a, err, ""))
		return
	}
	s.writeOutcomes(w, r, a, outs)
}

// decideError gives a decision's error its problem detail: a conflict
// names the event (eventID, or the batch item in err), an archived
// bandit says how to resume it.
func (s *Server) decideError(a *bandit.Agent, err error, eventID string) error {
	switch {
	case errors.Is(err, bandit.ErrConflict) && eventID != "":
		return withDetail(err, "event %q was already decided with another context or an arm now excluded", eventID)
	case errors.Is(err, bandit.ErrConflict):
		return withDetail(err, "%s", err.Error())
	case errors.Is(err, bandit.ErrArchived):
		return withDetail(err, "bandit %q is archived and takes no new decisions (rewards of its decisions are still accepted); PATCH {\"archived\": false} resumes it", a.Name())
	}
	return err
}

// writeOutcomes answers {"decisions": [...]} with the outcomes of one
// request, in order: 201 when any is new, 200 when all are replays.
func (s *Server) writeOutcomes(w http.ResponseWriter, r *http.Request, a *bandit.Agent, outs []*bandit.Outcome) {
	arms := a.Config().Arms
	status := http.StatusOK
	for _, out := range outs {
		if out.Created {
			status = http.StatusCreated
		}
	}
	b := append(make([]byte, 0, 512*len(outs)), `{"decisions":[`...)
	for i, out := range outs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendDecision(b, arms, out.Decision, out.Propensity); !ok {
			resp := make([]decisionResponse, len(outs))
			for j, o := range outs {
				resp[j] = newDecisionResponse(arms, o.Decision, o.Propensity)
			}
			s.writeJSON(w, r, status, map[string]any{"decisions": resp})
			return
		}
	}
	b = append(b, "]}\n"...)
	// With its length, not chunked: a batch's answer is larger than
	// net/http's buffer (and client.Conn reads answers of known length).
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
