package logfmt

import (
	"bufio"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// TestDSJSONCarriesTheShadowChoice: a decision with a candidate's choice
// is exported with _shadow (its 1-based action and every arm's
// probability in the bandit's order); one without has no _shadow.
func TestDSJSONCarriesTheShadowChoice(t *testing.T) {
	b := &Bandit{Arms: []string{"x", "y", "z"}}
	for _, tc := range []struct {
		name   string
		shadow []float64
	}{{"with a shadow choice", []float64{0.1, 0.2, 0.7}}, {"without", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: "e1", Context: json.RawMessage(`{}`), Arm: 1,
				Propensities: []float64{0.2, 0.5, 0.3}, ShadowArm: 2, ShadowPropensities: tc.shadow}}
			var sb strings.Builder
			w := bufio.NewWriter(&sb)
			if err := WriteDSJSON(w, b, rec); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			var l struct {
				Shadow *struct {
					A int       `json:"a"`
					P []float64 `json:"p"`
				} `json:"_shadow"`
			}
			if err := json.Unmarshal([]byte(sb.String()), &l); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.shadow == nil && l.Shadow != nil:
				t.Errorf("_shadow %+v, want none", l.Shadow)
			case tc.shadow != nil && (l.Shadow == nil || l.Shadow.A != 3 || !slices.Equal(l.Shadow.P, tc.shadow)):
				t.Errorf("_shadow %+v, want action 3 and p %v", l.Shadow, tc.shadow)
			}
		})
	}
}

// TestDSJSONRefusesAMalformedShadowChoice: a _shadow whose action is not
// one of the line's arms, or whose probabilities are not one per arm of
// _multi, is an error naming the line and _shadow, and no decision is
// read.
func TestDSJSONRefusesAMalformedShadowChoice(t *testing.T) {
	for _, tc := range []struct {
		name, shadow, want string
	}{
		{"action 0", `{"a":0,"p":[0.5,0.5]}`, "line 1: _shadow: action 0, want 1 to 2"},
		{"an action beyond the arms", `{"a":3,"p":[0.5,0.5]}`, "line 1: _shadow: action 3, want 1 to 2"},
		{"more probabilities than arms", `{"a":1,"p":[0.5,0.25,0.25]}`, "line 1: _shadow: 3 probabilities for 2 arms"},
		{"no probabilities", `{"a":1,"p":[]}`, "line 1: _shadow: 0 probabilities for 2 arms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := 0
			err := ReadDSJSON(strings.NewReader(dsjsonLineFor(t, "e1", `,"_shadow":`+tc.shadow)), []string{"a", "b"}, func(int, *bandit.DecisionRecord) error {
				read++
				return nil
			})
			if err == nil || err.Error() != tc.want || read != 0 {
				t.Errorf("ReadDSJSON = %v after %d decisions, want %q and none", err, read, tc.want)
			}
		})
	}
}
