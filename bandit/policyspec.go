package bandit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// PolicySpec is a policy as the command line names it (refinery
// simulate --policies, refinery evaluate --candidates): KIND, or
// KIND:ARG for a kind whose capabilities take an argument: eps-greedy:E
// sets policy.epsilon (a number in [0, 1], as the configuration takes
// it), laplace-ts:S policy.laplace (one of Capabilities.Structures), and
// refined-ts:supply plays on the service's refined-sample supply.
type PolicySpec struct {
	Kind PolicyKind
	// Arg is the text after the colon, "" without one.
	Arg string
	// Epsilon is eps-greedy:E's E, nil without one.
	Epsilon *float64
	// Laplace is laplace-ts:S's S, "" without one.
	Laplace string
	// Supply is refined-ts:supply.
	Supply bool
}

// ParsePolicySpec parses KIND or KIND:ARG (PolicySpec).
func ParsePolicySpec(s string) (PolicySpec, error) {
	kind, arg, hasArg := strings.Cut(s, ":")
	k, err := ParsePolicyKind(kind)
	if err != nil {
		return PolicySpec{}, fmt.Errorf("unknown policy %q (%v)", s, err)
	}
	spec := PolicySpec{Kind: k, Arg: arg}
	if !hasArg {
		return spec, nil
	}
	c := KindCapabilities(k)
	switch {
	case c.Explores:
		e, err := strconv.ParseFloat(arg, 64)
		if err != nil || !(e >= 0 && e <= 1) {
			return PolicySpec{}, fmt.Errorf("%s: epsilon must be a number in [0, 1]", s)
		}
		spec.Epsilon = &e
	case len(c.Structures) > 0:
		if !slices.Contains(c.Structures, arg) {
			return PolicySpec{}, fmt.Errorf("%s: want %s:%s", s, kind, strings.Join(c.Structures, " or "+kind+":"))
		}
		spec.Laplace = arg
	case c.SampleBank:
		if arg != "supply" {
			return PolicySpec{}, fmt.Errorf("%s: want %s:supply", s, kind)
		}
		spec.Supply = true
	default:
		return PolicySpec{}, fmt.Errorf("policy %q takes no argument", kind)
	}
	return spec, nil
}
