// Package wire holds the members of the HTTP API's answers that the
// service (package api) and its Go client (package api/client) both
// spell: one definition, embedded in the types of each, so that the
// client cannot drift from what the service answers. The OpenAPI
// document (api/openapi.json) describes them; the contract test of
// package api checks the service's answers against it.
package wire

import (
	"encoding/json"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
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
	Sample        spec.SampleKind    `json:"sample"`
	Policy        string             `json:"policy"`
	CreatedAt     time.Time          `json:"created_at"`
	// Shadow is the choice of the bandit's candidate configuration,
	// asked without acting on it; nil when it had none.
	Shadow *ShadowChoice `json:"shadow,omitempty"`
}

// ShadowChoice is a candidate's (shadow's) choice at a decision: its arm
// and its probability of every arm the bandit had.
type ShadowChoice struct {
	Arm           string             `json:"arm"`
	Probabilities map[string]float64 `json:"probabilities"`
}

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
//
// Field is a plain string: "" when the problem names no field. On the
// wire "field" is present exactly when "errors" is (a 400 with field
// problems; "" then means the body as a whole), as the service sends it.
type Problem struct {
	Type      string            `json:"type"`
	Title     string            `json:"title"`
	Status    int               `json:"status"`
	Detail    string            `json:"detail,omitempty"`
	Instance  string            `json:"instance,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
	Field     string            `json:"-"`
	Errors    []spec.FieldError `json:"errors,omitempty"`
}

// problemJSON is Problem as the wire spells it: field present with
// errors.
type problemJSON struct {
	Type      string            `json:"type"`
	Title     string            `json:"title"`
	Status    int               `json:"status"`
	Detail    string            `json:"detail,omitempty"`
	Instance  string            `json:"instance,omitempty"`
	RequestID string            `json:"request_id,omitempty"`
	Field     *string           `json:"field,omitempty"`
	Errors    []spec.FieldError `json:"errors,omitempty"`
}

// MarshalJSON writes p with "field" when it has errors.
func (p Problem) MarshalJSON() ([]byte, error) {
	j := problemJSON{Type: p.Type, Title: p.Title, Status: p.Status, Detail: p.Detail, Instance: p.Instance, RequestID: p.RequestID, Errors: p.Errors}
	if len(p.Errors) > 0 {
		j.Field = &p.Field
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads a problem; an absent "field" is "".
func (p *Problem) UnmarshalJSON(data []byte) error {
	var j problemJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*p = Problem{Type: j.Type, Title: j.Title, Status: j.Status, Detail: j.Detail, Instance: j.Instance, RequestID: j.RequestID, Errors: j.Errors}
	if j.Field != nil {
		p.Field = *j.Field
	}
	return nil
}
