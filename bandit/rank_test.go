package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// Every policy kind's ranked slots log the probabilities they are drawn
// with: on a fixed context and posterior, over 4,000 rankings of all
// three arms, the mean of 1{slot j = b} - p̂_j(b) is 0 for every slot j
// and arm b, p̂_j being the logged probability of b in slot j given the
// slots above (the tower rule makes it 0 for the conditional
// probabilities, and for the count ratio over exchangeable groups that
// include the request's own: see Agent.Rank). The tolerance is 4.5
// standard errors of that mean (at least the binomial one at the mean
// logged probability) plus the floor's shift. Each ranking's
// arms are distinct, its first slot's logged probability of its arm is
// positive, and its last slot, the one arm left, has probability 1.
func TestRankedSlotPropensitiesAreTheirFrequencies(t *testing.T) {
	const n, k = 4000, 3
	ctx := context.Background()
	for name, cfg := range propensityKinds() {
		t.Run(name, func(t *testing.T) {
			a, done := propensityAgent(t, name, cfg)
			defer done()
			raw := json.RawMessage(`{"color": "red", "size": 0.5}`)
			var sum, sum2, psum [k - 1][3]float64
			var est string
			for i := range n {
				outs, err := a.Rank(ctx, bandit.RankRequest{Context: raw, Slots: k})
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != k {
					t.Fatalf("ranking %d: %d slots, want %d", i, len(outs), k)
				}
				seen := map[int]bool{}
				base, _, _ := strings.Cut(outs[0].Decision.EventID, ":")
				for j, o := range outs {
					d := o.Decision
					if seen[d.Arm] || !o.Created || d.EventID != fmt.Sprintf("%s:%d", base, j+1) {
						t.Fatalf("ranking %d slot %d: arm %d (seen %v), created %v, event %s: want distinct new arms, event IDs <base>:<slot>", i, j, d.Arm, seen, o.Created, d.EventID)
					}
					seen[d.Arm] = true
					if p := d.Propensities[d.Arm]; !(p > 0) || j == k-1 && math.Abs(p-1) > 1e-12 {
						t.Fatalf("ranking %d slot %d: arm %d logged at %g (%v)", i, j, d.Arm, p, d.Propensities)
					}
					if j == k-1 {
						continue
					}
					est = o.Propensity.Estimator
					for b := range 3 {
						hit := 0.0
						if d.Arm == b {
							hit = 1
						}
						x := hit - d.Propensities[b]
						sum[j][b] += x
						sum2[j][b] += x * x
						psum[j][b] += d.Propensities[b]
					}
				}
			}
			for j := range k - 1 {
				for b := range 3 {
					m := sum[j][b] / n
					// The sample's standard error is 0 when an arm nearly
					// always (or never) lands in the slot and no exception
					// was drawn; the binomial one at the mean logged
					// probability is its floor.
					p := psum[j][b] / n
					se := max(math.Sqrt((sum2[j][b]/n-m*m)/n), math.Sqrt(p*(1-p)/n))
					if tol := 4.5*se + 3*bandit.MinPropensity; math.Abs(m) > tol {
						t.Errorf("slot %d arm %d: frequency - mean logged probability = %.4f over %d rankings, more than %.4f", j+1, b, m, n, tol)
					}
				}
			}
			t.Logf("%s (%s): mean of 1{slot = b} - p̂ per slot and arm: %.4f", name, est, [k - 1][3]float64{
				{sum[0][0] / n, sum[0][1] / n, sum[0][2] / n}, {sum[1][0] / n, sum[1][1] / n, sum[1][2] / n}})
		})
	}
}

// A ranking asks for 1 to the allowed arms' number of slots, and its
// event IDs are one per slot, distinct and valid; otherwise it is a
// ValidationError naming the field (api.TestRankings checks that nothing
// is stored).
func TestRankRejectsBadRequests(t *testing.T) {
	ctx := context.Background()
	a, done := propensityAgent(t, "eps-greedy", smallConfig(bandit.EpsGreedy))
	defer done()
	raw := json.RawMessage(`{"color": "red", "size": 0.5}`)
	for _, tc := range []struct {
		name  string
		req   bandit.RankRequest
		field string
	}{
		{"more slots than arms", bandit.RankRequest{Context: raw, Slots: 4}, "slots"},
		{"more slots than arms not excluded", bandit.RankRequest{Context: raw, Slots: 3, Excluded: []string{"a"}}, "slots"},
		{"no slots", bandit.RankRequest{Context: raw}, "slots"},
		{"fewer event IDs than slots", bandit.RankRequest{Context: raw, Slots: 2, EventIDs: []string{"r1"}}, "event_ids"},
		{"an event ID twice", bandit.RankRequest{Context: raw, Slots: 2, EventIDs: []string{"r1", "r1"}}, "event_ids[1]"},
		{"an undeclared category", bandit.RankRequest{Context: json.RawMessage(`{"color": "green", "size": 1}`), Slots: 2}, "context.color"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := a.Rank(ctx, tc.req)
			var ve *bandit.ValidationError
			if !errors.As(err, &ve) || ve.Errors[0].Field != tc.field {
				t.Fatalf("Rank = %v, want a ValidationError naming %s", err, tc.field)
			}
		})
	}
}
