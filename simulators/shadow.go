package simulators

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// Shadow estimates (issue 32): the value of a bandit's candidate
// (shadow) against its live policy's, from the candidate's choices
// logged at the live policy's decisions, with the estimators of refinery
// evaluate.

// Bounds of EstimateShadow.
const (
	// ShadowWindow is how many of a bandit's newest decisions
	// EstimateShadow reads (two pages of ListDecisions): the estimate is
	// over those of them with a reward and a shadow choice, so that a
	// GET costs the same whatever the log's length.
	ShadowWindow = 2000
	// ShadowLevel is the level of its intervals, evaluate's default.
	ShadowLevel = 0.95
)

// EstimateShadow estimates the value of the named bandit's candidate and
// of its live policy by SNIPS (self-normalized IPS; Swaminathan and
// Joachims 2015), over the rewarded decisions among its ShadowWindow
// newest made since the candidate was set (bandit.ShadowConfig.Since;
// zero: any) that logged the candidate's probabilities: the candidate's
// with weights π(a_i|x_i)/μ(a_i|x_i), π its logged probability of the
// logged arm and μ the live policy's; the live policy's with weights 1,
// the mean logged reward. SNIPS rather than IPS: it stays within the
// rewards' range when the floored Thompson-sampling propensities give a
// few large weights, and refinery evaluate reports it among its
// defaults (DR needs a reward model fitted apart, which a log window
// does not have). Intervals are at ShadowLevel. With fewer than two such
// decisions the estimates are nil with the reason.
//
// A ranking's slots (bandit.Agent.Rank) count as decisions each, with
// the weight of the ranking down to the slot: slot j's is
//
//	w_j = Π_{i<=j} π_i(a_i|a_1..a_{i-1}) / μ_i(a_i|a_1..a_{i-1})
//	    = π(a_1..a_j|x) / μ(a_1..a_j|x),
//
// a_i the live arm of slot i and π_i, μ_i the candidate's and the live
// policy's logged probabilities there given the live arms above, the
// product of the slots above logged as bandit.Decision.ShadowAbove: the
// prefix weight of off-policy estimators of rankings under the cascade
// model (Li et al. 2018). It is unbiased for the candidate's expected
// reward of slot j when that reward depends on the context and the arms
// of slots 1 to j, not on those below, which a reader who scans the
// page top down has not yet seen. The estimate is then the candidate's mean reward per
// slot (the live policy's too), each rewarded slot a decision. Slots
// logged before migration 0008 (Slot 0) count as single decisions.
func EstimateShadow(ctx context.Context, st bandit.Store, name string, since time.Time) (*bandit.ShadowEstimate, error) {
	const page = 1000
	var cand, live []OPERow
	est := &bandit.ShadowEstimate{Estimator: EstSNIPS, Level: ShadowLevel}
	var before time.Time
	older := false // a decision made before since was read: the rest are older still
	for est.Scanned < ShadowWindow && !older {
		recs, err := st.ListDecisions(ctx, name, before, min(page, ShadowWindow-est.Scanned))
		if err != nil {
			return nil, fmt.Errorf("shadow estimate %s: %w", name, err)
		}
		for _, r := range recs {
			if r.CreatedAt.Before(since) {
				older = true
				break
			}
			est.Scanned++
			if r.Reward == nil || r.ShadowPropensities == nil || len(r.ShadowPropensities) != len(r.Propensities) ||
				r.Arm < 0 || r.Arm >= len(r.Propensities) || !(r.Propensities[r.Arm] > 0) {
				continue
			}
			row := OPERow{Pi: r.ShadowPropensities, Arm: r.Arm, Mu: r.Propensities[r.Arm], Reward: r.Reward.Value, MuAll: r.Propensities}
			if r.Slot > 1 {
				row.Pi = make([]float64, len(r.ShadowPropensities))
				for b, p := range r.ShadowPropensities {
					row.Pi[b] = r.ShadowAbove * p
				}
			}
			cand = append(cand, row)
			row.Pi = r.Propensities
			live = append(live, row)
		}
		if len(recs) < page {
			break
		}
		before = recs[len(recs)-1].CreatedAt
	}
	est.Decisions = len(cand)
	if len(cand) < 2 {
		est.Reason = fmt.Sprintf("%d rewarded decisions with this shadow's choice among the newest %d, want at least 2", len(cand), est.Scanned)
		return est, nil
	}
	z := ZOfLevel(ShadowLevel)
	est.ESS = ESS(cand)
	est.Live = finiteInterval(SNIPS(live, z))
	c := SNIPS(cand, z)
	if est.Candidate = finiteInterval(c); est.Candidate == nil {
		est.Reason = c.Reason
	}
	return est, nil
}

// finiteInterval returns e as a bandit.Interval, nil when its value or
// bounds are not finite (an undefined estimate).
func finiteInterval(e Estimate) *bandit.Interval {
	for _, v := range []float64{e.Value, e.Lo, e.Hi} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
	}
	return &bandit.Interval{Value: e.Value, Lo: e.Lo, Hi: e.Hi}
}
