package strictjson_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/strictjson"
)

// The one-pass readers are checked against the general path they stand
// in for, bandit.DecodeStrict (this external test package may import
// bandit, which imports strictjson).
// decisionBody is the API's decision request as bandit.DecodeStrict reads it.
type decisionBody struct {
	EventID      *string         `json:"event_id"`
	Context      json.RawMessage `json:"context"`
	ExcludedArms []string        `json:"excluded_arms"`
}

var fastDecisionBodies = []string{
	`{"context": {"color": "red", "size": 1}}`,
	`{"event_id": "e-1", "context": {"color": "red", "size": 1}, "excluded_arms": ["a"]}`,
	` {"excluded_arms":[],"context":{},"event_id":""} `,
	`{}`,
	`{"context": {"a": true, "b": false, "c": null, "d": -1.5E+2, "é": "x"}}`,
	`{"context": {"color": "red"}, "context": {"color": "blue"}}`,
	`{"context": {"color": "red", "color": "blue"}}`,
	`{"context": {"color": {"nested": 1}}}`,
	`{"context": {"color": "red"}, "other": 1}`,
	`{"event_id": null, "context": {}}`,
	`{"event_id": "e\u0031", "context": {}}`,
	`{"excluded_arms": null, "context": {}}`,
	`{"excluded_arms": ["a", 1], "context": {}}`,
	`{"context": {"size": 1e400}}`, // refused: no float64 holds it (Check's numberProblem)
	`{"context": {}} {}`,
	`{"context": [1]}`,
	"{\"context\": {\"a\": \"\x00\"}}",
}

// checkDecisionBody fails t if ParseDecisionBody accepts body with other
// values than DecodeStrict's, or accepts what it refuses.
func checkDecisionBody(t *testing.T, body []byte) bool {
	t.Helper()
	id, ctx, ex, ok := strictjson.ParseDecisionBody(body)
	if !ok {
		return false
	}
	var want decisionBody
	if err := bandit.DecodeStrict(body, &want); err != nil {
		t.Fatalf("ParseDecisionBody took %q, which DecodeStrict refuses: %v", body, err)
	}
	if (id == nil) != (want.EventID == nil) || id != nil && *id != *want.EventID {
		t.Fatalf("ParseDecisionBody(%q): event ID %v, DecodeStrict %v", body, id, want.EventID)
	}
	if string(ctx) != string(want.Context) {
		t.Fatalf("ParseDecisionBody(%q): context %q, DecodeStrict %q", body, ctx, want.Context)
	}
	if (ex == nil) != (want.ExcludedArms == nil) || !slices.Equal(ex, want.ExcludedArms) {
		t.Fatalf("ParseDecisionBody(%q): excluded %q, DecodeStrict %q", body, ex, want.ExcludedArms)
	}
	return true
}

func TestParseDecisionBodyAgreesWithDecodeStrict(t *testing.T) {
	fast := 0
	for _, b := range fastDecisionBodies {
		if checkDecisionBody(t, []byte(b)) {
			fast++
		}
	}
	if fast != 5 {
		t.Errorf("ParseDecisionBody took %d bodies, want the 5 plain ones", fast)
	}
}

func FuzzParseDecisionBody(f *testing.F) {
	for _, b := range fastDecisionBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkDecisionBody(t, body) })
}

// checkRewardBody fails t if ParseRewardBody accepts body with another
// value than DecodeStrict's, or accepts what it refuses.
func checkRewardBody(t *testing.T, body []byte) bool {
	t.Helper()
	v, ok := strictjson.ParseRewardBody(body)
	if !ok {
		return false
	}
	var want struct {
		Value *float64 `json:"value"`
	}
	if err := bandit.DecodeStrict(body, &want); err != nil {
		t.Fatalf("ParseRewardBody took %q, which DecodeStrict refuses: %v", body, err)
	}
	if want.Value == nil || math.Float64bits(*want.Value) != math.Float64bits(v) {
		t.Fatalf("ParseRewardBody(%q) = %v, DecodeStrict %v", body, v, want.Value)
	}
	return true
}

var fastRewardBodies = []string{
	`{"value": 5}`, ` {"value":-35} `, `{"value": 0.125e-2}`, `{"value": -0}`,
	`{"value": 1e400}`, `{"value": "5"}`, `{"value": 5, "value": 6}`, `{"value": null}`, `{}`, `{"value": 5} 1`, `{"Value": 5}`,
}

func TestParseRewardBodyAgreesWithDecodeStrict(t *testing.T) {
	fast := 0
	for _, b := range fastRewardBodies {
		if checkRewardBody(t, []byte(b)) {
			fast++
		}
	}
	if fast != 4 {
		t.Errorf("ParseRewardBody took %d bodies, want the 4 plain ones", fast)
	}
}

func FuzzParseRewardBody(f *testing.F) {
	for _, b := range fastRewardBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkRewardBody(t, body) })
}
