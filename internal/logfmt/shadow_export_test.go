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
