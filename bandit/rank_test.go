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
// The same holds of a bandit with slot features ranked on slot contexts
// (slotRequest), each slot on its own merged context.
func TestRankedSlotPropensitiesAreTheirFrequencies(t *testing.T) {
	const n, k = 4000, 3
	ctx := context.Background()
	for _, slotted := range []bool{false, true} {
		for name, cfg := range propensityKinds() {
			t.Run(slotCase(slotted)+"/"+name, func(t *testing.T) {
				req := bandit.RankRequest{Context: json.RawMessage(`{"color": "red", "size": 0.5}`), Slots: k}
				if slotted {
					req = slotRequest(cfg)
				}
				a := propensityAgent(t, name, cfg)
				testRankedFrequencies(t, ctx, a, req, name)
			})
		}
	}
}

// slotCase names the subtests on one context or on slot contexts.
func slotCase(slotted bool) string {
	if slotted {
		return "on slot contexts"
	}
	return "on one context"
}

// slotRequest gives cfg one numeric slot feature, pos, and returns a
// ranking of three slots at pos -1, 0.5 and 2.
func slotRequest(cfg *bandit.Config) bandit.RankRequest {
	cfg.SlotFeatures = []bandit.Feature{{Name: "pos", Type: bandit.Numeric}}
	return bandit.RankRequest{Context: json.RawMessage(`{"color": "red", "size": 0.5}`), Slots: 3,
		SlotContexts: []json.RawMessage{json.RawMessage(`{"pos": -1}`), json.RawMessage(`{"pos": 0.5}`), json.RawMessage(`{"pos": 2}`)}}
}

func testRankedFrequencies(t *testing.T, ctx context.Context, a *bandit.Agent, req bandit.RankRequest, name string) {
	const n, k = 4000, 3
	var sum, sum2, psum [k - 1][3]float64
	var est string
	for i := range n {
		outs, err := a.Rank(ctx, req)
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
}

// A ranking asks for 1 to the allowed arms' number of slots, and its
// event IDs are one per slot, distinct and valid; otherwise it is a
// ValidationError naming the field (api.TestRankings checks that nothing
// is stored).
func TestRankRejectsBadRequests(t *testing.T) {
	ctx := context.Background()
	a := propensityAgent(t, "eps-greedy", smallConfig(bandit.EpsGreedy))
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

// A candidate of every policy kind, beside a live eps-greedy (epsilon
// 0.2, exact probabilities) ranking all three arms at a fixed context,
// logs at each slot its probabilities given the live arms of the slots
// above: a distribution over the arms not above (0 for those) whose
// arm's probability is > 0, and the weight of the slots above, 1 at the
// top and the product of the slots above's
// ShadowPropensities[Arm] / Propensities[Arm] below. The weight down to
// a slot is then the candidate's probability of the live arms there
// over the live policy's, whose mean under the live policy is 1 for
// every slot (Σ over the arms of the candidate's probabilities): checked
// over 3,000 rankings within 4.5 standard errors. A candidate weighed
// given its own slots above instead misses 1 by the probability that its
// arms above are not the live ones. The same holds on slot contexts
// (slotRequest), which the candidate ranks on as the live policy does.
func TestShadowSlotWeightsAverageOne(t *testing.T) {
	const n, k = 3000, 3
	ctx := context.Background()
	for _, slotted := range []bool{false, true} {
		for name, cand := range propensityKinds() {
			t.Run(slotCase(slotted)+"/"+name, func(t *testing.T) {
				cfg := smallConfig(bandit.EpsGreedy)
				eps := 0.2
				cfg.Policy.Epsilon = &eps
				cfg.Shadow = &bandit.ShadowConfig{Policy: cand.Policy, Model: cand.Model, Training: cand.Training, Refinement: cand.Refinement}
				req := bandit.RankRequest{Context: json.RawMessage(`{"color": "red", "size": 0.5}`), Slots: k}
				if slotted {
					req = slotRequest(cfg)
				}
				a := propensityAgent(t, "eps-greedy", cfg)
				testShadowSlotWeights(t, ctx, a, req, name)
			})
		}
	}
}

func testShadowSlotWeights(t *testing.T, ctx context.Context, a *bandit.Agent, req bandit.RankRequest, name string) {
	const n, k = 3000, 3
	var sum, sum2 [k]float64
	for i := range n {
		outs, err := a.Rank(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		above, w := map[int]bool{}, 1.0
		for j, o := range outs {
			d := o.Decision
			p, total := d.ShadowPropensities, 0.0
			for b, q := range p {
				total += q
				if above[b] && q != 0 {
					t.Fatalf("ranking %d slot %d: the candidate's probability of the live arm %d above is %g, want 0 (%v)", i, j+1, b, q, p)
				}
			}
			if d.Slot != j+1 || len(p) != 3 || math.Abs(total-1) > 1e-9 || above[d.ShadowArm] || !(p[d.ShadowArm] > 0) ||
				math.Abs(d.ShadowAbove-w) > 1e-12*w {
				t.Fatalf("ranking %d slot %d: slot %d, shadow arm %d, probabilities %v, weight above %g; want slot %d, a distribution over 3 arms giving its arm > 0, weight %g",
					i, j+1, d.Slot, d.ShadowArm, p, d.ShadowAbove, j+1, w)
			}
			w *= p[d.Arm] / d.Propensities[d.Arm]
			sum[j] += w
			sum2[j] += w * w
			above[d.Arm] = true
		}
	}
	for j := range k {
		m := sum[j] / n
		se := math.Sqrt((sum2[j]/n - m*m) / n)
		if math.Abs(m-1) > 4.5*se {
			t.Errorf("slot %d: the mean weight down to it is %.4f (se %.4f) over %d rankings, want 1", j+1, m, se, n)
		}
	}
	t.Logf("%s: mean weight down to each slot %.4f %.4f %.4f", name, sum[0]/n, sum[1]/n, sum[2]/n)
}

// Slot j of a ranking on slot contexts is decided on the context merged
// with slot j's features: its decision stores that context and its
// encoding, and eps-greedy's scores there are exactly those of a single
// decision on the merged context (the point estimate's). The kinds that
// draw from the request's random source rank every slot on the same
// posterior draw: on three equal slot contexts the three slots' scores
// are equal, while two rankings' differ (a fresh draw per request).
func TestSlotScoresAreTheMergedContexts(t *testing.T) {
	ctx := context.Background()
	kinds := propensityKinds()
	// flow-ts is left out: on this toy bandit with the slot feature its
	// decisions, single ones too, report 0.3 for every arm's score.
	for _, name := range []string{"eps-greedy", "mf-ts", "laplace-diagonal", "laplace-last-layer"} {
		t.Run(name, func(t *testing.T) {
			cfg := kinds[name]
			req := slotRequest(cfg)
			a := propensityAgent(t, name, cfg)
			outs, err := a.Rank(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for j, o := range outs {
				d := o.Decision
				var got, want map[string]any
				if err := json.Unmarshal(d.Context, &got); err != nil {
					t.Fatal(err)
				}
				_ = json.Unmarshal([]byte(`{"color": "red", "size": 0.5}`), &want)
				_ = json.Unmarshal(req.SlotContexts[j], &want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("slot %d stored context %s, want %v", j+1, d.Context, want)
				}
				single, err := a.Decide(ctx, bandit.DecideRequest{Context: d.Context})
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(single.Decision.Encoded) != fmt.Sprint(d.Encoded) {
					t.Errorf("slot %d encoded %v, a single decision on its context %v", j+1, d.Encoded, single.Decision.Encoded)
				}
				if name == "eps-greedy" && fmt.Sprint(single.Decision.Scores) != fmt.Sprint(d.Scores) {
					t.Errorf("slot %d scores %v, a single decision's on its context %v", j+1, d.Scores, single.Decision.Scores)
				}
			}
			if name == "eps-greedy" {
				return
			}
			same := req
			same.SlotContexts = []json.RawMessage{req.SlotContexts[1], req.SlotContexts[1], req.SlotContexts[1]}
			var first []float64
			for i := range 2 {
				outs, err := a.Rank(ctx, same)
				if err != nil {
					t.Fatal(err)
				}
				for j, o := range outs[1:] {
					if fmt.Sprint(o.Decision.Scores) != fmt.Sprint(outs[0].Decision.Scores) {
						t.Errorf("ranking %d: slot %d scores %v, slot 1's %v: want one draw for every slot", i+1, j+2, o.Decision.Scores, outs[0].Decision.Scores)
					}
				}
				if i == 1 && fmt.Sprint(first) == fmt.Sprint(outs[0].Decision.Scores) {
					t.Errorf("two rankings drew the same scores %v: want a fresh draw per request", first)
				}
				first = outs[0].Decision.Scores
			}
		})
	}
}
