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

// TestDSJSONCarriesARankingsSlot: a ranking's decision is exported with
// _slot (its place) and, below the first slot with a shadow choice, the
// weight of the slots above as _shadow's above, and both read back; a
// decision of no ranking has neither.
func TestDSJSONCarriesARankingsSlot(t *testing.T) {
	b := &Bandit{Arms: []string{"x", "y", "z"}}
	for _, tc := range []struct {
		name  string
		slot  int
		above float64
	}{{"the top slot", 1, 0}, {"a slot below", 3, 0.375}, {"a slot below of weight 0", 2, 0}, {"no ranking's", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &bandit.DecisionRecord{Decision: bandit.Decision{EventID: "e1", Context: json.RawMessage(`{}`), Arm: 1,
				Propensities: []float64{0.2, 0.5, 0.3}, ShadowArm: 2, ShadowPropensities: []float64{0.1, 0.2, 0.7},
				Slot: tc.slot, ShadowAbove: tc.above}}
			var sb strings.Builder
			w := bufio.NewWriter(&sb)
			if err := WriteDSJSON(w, b, rec); err != nil {
				t.Fatal(err)
			}
			w.Flush()
			line := sb.String()
			if has := strings.Contains(line, `"_slot":`); has != (tc.slot > 0) {
				t.Errorf("_slot in %s: %v, want %v", line, has, tc.slot > 0)
			}
			if has := strings.Contains(line, `"above":`); has != (tc.slot > 1) {
				t.Errorf("above in %s: %v, want %v", line, has, tc.slot > 1)
			}
			var got *bandit.DecisionRecord
			err := ReadDSJSON(strings.NewReader(line), b.Arms, func(_ int, r *bandit.DecisionRecord) error {
				got = r
				return nil
			})
			if err != nil || got == nil {
				t.Fatalf("ReadDSJSON(%s) = %v", line, err)
			}
			if got.Slot != tc.slot || got.ShadowAbove != tc.above {
				t.Errorf("read back slot %d, above %g; want %d, %g", got.Slot, got.ShadowAbove, tc.slot, tc.above)
			}
		})
	}
	for _, tc := range []struct {
		name, extra, want string
	}{
		{"a negative slot", `,"_slot":-1`, "line 1: _slot -1, want 1 or more (absent: no ranking's)"},
		{"above on the top slot", `,"_slot":1,"_shadow":{"a":1,"p":[0.5,0.5],"above":0.5}`, "line 1: _shadow: above 0.5 on slot 1, want a finite number >= 0 on a slot below the first"},
		{"a negative above", `,"_slot":2,"_shadow":{"a":1,"p":[0.5,0.5],"above":-0.5}`, "line 1: _shadow: above -0.5 on slot 2, want a finite number >= 0 on a slot below the first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ReadDSJSON(strings.NewReader(dsjsonLineFor(t, "e1", tc.extra)), []string{"a", "b"}, func(int, *bandit.DecisionRecord) error { return nil })
			if err == nil || err.Error() != tc.want {
				t.Errorf("ReadDSJSON = %v, want %q", err, tc.want)
			}
		})
	}
}
