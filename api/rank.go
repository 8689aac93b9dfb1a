package api

import (
	"encoding/json"
	"net/http"

	"github.com/refinery-bandits/refinery/bandit"
)

// rankingRequest is the body of POST .../rankings.
type rankingRequest struct {
	Context      json.RawMessage `json:"context"`
	Slots        int             `json:"slots"`
	EventIDs     []string        `json:"event_ids"`
	ExcludedArms []string        `json:"excluded_arms"`
	// SlotContexts is each slot's features (bandit.RankRequest.SlotContexts).
	SlotContexts []json.RawMessage `json:"slot_contexts"`
}

// rank answers POST /v1/bandits/{name}/rankings (bandit.Agent.Rank):
// {"decisions": [decision, ...]}, one per slot, top first, each with
// its own event ID and the probabilities of its slot given the slots
// above; 201 when any is new, 200 when every one is a replay.
func (s *Server) rank(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	var req rankingRequest
	if !s.decodeBody(w, r, MaxDecisionBytes, &req) {
		return
	}
	outs, err := a.Rank(r.Context(), bandit.RankRequest{Context: req.Context, Slots: req.Slots, EventIDs: req.EventIDs, Excluded: req.ExcludedArms, SlotContexts: req.SlotContexts})
	if err != nil {
		s.writeProblem(w, r, s.decideError(a, err, ""))
		return
	}
	s.writeOutcomes(w, r, a, outs)
}
