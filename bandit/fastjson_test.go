package bandit

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
)

// fastEncoder is the schema the fast readers are checked on: required
// and optional features of both types, a non-ASCII category, and a
// numeric feature with a center and scale.
func fastEncoder() *Encoder {
	center, scale := 10.0, 4.0
	return NewEncoder([]Feature{
		{Name: "color", Type: Categorical, Values: []string{"red", "blue", "vert clair", "é"}},
		{Name: "size", Type: Numeric},
		{Name: "shape", Type: Categorical, Values: []string{"round", "flat"}, Optional: true},
		{Name: "weight", Type: Numeric, Center: &center, Scale: &scale, Optional: true},
	})
}

var fastContexts = []string{
	`{"color": "red", "size": 1}`,
	`{"size":-0.5e3,"color":"é","shape":"flat","weight":12.25}`,
	` { "color" : "blue" , "size" : 0 , "shape" : null } `,
	`{"color": "vert clair", "size": 1e12, "weight": null}`,
	`{"color": "red", "size": 1, "size": 2}`,
	`{"color": "red"}`,
	`{"color": "red", "size": 1, "other": 1}`,
	`{"color": "re\u0064", "size": 1}`,
	`{"color": "green", "size": 1}`,
	`{"color": "red", "size": 1e13}`,
	`{"color": "red", "size": 01}`,
	`{"color": "red", "size": "1"}`,
	`{"color": 1, "size": 1}`,
	`{"color": "red", "size": 1,}`,
	`{"color": "red", "size": 1} x`,
	"{\"color\": \"r\xffd\", \"size\": 1}",
	"{\"color\": \"red\t\", \"size\": 1}",
	`{"color": null, "size": 1}`,
	`{"color": "red", "size": 1, "weight": 4e12}`,
	`[]`, `null`, ``, `{`,
}

// TestEncodeFastAgreesWithEncode: the fast path takes the plain
// contexts and gives Encode's vector, and leaves every other context
// (refused, or not plain) to the general path.
func TestEncodeFastAgreesWithEncode(t *testing.T) {
	e := fastEncoder()
	fast := 0
	for _, c := range fastContexts {
		if checkEncodeFast(t, e, []byte(c)) {
			fast++
		}
	}
	// The first four are plain and valid: the fast path must take them.
	for _, c := range fastContexts[:4] {
		if _, ok := e.encodeFast([]byte(c)); !ok {
			t.Errorf("encodeFast refused the plain context %s", c)
		}
	}
	if fast != 4 {
		t.Errorf("encodeFast took %d contexts, want the 4 plain valid ones", fast)
	}
}

// checkEncodeFast fails t if encodeFast accepts raw with another vector
// than Encode's general path, or accepts what it refuses; it reports
// whether the fast path took raw.
func checkEncodeFast(t *testing.T, e *Encoder, raw []byte) bool {
	t.Helper()
	x, ok := e.encodeFast(raw)
	if !ok {
		return false
	}
	want, err := e.encode(raw)
	if err != nil {
		t.Fatalf("encodeFast took %q, which Encode refuses: %v", raw, err)
	}
	if !slices.Equal(x, want) {
		t.Fatalf("encodeFast(%q) = %v, Encode %v", raw, x, want)
	}
	return true
}

func FuzzEncodeFast(f *testing.F) {
	for _, c := range fastContexts {
		f.Add([]byte(c))
	}
	e := fastEncoder()
	f.Fuzz(func(t *testing.T, raw []byte) { checkEncodeFast(t, e, raw) })
}

// decisionBody is the API's decision request as DecodeStrict reads it.
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
	`{"context": {"size": 1e400}}`, // refused: no float64 holds it (CheckJSON's numberProblem)
	`{"context": {}} {}`,
	`{"context": [1]}`,
	"{\"context\": {\"a\": \"\x00\"}}",
}

// checkDecisionBody fails t if ParseDecisionBody accepts body with other
// values than DecodeStrict's, or accepts what it refuses.
func checkDecisionBody(t *testing.T, body []byte) bool {
	t.Helper()
	id, ctx, ex, ok := ParseDecisionBody(body)
	if !ok {
		return false
	}
	var want decisionBody
	if err := DecodeStrict(body, &want); err != nil {
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
	v, ok := ParseRewardBody(body)
	if !ok {
		return false
	}
	var want struct {
		Value *float64 `json:"value"`
	}
	if err := DecodeStrict(body, &want); err != nil {
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
