package bandit

import (
	"context"
	"encoding/json"
	"fmt"
)

// MaxBatchContexts is the most contexts one DecideBatch takes: a page of
// items, whose decisions the PostgreSQL store's group committer takes at
// once (its MaxBatch is 256 by default: one commit, or two when the
// batch straddles that limit with other writes).
const MaxBatchContexts = 100

// BatchRequest asks for one decision per context, made and stored
// together.
type BatchRequest struct {
	// Contexts are the JSON objects of feature values, 1 to
	// MaxBatchContexts of them.
	Contexts []json.RawMessage
	// EventIDs, when not empty, names each context's decision (as
	// DecideRequest.EventID: a decided one is replayed): as many as
	// Contexts, distinct. Empty: the service makes them.
	EventIDs []string
	// Excluded names arms that no decision of the batch may choose.
	Excluded []string
}

// DecideBatch makes one decision per context, as Decide does each
// (the same validation, policy, propensities and idempotency), under
// one model version, and stores them together: handed at once to the
// PostgreSQL store's group committer (Store.InsertDecisions; one commit,
// or two when they straddle its MaxBatch), durable when it returns. The outcomes are in the order of the
// contexts.
//
// Every context is validated before any is decided: a problem anywhere
// is a *ValidationError naming the field with its index
// ("contexts[3].device", "event_ids[2]", "contexts" for a batch that is
// empty or larger than MaxBatchContexts), and nothing is stored. An
// event ID that was decided for another context, or whose stored arm
// is now excluded, is ErrConflict naming "contexts[i]"; the batch's
// other decisions are then stored (each is idempotent to retry).
func (a *Agent) DecideBatch(ctx context.Context, req BatchRequest) ([]*Outcome, error) {
	if err := a.checkArchived(); err != nil {
		return nil, err
	}
	var v validator
	n := len(req.Contexts)
	if n == 0 || n > MaxBatchContexts {
		v.add("contexts", fmt.Sprintf("want 1 to %d contexts; got %d", MaxBatchContexts, n))
	}
	a.eventIDs(req.EventIDs, n, &v)
	ps := make([]pendingDecision, 0, min(n, MaxBatchContexts))
	if n <= MaxBatchContexts {
		for i, raw := range req.Contexts {
			x, err := a.encode(raw, fmt.Sprintf("contexts[%d]", i), &v)
			if err != nil {
				return nil, err
			}
			p := pendingDecision{context: raw, x: x}
			if len(req.EventIDs) == n {
				p.eventID = req.EventIDs[i]
			}
			ps = append(ps, p)
		}
	}
	excluded := a.excluded(req.Excluded, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	return a.decideAll(ctx, ps, excluded, "contexts")
}
