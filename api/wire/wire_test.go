package wire

import (
	"encoding/json"
	"testing"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// TestProblemField: "field" is on the wire exactly beside "errors" ("" for
// the body as a whole), and reads back as a plain string.
func TestProblemField(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Problem
		want string
	}{
		{"a field problem", Problem{Type: "about:blank", Title: "Bad Request", Status: 400, Detail: "value: want a number", Field: "value", Errors: []spec.FieldError{{Field: "value", Detail: "want a number"}}},
			`{"type":"about:blank","title":"Bad Request","status":400,"detail":"value: want a number","field":"value","errors":[{"field":"value","detail":"want a number"}]}`},
		{"the body as a whole", Problem{Type: "about:blank", Title: "Bad Request", Status: 400, Detail: "malformed JSON", Errors: []spec.FieldError{{Detail: "malformed JSON"}}},
			`{"type":"about:blank","title":"Bad Request","status":400,"detail":"malformed JSON","field":"","errors":[{"field":"","detail":"malformed JSON"}]}`},
		{"no field problems", Problem{Type: "about:blank", Title: "Not Found", Status: 404, Detail: "no bandit <b>", RequestID: "r1"},
			`{"type":"about:blank","title":"Not Found","status":404,"detail":"no bandit \u003cb\u003e","request_id":"r1"}`},
	} {
		b, err := json.Marshal(c.p)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: Marshal = %s, %v; want %s", c.name, b, err, c.want)
			continue
		}
		var back Problem
		if err := json.Unmarshal(b, &back); err != nil || back.Field != c.p.Field || back.Detail != c.p.Detail || len(back.Errors) != len(c.p.Errors) {
			t.Errorf("%s: Unmarshal = %+v, %v; want %+v", c.name, back, err, c.p)
		}
	}
}
