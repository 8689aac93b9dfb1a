package client

import (
	"context"
	"net/http"
	"net/url"
)

// BatchRequest asks for one decision per context, made and stored
// together (POST /v1/bandits/{name}/decision-batches).
type BatchRequest struct {
	// Contexts are the decisions' contexts, each as
	// DecisionRequest.Context: 1 to bandit.MaxBatchContexts of them.
	Contexts []any `json:"contexts"`
	// EventIDs, when not empty, are the decisions' idempotency keys: one
	// per context, in order, distinct. Empty: the server makes them.
	EventIDs []string `json:"event_ids,omitempty"`
	// ExcludedArms may not be chosen by any decision of the batch.
	ExcludedArms []string `json:"excluded_arms,omitempty"`
}

// decisionBatch is the answer of POST .../decision-batches.
type decisionBatch struct {
	Decisions []Decision `json:"decisions"`
}

// DecideBatch asks bandit name for one decision per context of req. The
// decisions are in the order of the contexts; a decision whose event ID
// was decided before is the stored one, Replayed, without a propensity.
// A problem with any context is a 400 *Error naming it
// ("contexts[3].device"), and then no decision was stored.
func (c *Client) DecideBatch(ctx context.Context, name string, req BatchRequest) ([]Decision, error) {
	return c.decisions(ctx, "/v1/bandits/"+url.PathEscape(name)+"/decision-batches", req)
}

// decisions posts req to path, a route that answers {"decisions": [...]}
// (201, or 200 when every one is a replay), and returns them, the
// replays (without a propensity) marked Replayed.
func (c *Client) decisions(ctx context.Context, path string, req any) ([]Decision, error) {
	var out decisionBatch
	if _, err := c.do(ctx, http.MethodPost, path, req, &out, http.StatusCreated, http.StatusOK); err != nil {
		return nil, err
	}
	for i := range out.Decisions {
		out.Decisions[i].Replayed = out.Decisions[i].Propensity == nil
	}
	return out.Decisions, nil
}
