package bandit_test

import (
	"fmt"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// TestParsePolicySpec: the command line's KIND[:ARG], shared by simulate
// and evaluate; an argument is what the kind's capabilities take.
func TestParsePolicySpec(t *testing.T) {
	for _, c := range []struct {
		in, want string // want: "error" for a refusal
	}{
		{"refined-ts", "refined-ts eps=<nil> laplace= supply=false"},
		{"eps-greedy:0.2", "eps-greedy eps=0.2 laplace= supply=false"},
		{"eps-greedy:0", "eps-greedy eps=0 laplace= supply=false"},
		{"eps-greedy:1", "eps-greedy eps=1 laplace= supply=false"},
		{"laplace-ts:last-layer", "laplace-ts eps=<nil> laplace=last-layer supply=false"},
		{"refined-ts:supply", "refined-ts eps=<nil> laplace= supply=true"},
		{"eps-greedy:1.5", "error"},
		{"eps-greedy:-0.1", "error"},
		{"eps-greedy:x", "error"},
		{"eps-greedy:", "error"},
		{"greedy:0.1", "error"},
		{"mf-ts:3", "error"},
		{"laplace-ts:full", "error"},
		{"flow-ts:last-layer", "error"},
		{"refined-ts:bank", "error"},
		{"oracle", "error"},
		{"", "error"},
	} {
		s, err := bandit.ParsePolicySpec(c.in)
		got := "error"
		if err == nil {
			eps := "<nil>"
			if s.Epsilon != nil {
				eps = fmt.Sprint(*s.Epsilon)
			}
			got = fmt.Sprintf("%s eps=%s laplace=%s supply=%v", s.Kind, eps, s.Laplace, s.Supply)
		}
		if got != c.want {
			t.Errorf("ParsePolicySpec(%q) = %s (%v), want %s", c.in, got, err, c.want)
		}
	}
}
