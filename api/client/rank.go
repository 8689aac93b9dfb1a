package client

import (
	"context"
	"net/url"
)

// RankingRequest asks for an ordered choice of distinct arms for one
// context, with per-slot features if the bandit declares them
// (POST /v1/bandits/{name}/rankings).
type RankingRequest struct {
	// Context is the context, as DecisionRequest.Context.
	Context any `json:"context"`
	// Slots is the number of arms to rank, 1 to the arms not excluded.
	Slots int `json:"slots"`
	// EventIDs, when not empty, are the slots' idempotency keys: one
	// per slot, top first, distinct. Empty: the server makes them,
	// "<random>:1" to "<random>:<Slots>".
	EventIDs []string `json:"event_ids,omitempty"`
	// ExcludedArms may take no slot.
	ExcludedArms []string `json:"excluded_arms,omitempty"`
	// SlotContexts, when not nil, gives each slot's features: one
	// object per slot, in slot order, keyed by the names of the
	// bandit's slot_features. Slot j is decided, and stored, on Context
	// merged with SlotContexts[j].
	SlotContexts []any `json:"slot_contexts,omitempty"`
}

// Rank asks bandit name for a ranking: one decision per slot, top
// first, each with its own event ID (rewarded with Reward) and, in
// Probabilities, every arm's probability of landing in its slot given
// the slots above; with a candidate (shadow), in Shadow, the
// candidate's probabilities there given the live arms of the slots
// above and an arm drawn from them. A slot whose event ID was decided before is the
// stored decision, Replayed, without a propensity.
func (c *Client) Rank(ctx context.Context, name string, req RankingRequest) ([]Decision, error) {
	return c.decisions(ctx, "/v1/bandits/"+url.PathEscape(name)+"/rankings", req)
}
