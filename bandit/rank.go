package bandit

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strconv"

	"github.com/refinery-bandits/refinery/policy"
)

// RankRequest asks for an ordered choice of distinct arms for one
// context: a page's slots, top first.
type RankRequest struct {
	// Context is the JSON object of feature values, shared by the slots.
	Context json.RawMessage
	// Slots is the number of arms to rank, 1 to the arms not excluded.
	Slots int
	// EventIDs, when not empty, names each slot's decision (as
	// DecideRequest.EventID): as many as Slots, distinct. Empty: the
	// service makes them, "<random>:1" to "<random>:<Slots>".
	EventIDs []string
	// Excluded names arms that no slot may take.
	Excluded []string
	// SlotContexts, when not nil, gives each slot's features: as many
	// objects as Slots, in slot order, keyed by the names of
	// Config.SlotFeatures. Slot j is decided, and its decision stored,
	// on Context merged with SlotContexts[j] (slots.go).
	SlotContexts []json.RawMessage
}

// ranking is what a policy kind's rank gives for one request: the arms
// of the slots in order, and per slot the probability of each arm
// landing there given the arms of the slots above (0 for those and the
// excluded), how it was obtained, the draw that ranked (Scores) and
// what it acted on.
type ranking struct {
	order   []int
	probs   [][]float64
	props   []*Propensity
	scores  []float64
	sample  SampleKind
	version int64 // the posterior version acted on; 0: the model's
	// slotScores, when not nil, is each slot's draw at its own context
	// (slotRanking); nil: every slot's is scores.
	slotScores [][]float64
	// rows is the groups' draws (rows of arms) that counted the
	// probabilities (voteRanking); nil for the exact rules, whose
	// epsilon is eps and random whether the order is the random one
	// (exactRanking).
	rows   []float64
	eps    float64
	random bool
	// given returns, for the same draws, the probabilities of each arm
	// in slot j given the arms of above[:j] in the slots above, for
	// slots 1 to len(above)-1 (index 0 is not computed: the first
	// slot's are probs[0], whatever the slots above), unfloored; a slot
	// whose slots above the draws never rank gets the uniform
	// distribution over the arms it may take. Agent.rankGiven floors
	// them.
	given func(above []int) [][]float64
}

// Rank chooses an ordered list of req.Slots distinct arms for one
// context, and logs each slot as a decision of its own: its own event ID,
// arm and propensity, stored together (Store.InsertDecisions), each
// taking its own reward through Reward.
//
// The Thompson-sampling kinds rank by one posterior sample per request:
// the group of policy.samples draws that a single decision would argmax
// (its average prediction) orders the allowed arms, best first. Slot j's
// propensity is the probability that its arm lands there given the arms
// of the slots above, under the same draw distribution:
//
//	p_j(b) = P(r_j = b | r_1..r_{j-1}) = P(r_1..r_{j-1}, b) / P(r_1..r_{j-1})
//
// estimated from the M = policy.propensity_samples groups a single
// decision's propensities come from (the request's own group first,
// fresh draws for the others; the refined pool's resampled subsets, or
// all of them when at most policy.MaxExactSubsets, as Decide does):
// the fraction, among the groups whose ranking starts with the slots
// above, of those that put b next. Propensity.Groups is that number of
// groups for each slot (M for the first; fewer below), StdError is
// 1/(2 sqrt(Groups)), and the floor of Decide applies. For linear-ts
// and neural-linear the first slot's probabilities are exact
// (policy.StudentWinProbs) and the lower slots' are counted over M
// independent draws. uniform, greedy and eps-greedy are exact:
// eps-greedy ranks by a uniformly random permutation with probability
// epsilon and by the point estimate's scores otherwise. Rankings break
// ties of scores by arm order.
//
// A context, slot count or event ID at fault is a *ValidationError
// ("context.<feature>", "slots", "event_ids[i]") and nothing is stored.
// Event IDs decided before replay as in Decide, each on its own (a
// replayed slot keeps its stored arm).
//
// With slot contexts (RankRequest.SlotContexts, Config.SlotFeatures)
// each slot has its own context x_j, the request's merged with the
// slot's features, and the same random numbers draw every slot's scores
// (one posterior sample per request for the kinds that draw from rng;
// the refined pool takes the same samples for every slot while the bank
// keeps them, each slot counting as a use; the linear posteriors draw
// each slot's from their own source). Slot j takes the best arm of its own draw at x_j
// that the slots above have not taken, and its probabilities are those
// above with each group's ranking made the same way, slot by slot on
// that slot's draws (slotRanking).
//
// Each slot's decision logs its place (Decision.Slot, 1 at the top). A
// bandit's candidate (Config.Shadow, shadow.go) ranks the same request on
// its own model and random source, without acting on it, and each slot's
// decision logs the candidate's probabilities of each arm there given
// the live policy's arms in the slots above, computed and floored as
// the live ones are, an arm drawn from them (the candidate's own for
// that slot while its slots above are the live ones), and the weight of
// the slots above, the candidate's probability of the live arms there
// over the live policy's (Decision.ShadowPropensities, ShadowArm,
// ShadowAbove; askShadowRank).
func (a *Agent) Rank(ctx context.Context, req RankRequest) ([]*Outcome, error) {
	if err := a.checkArchived(); err != nil {
		return nil, err
	}
	var v validator
	x, err := a.encode(req.Context, "context", &v)
	if err != nil {
		return nil, err
	}
	slots := a.slotContexts(req.Context, req.SlotContexts, req.Slots, &v)
	excluded := a.excluded(req.Excluded, &v)
	allowed := len(a.cfg.Arms) - countTrue(excluded)
	if req.Slots < 1 || req.Slots > allowed {
		v.add("slots", fmt.Sprintf("want 1 to %d (the arms not excluded); got %d", allowed, req.Slots))
	}
	a.eventIDs(req.EventIDs, req.Slots, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	xs, contexts := [][]float64{x}, make([]json.RawMessage, req.Slots)
	for j := range contexts {
		contexts[j] = req.Context
	}
	if slots != nil {
		xs = make([][]float64, req.Slots)
		for j, c := range slots {
			if xs[j], err = a.encode(c, "slot_contexts", &v); err != nil {
				return nil, err
			}
			contexts[j] = c
		}
		if err := v.err(); err != nil {
			return nil, err
		}
	}
	rng := a.acquireRNG()
	defer a.releaseRNG(rng)
	m := a.model.Load()
	r, err := a.rank(ctx, m, xs, excluded, req.Slots, rng)
	if err != nil {
		return nil, err
	}
	version := m.version
	if r.version != 0 {
		version = r.version
	}
	base := NewEventID()
	ds := make([]*Decision, req.Slots)
	for j := range ds {
		id := base + ":" + strconv.Itoa(j+1)
		if len(req.EventIDs) > 0 {
			id = req.EventIDs[j]
		}
		scores := r.scores
		if r.slotScores != nil {
			scores = r.slotScores[j]
		}
		ds[j] = &Decision{
			Bandit: a.name, EventID: id, Context: contexts[j], Encoded: xs[min(j, len(xs)-1)],
			Arm: r.order[j], Propensities: r.probs[j], Scores: scores, Sample: r.sample,
			Policy: string(a.cfg.Policy.Kind), ModelVersion: version, Slot: j + 1,
		}
	}
	if sh := a.shadow.Load(); sh != nil {
		shRNG := sh.acquireRNG()
		defer sh.releaseRNG(shRNG)
		sh.askShadowRank(ctx, ds, xs, excluded, shRNG)
	}
	return a.record(ctx, ds, r.props, excluded, "slots")
}

// rank ranks k arms on the model m at the encoded context xs[0] (the
// policy kind's rank), or with one context per slot at xs[j]
// (slotRanking of the kind's rankings of each, from the same random
// numbers), and floors each slot's probabilities as Rank logs them:
// those not exact are floored at MinPropensity over the arms the slot
// may take, and a counted slot's StdError is 1/(2 sqrt(Groups)).
func (a *Agent) rank(ctx context.Context, m *model, xs [][]float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	var r *ranking
	if len(xs) == 1 {
		var err error
		if r, err = a.decider.rank(ctx, a, m, xs[0], excluded, k, rng); err != nil {
			return nil, err
		}
	} else {
		s1, s2 := rng.Uint64(), rng.Uint64()
		rs := make([]*ranking, len(xs))
		for j, x := range xs {
			var err error
			if rs[j], err = a.decider.rank(ctx, a, m, x, excluded, k, mrand.New(mrand.NewPCG(s1, s2))); err != nil {
				return nil, err
			}
		}
		r = slotRanking(rs, len(a.cfg.Arms), excluded)
	}
	for j, p := range r.props {
		if p.Estimator == "exact" {
			continue
		}
		policy.FloorPropensities(r.probs[j], unavailable(excluded, r.order[:j]), MinPropensity)
		p.Floor = MinPropensity
		if !p.Exact && p.Groups > 0 {
			p.StdError = 0.5 / math.Sqrt(float64(p.Groups))
		}
	}
	return r, nil
}

// rankGiven returns the probabilities of each arm in slot j of the
// ranking r (of a.rank, its first len(above) slots) given the arms
// above[:j] in the slots above instead of r's own: the first slot's are
// r's, the others r.given's, floored as rank floors r's. A shadow's
// ranking weighed at the live one's slots (askShadowRank).
func (a *Agent) rankGiven(r *ranking, excluded []bool, above []int) [][]float64 {
	probs := r.given(above)
	probs[0] = r.probs[0]
	for j := 1; j < len(probs); j++ {
		if r.props[j].Estimator != "exact" {
			policy.FloorPropensities(probs[j], unavailable(excluded, above[:j]), MinPropensity)
		}
	}
	return probs
}

// drawArm draws an arm with the probabilities p (summing to 1).
func drawArm(p []float64, rng *mrand.Rand) int {
	u, last := rng.Float64(), 0
	for b, q := range p {
		if q <= 0 {
			continue
		}
		if u -= q; u < 0 {
			return b
		}
		last = b
	}
	return last // rounding left u at or just above 0
}

// eventIDs checks a request's client event IDs, one per decision of n:
// none, or n valid and distinct ones.
func (a *Agent) eventIDs(ids []string, n int, v *validator) {
	if len(ids) > 0 && len(ids) != n {
		v.add("event_ids", fmt.Sprintf("want one event ID per decision (%d), or none for IDs made by the service; got %d", n, len(ids)))
	}
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		field := fmt.Sprintf("event_ids[%d]", i)
		if !ValidEventID(id) {
			v.add(field, "want 1 to 128 characters from [A-Za-z0-9._~:-]")
			continue
		}
		if j, ok := seen[id]; ok {
			v.add(field, fmt.Sprintf("the event ID %q of event_ids[%d] again: each decision of a request needs its own", id, j))
			continue
		}
		seen[id] = i
	}
}

// unavailable is the arms a slot cannot take: those excluded and those
// of the slots above it (above).
func unavailable(excluded []bool, above []int) []bool {
	m := slices.Clone(excluded)
	for _, b := range above {
		m[b] = true
	}
	return m
}

// rankOrder returns the allowed arms of scores, best first (ties by arm
// order), the first k of them.
func rankOrder(scores []float64, excluded []bool, k int) []int {
	order := make([]int, 0, len(scores))
	for j := range scores {
		if excluded == nil || !excluded[j] {
			order = append(order, j)
		}
	}
	slices.SortStableFunc(order, func(p, q int) int {
		switch {
		case scores[p] > scores[q]:
			return -1
		case scores[p] < scores[q]:
			return 1
		}
		return 0
	})
	return order[:k]
}

// voteRanking ranks by the draw own (a row of arms scores) and counts,
// over the n rows of draws, the probability of each arm in each slot
// given the slots above (voteProbs). own must be one of the rows (or be
// drawn as they are, the rows then counting it), so that every slot has
// at least one such row. It fills r's order, probs, scores, given and,
// per slot, a copy of prop with Groups the number of rows behind the
// slot's probabilities.
func voteRanking(own, rows []float64, arms int, excluded []bool, k int, prop Propensity) *ranking {
	r := &ranking{order: rankOrder(own, excluded, k), scores: own, rows: rows}
	var counts []int
	r.probs, counts = voteProbs([][]float64{rows}, arms, excluded, r.order)
	r.given = func(above []int) [][]float64 {
		p, _ := voteProbs([][]float64{rows}, arms, excluded, above)
		return p
	}
	r.props = make([]*Propensity, k)
	for j := range k {
		p := prop
		p.Groups = counts[j]
		r.props[j] = &p
	}
	return r
}

// voteProbs counts, over n groups of draws, the probability of each arm
// in slot j of order given the arms of the slots above it. Group i's
// ranking puts in slot j the best arm of its row at that slot (row i of
// slots[min(j, len(slots)-1)], each n rows of arms scores: one set of
// rows for every slot, or one per slot's context) that is neither
// excluded nor in its slots above, ties by arm order (n the fewest
// groups of any slot's: a refined pool may give one slot's context
// fewer than another's); among the groups
// whose ranking starts with order[:j], the fraction that put the arm
// next; counts[j] is that number of groups. A slot no group reaches
// gets the uniform distribution over the arms it may take.
func voteProbs(slots [][]float64, arms int, excluded []bool, order []int) (probs [][]float64, counts []int) {
	k := len(order)
	probs = make([][]float64, k)
	for j := range probs {
		probs[j] = make([]float64, arms)
	}
	counts = make([]int, k)
	taken := make([]bool, arms)
	n := len(slots[0])
	for _, rows := range slots {
		n = min(n, len(rows))
	}
	for i := range n / arms {
		clear(taken)
		copy(taken, excluded)
		for j := range k {
			rows := slots[min(j, len(slots)-1)]
			b := bestRemaining(rows[i*arms:(i+1)*arms], taken)
			counts[j]++
			probs[j][b]++
			if b != order[j] {
				break
			}
			taken[b] = true
		}
	}
	for j := range k {
		if counts[j] == 0 {
			uniformOver(probs[j], unavailable(excluded, order[:j]))
			continue
		}
		for b := range probs[j] {
			probs[j][b] /= float64(counts[j])
		}
	}
	return probs, counts
}

// uniformOver sets p to the uniform distribution over the arms not taken.
func uniformOver(p []float64, taken []bool) {
	n := len(p) - countTrue(taken)
	for b := range p {
		p[b] = 0
		if !taken[b] {
			p[b] = 1 / float64(n)
		}
	}
}

// exactRanking is the ranking of eps-greedy (greedy with eps 0, uniform
// with eps 1): with probability eps a uniformly random order of the m
// allowed arms, and otherwise the scores' order; its probabilities are
// exactProbs'.
func exactRanking(scores []float64, eps float64, excluded []bool, k int, rng *mrand.Rand) *ranking {
	arms := len(scores)
	greedy := rankOrder(scores, excluded, k)
	r := &ranking{order: greedy, scores: scores, eps: eps}
	allowed := arms - countTrue(excluded)
	if eps > 0 && rng.Float64() < eps {
		all := rankOrder(make([]float64, arms), excluded, allowed)
		rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		r.order, r.random = all[:k], true
	}
	r.probs = exactProbs(arms, greedy, eps, excluded, r.order)
	r.given = func(above []int) [][]float64 { return exactProbs(arms, greedy, eps, excluded, above) }
	r.props = make([]*Propensity, k)
	for j := range k {
		r.props[j] = &Propensity{Estimator: "exact"}
	}
	return r
}

// exactProbs is the probability of each arm in slot j of order given
// the arms of the slots above, under eps-greedy's ranking of arms arms
// by the greedy order greedy (at least as long as order). With u_j = eps (m-j)!/m!
// the probability of a given first j arms by the random order (m the
// allowed arms), the first j arms of a ranking have probability
// u_j + (1-eps) 1{they are the greedy first j}, and slot j's arm b,
// given the slots above,
//
//	(u_{j+1} + (1-eps) 1{above, b greedy}) / (u_j + (1-eps) 1{above greedy}).
//
// Slots above that the ranking never gives (eps 0 off the greedy order)
// leave the uniform distribution over the arms the slot may take.
func exactProbs(arms int, greedy []int, eps float64, excluded []bool, order []int) [][]float64 {
	k := len(order)
	allowed := arms - countTrue(excluded)
	probs := make([][]float64, k)
	u, onGreedy := eps, true
	for j := range k {
		uNext := u / float64(allowed-j)
		probs[j] = make([]float64, arms)
		taken := unavailable(excluded, order[:j])
		den := u
		if onGreedy {
			den += 1 - eps
		}
		if den == 0 {
			uniformOver(probs[j], taken)
		} else {
			for b := range arms {
				if taken[b] {
					continue
				}
				num := uNext
				if onGreedy && b == greedy[j] {
					num += 1 - eps
				}
				probs[j][b] = num / den
			}
		}
		onGreedy = onGreedy && order[j] == greedy[j]
		u = uNext
	}
	return probs
}

// bestRemaining returns the arm of the highest score among those not
// taken, the first of equal ones.
func bestRemaining(scores []float64, taken []bool) int {
	best := -1
	for b, v := range scores {
		if !taken[b] && (best < 0 || v > scores[best]) {
			best = b
		}
	}
	return best
}

// slotRanking is the ranking of slots with contexts of their own: rs[j]
// is the policy kind's ranking (of all the slots) at slot j's context,
// each from the same random numbers. Slot j takes the best arm of
// rs[j]'s draw (its scores) that is not excluded or taken by the slots
// above. The first slot's probabilities are rs[0]'s; the lower slots'
// are counted as voteProbs counts them, group i's ranking taking at
// slot j the best remaining arm of row i of rs[j]'s draws (exact for
// the exact rules: exactProbs on the greedy order made slot by slot,
// and the random order, the same at every slot's context, with
// probability epsilon).
func slotRanking(rs []*ranking, arms int, excluded []bool) *ranking {
	k, r0 := len(rs), rs[0]
	r := &ranking{scores: r0.scores, sample: r0.sample, version: r0.version, slotScores: make([][]float64, k), props: make([]*Propensity, k)}
	greedy := make([]int, k)
	taken := make([]bool, arms)
	copy(taken, excluded)
	for j, rj := range rs {
		r.slotScores[j] = rj.scores
		if rj.version != 0 && (r.version == 0 || rj.version < r.version) {
			r.version = rj.version // the oldest acted on
		}
		greedy[j] = bestRemaining(rj.scores, taken)
		taken[greedy[j]] = true
	}
	r.order = greedy
	if r0.rows == nil {
		if r0.random {
			r.order = r0.order
		}
		r.probs = exactProbs(arms, greedy, r0.eps, excluded, r.order)
		r.given = func(above []int) [][]float64 { return exactProbs(arms, greedy, r0.eps, excluded, above) }
		for j := range k {
			r.props[j] = &Propensity{Estimator: "exact"}
		}
		return r
	}
	rows := make([][]float64, k)
	for j, rj := range rs {
		rows[j] = rj.rows
	}
	var counts []int
	r.probs, counts = voteProbs(rows, arms, excluded, r.order)
	r.given = func(above []int) [][]float64 {
		p, _ := voteProbs(rows, arms, excluded, above)
		return p
	}
	r.probs[0], r.props[0] = r0.probs[0], r0.props[0]
	for j := 1; j < k; j++ {
		p := *rs[j].props[1] // a counted slot's (the first may be exact)
		p.Groups = counts[j]
		r.props[j] = &p
	}
	return r
}
