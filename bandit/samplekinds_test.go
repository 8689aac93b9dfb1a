package bandit_test

import (
	"slices"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// Every policy kind's SampleKinds is exactly the set of kinds its
// decisions act on: over 40 step-mode decisions, retrained every 5
// rewards, every decision's kind is listed and every listed kind occurs
// (refined-ts decides on mean-field draws until its first refined
// samples). The metrics rely on the list to create the series of
// refinery_decisions_total at 0, so a new policy or kind fails here until
// it is listed.
func TestSampleKindsAreThoseDecisionsActOn(t *testing.T) {
	for _, kind := range bandit.PolicyKinds() {
		t.Run(string(kind), func(t *testing.T) {
			want := bandit.SampleKindsOf(kind)
			if len(want) == 0 {
				t.Fatalf("%s lists no sample kinds", kind)
			}
			seen := map[bandit.SampleKind]int{}
			for i, d := range playStep(t, kind, 1, 40) {
				if !slices.Contains(want, d.Sample) {
					t.Errorf("decision %d acted on %q, not in SampleKinds %q", i, d.Sample, want)
				}
				seen[d.Sample]++
			}
			for _, k := range want {
				if seen[k] == 0 {
					t.Errorf("SampleKinds lists %q, which no decision acted on (seen %v)", k, seen)
				}
			}
		})
	}
}
