// Package wire holds the members of the HTTP API's answers that the
// service (package api) and its Go client (package api/client) both
// spell: one definition, embedded in the types of each, so that the
// client cannot drift from what the service answers. The OpenAPI
// document (api/openapi.json) describes them; the contract test of
// package api checks the service's answers against it.
package wire

import (
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// Decision is a decision as every answer that holds one spells it:
// POST /v1/bandits/{name}/decisions (with the propensity, on a new
// decision) and GET .../decisions (with the context and the reward).
// Probabilities and Scores name the arms the bandit had when it decided.
type Decision struct {
	EventID       string             `json:"event_id"`
	Arm           string             `json:"arm"`
	Probabilities map[string]float64 `json:"probabilities"`
	Scores        map[string]float64 `json:"scores"`
	ModelVersion  int64              `json:"model_version"`
	Sample        bandit.SampleKind  `json:"sample"`
	Policy        string             `json:"policy"`
	CreatedAt     time.Time          `json:"created_at"`
}
