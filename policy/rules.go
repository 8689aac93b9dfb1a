package policy

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// The decision rules below are the only implementation of each rule:
// bandit.Agent.Decide calls them for every decision the service takes
// and, through the agent's step mode, for every decision of `refinery
// simulate`. They act on predictions the caller computed (nn.Predictor
// for the networks); they own no model and no random source.

// countAllowed returns the number of arms not excluded (excluded may be
// nil: none is).
func countAllowed(excluded []bool, arms int) int {
	n := arms
	for _, e := range excluded {
		if e {
			n--
		}
	}
	return n
}

// nthAllowed returns the k-th (from 0) arm that is not excluded.
func nthAllowed(excluded []bool, arms, k int) int {
	for a := range arms {
		if excluded != nil && excluded[a] {
			continue
		}
		if k == 0 {
			return a
		}
		k--
	}
	return -1
}

// sized returns s cleared if it has length n, or a new slice.
func sized(s []float64, n int) []float64 {
	if len(s) != n {
		return make([]float64, n)
	}
	clear(s)
	return s
}

// UniformRule picks an allowed arm uniformly at random (one rng.IntN)
// and sets d's exact probabilities, 1/m for each of the m allowed arms,
// and zero scores. excluded may be nil; it must leave an arm allowed.
func UniformRule(d *Decision, arms int, excluded []bool, rng *rand.Rand) {
	allowed := countAllowed(excluded, arms)
	d.Scores = sized(d.Scores, arms)
	d.Probabilities = sized(d.Probabilities, arms)
	for a := range arms {
		if excluded == nil || !excluded[a] {
			d.Probabilities[a] = 1 / float64(allowed)
		}
	}
	d.Arm = nthAllowed(excluded, arms, rng.IntN(allowed))
	d.Sample = SampleNone
}

// EpsGreedyRule plays the allowed arm with the highest score (ties
// broken at random) with probability 1 - eps and a uniformly random
// allowed arm otherwise (Havasi et al. 2021, Section 4.3, baseline;
// eps = 0 is greedy). The probabilities are exact:
//
//	p(greedy) = 1 - eps + eps/m,   p(other allowed arm) = eps/m,
//
// m the number of allowed arms. d.Scores must hold the scores. When t
// allowed arms tie for the highest score, Argmax picks one of them
// uniformly, and each of them has
//
//	p(tied arm) = (1 - eps)/t + eps/m
//
// (issue 30, finding 1: the tie-breaker's pick used to get all of 1 - eps).
func EpsGreedyRule(d *Decision, eps float64, excluded []bool, rng *rand.Rand) {
	arms := len(d.Scores)
	allowed := countAllowed(excluded, arms)
	greedy := Argmax(d.Scores, excluded, rng)
	d.Probabilities = sized(d.Probabilities, arms)
	ties := 0
	for a := range arms {
		if (excluded == nil || !excluded[a]) && d.Scores[a] == d.Scores[greedy] {
			ties++
		}
	}
	for a := range arms {
		if excluded == nil || !excluded[a] {
			d.Probabilities[a] = eps / float64(allowed)
			if d.Scores[a] == d.Scores[greedy] {
				d.Probabilities[a] += (1 - eps) / float64(ties)
			}
		}
	}
	d.Arm = greedy
	if eps > 0 && rng.Float64() < eps {
		d.Arm = nthAllowed(excluded, arms, rng.IntN(allowed))
	}
	d.Sample = SamplePoint
}

// Votes are the predicted rewards of every arm under a set of posterior
// samples at one context, for ThompsonVote.
type Votes struct {
	// Pool holds the predictions of n samples, n×Arms row-major.
	Pool []float64
	Arms int
	// S is the number of samples whose predictions one decision
	// averages; M the number of groups of S behind the propensity
	// estimate, the decision's own group included.
	S, M int
	// Resample: the pool is the samples at hand (M*S may exceed it),
	// group 0 is rows 0..S-1, which the caller drew uniformly without
	// replacement from the n rows, and every other group is S distinct
	// rows drawn the same way. Otherwise group g is rows g*S..g*S+S-1
	// and the pool must hold M*S independent draws.
	Resample bool
}

// MaxExactSubsets is the most S-subsets of a resampled pool that
// ThompsonVote enumerates to compute the propensities exactly (16
// refined samples, the default bank, in groups of 3: 560).
const MaxExactSubsets = 4096

// ThompsonVote is Thompson sampling on the average prediction of S
// posterior samples, with its propensity estimate (Havasi et al. 2021,
// Section 4.3, steps 1-3, and Agent.Decide in package bandit). The
// decision plays the argmax over allowed arms of the mean of group 0;
// the probability of arm k is the fraction of the M groups whose mean
// prefers k:
//
//	p̂_k = (1/M) #{g : k = argmax_j (1/S) Σ_{i in group g} f_j(x; w_i)}
//
// With independent groups (Resample false: fresh mean-field draws) p̂
// is unbiased for the probability that the rule picks k, with standard
// error at most 1/(2 sqrt(M)). With Resample every group is a uniform
// draw of S of the n samples at hand, as the decision's own group was,
// so p̂ is unbiased (with the same bound on its standard error) for the
// probability that the decision picks k given those samples: the
// propensity of the randomization that actually chose the arm, whatever
// the samples' reuse. With n = S it is 1 for the chosen arm (the
// decision is then a function of the samples). The chosen arm always has
// p̂ >= 1/M. d.Scores receives group 0's mean.
//
// With Resample and at most MaxExactSubsets S-subsets of the n rows,
// the probabilities are instead computed exactly by enumerating every
// subset (a tie counted as 1/t for each of the t tied arms, as Argmax
// breaks it): the probability given the samples at hand, without Monte
// Carlo error, in steps of 1/C(n, S) (issue 18, finding 2).
//
// ThompsonVote returns the number of groups behind the probabilities, M
// or C(n, S), and whether they are exact.
func ThompsonVote(d *Decision, v Votes, excluded []bool, rng *rand.Rand) (groups int, exact bool) {
	n := len(v.Pool) / v.Arms
	switch {
	case v.S < 1 || v.M < 1:
		panic(fmt.Sprintf("policy: ThompsonVote with S=%d, M=%d", v.S, v.M))
	case n < v.S || (!v.Resample && n < v.S*v.M):
		panic(fmt.Sprintf("policy: ThompsonVote with %d samples for S=%d, M=%d", n, v.S, v.M))
	}
	d.Scores = sized(d.Scores, v.Arms)
	d.Probabilities = sized(d.Probabilities, v.Arms)
	sum := make([]float64, v.Arms)
	if c := binomial(n, v.S, MaxExactSubsets); v.Resample && c <= MaxExactSubsets {
		for k := range v.S {
			for j, y := range v.Pool[k*v.Arms : (k+1)*v.Arms] {
				sum[j] += y
			}
		}
		d.Arm = Argmax(sum, excluded, rng)
		for j, y := range sum {
			d.Scores[j] = y / float64(v.S)
		}
		exactVote(d.Probabilities, v, excluded, sum)
		return c, true
	}
	var idx []int // Resample: a permutation of the rows
	if v.Resample {
		idx = make([]int, n)
		for i := range idx {
			idx[i] = i
		}
	}
	for g := range v.M {
		clear(sum)
		for k := range v.S {
			i := g*v.S + k
			if v.Resample {
				i = k
				if g > 0 { // a partial Fisher-Yates shuffle: S distinct rows
					j := k + rng.IntN(n-k)
					idx[k], idx[j] = idx[j], idx[k]
					i = idx[k]
				}
			}
			for j, y := range v.Pool[i*v.Arms : (i+1)*v.Arms] {
				sum[j] += y
			}
		}
		best := Argmax(sum, excluded, rng)
		d.Probabilities[best] += 1 / float64(v.M)
		if g == 0 {
			d.Arm = best
			for j, y := range sum {
				d.Scores[j] = y / float64(v.S)
			}
		}
	}
	return v.M, false
}

// binomial returns C(n, k), or limit+1 once it exceeds limit.
func binomial(n, k, limit int) int {
	c := 1
	for i := range k {
		c = c * (n - i) / (i + 1) // exact: c is C(n, i+1) after the step
		if c > limit {
			return limit + 1
		}
	}
	return c
}

// exactVote writes into p the fraction of the S-subsets of v's rows whose
// mean prefers each allowed arm, ties shared equally; sum is scratch of
// length v.Arms.
func exactVote(p []float64, v Votes, excluded []bool, sum []float64) {
	n := len(v.Pool) / v.Arms
	idx := make([]int, v.S)
	for i := range idx {
		idx[i] = i
	}
	count := 0
	for {
		clear(sum)
		for _, i := range idx {
			for j, y := range v.Pool[i*v.Arms : (i+1)*v.Arms] {
				sum[j] += y
			}
		}
		best, ties := math.Inf(-1), 0
		for j, y := range sum {
			switch {
			case excluded != nil && excluded[j]:
			case y > best:
				best, ties = y, 1
			case y == best:
				ties++
			}
		}
		for j, y := range sum {
			if (excluded == nil || !excluded[j]) && y == best {
				p[j] += 1 / float64(ties)
			}
		}
		count++
		if !nextSubset(idx, n) {
			break
		}
	}
	for j := range p {
		p[j] /= float64(count)
	}
}

// nextSubset advances idx, a sorted subset of 0..n-1, to the next in
// lexicographic order; false after the last.
func nextSubset(idx []int, n int) bool {
	s := len(idx)
	i := s - 1
	for i >= 0 && idx[i] == n-s+i {
		i--
	}
	if i < 0 {
		return false
	}
	idx[i]++
	for j := i + 1; j < s; j++ {
		idx[j] = idx[j-1] + 1
	}
	return true
}

// GroupMeans returns the average prediction of every group of v's rows
// as ThompsonVote forms the groups (v.Arms values a group, row-major),
// for rankings (bandit.Agent.Rank): with Resample and at most
// MaxExactSubsets S-subsets of the pool, every subset, in lexicographic
// order (exact true; the decision's own, rows 0..S-1, is the first);
// otherwise M groups, group g rows g*S..g*S+S-1, or with Resample group
// 0 rows 0..S-1 and each other S distinct rows drawn uniformly from rng.
func GroupMeans(v Votes, rng *rand.Rand) (means []float64, exact bool) {
	n := len(v.Pool) / v.Arms
	if v.S < 1 || v.M < 1 || n < v.S || (!v.Resample && n < v.S*v.M) {
		panic(fmt.Sprintf("policy: GroupMeans of %d samples for S=%d, M=%d", n, v.S, v.M))
	}
	add := func(dst []float64, rows []int) {
		for _, i := range rows {
			for j, y := range v.Pool[i*v.Arms : (i+1)*v.Arms] {
				dst[j] += y / float64(v.S)
			}
		}
	}
	idx := make([]int, max(n, v.S))
	for i := range idx {
		idx[i] = i
	}
	if c := binomial(n, v.S, MaxExactSubsets); v.Resample && c <= MaxExactSubsets {
		means = make([]float64, c*v.Arms)
		sub := idx[:v.S]
		for g := 0; ; g++ {
			add(means[g*v.Arms:(g+1)*v.Arms], sub)
			if !nextSubset(sub, n) {
				return means, true
			}
		}
	}
	means = make([]float64, v.M*v.Arms)
	for g := range v.M {
		var rows []int
		if !v.Resample {
			rows = idx[g*v.S : (g+1)*v.S]
		} else {
			rows = idx[:v.S]
			for k := range v.S { // a partial Fisher-Yates shuffle: S distinct rows
				if g > 0 {
					j := k + rng.IntN(n-k)
					idx[k], idx[j] = idx[j], idx[k]
				}
			}
		}
		add(means[g*v.Arms:(g+1)*v.Arms], rows)
	}
	return means, false
}

// Gaussian holds, for n draws, the conditional means and variances of
// every arm's predicted reward given the draws' hidden layers (n×Arms,
// row-major; nn.Predictor.SampleLocalMoments), for ThompsonGauss.
type Gaussian struct {
	Mean, Var []float64
	Arms      int
	// S draws are averaged per decision; M groups of S (draws g*S..g*S+S-1
	// for group g, the decision's own first) stand behind the propensities.
	S, M int
}

// ThompsonGauss is ThompsonVote on fresh independent draws with the
// output layer's noise integrated out (Rao-Blackwellised; issue 18,
// finding 2). Given the hidden layers of its S draws, a group's average
// prediction is Gaussian and independent across arms (nn.Predictor's
// local reparameterization, Kingma et al. 2015, Section 2.3),
//
//	f̄_j ~ N(m_j, v_j),  m_j = (1/S) Σ_i mean_ij,  v_j = (1/S²) Σ_i var_ij,
//
// so the decision draws group 0's f̄ from it (exactly as averaging S
// draws of nn.Predictor.SampleLocal would) and plays its argmax over the
// allowed arms; the probability of arm k is the mean over the M groups
// of the conditional probability that k has the largest f̄ (WinProbs):
//
//	p̂_k = (1/M) Σ_g P(k = argmax_j f̄_j | group g's hidden layers).
//
// p̂ is unbiased for the probability that the rule picks k, as the vote
// count is, with a variance no larger (Rao-Blackwell). With two allowed
// arms the conditional probabilities are exact (closed form), so p̂ has
// no steps of 1/M and is 0 or 1 only where the Gaussians make it so in
// floating point; with more, each is estimated from OutputDraws draws of
// the output noise (steps of 1/(M OutputDraws)), and group 0's from
// those and the decision's own draw, OutputDraws+1 in all, so that the
// chosen arm never gets less than 1/(M (OutputDraws+1)): what the draw
// that chose it implies. ThompsonGauss returns
// M. d.Scores receives group 0's drawn f̄.
func ThompsonGauss(d *Decision, g Gaussian, excluded []bool, rng *rand.Rand) int {
	n := len(g.Mean) / g.Arms
	if g.S < 1 || g.M < 1 || n < g.S*g.M || len(g.Var) != len(g.Mean) {
		panic(fmt.Sprintf("policy: ThompsonGauss with %d draws (%d variances) for S=%d, M=%d", n, len(g.Var)/g.Arms, g.S, g.M))
	}
	d.Scores = sized(d.Scores, g.Arms)
	d.Probabilities = sized(d.Probabilities, g.Arms)
	m, v, w := make([]float64, g.Arms), make([]float64, g.Arms), make([]float64, g.Arms)
	for grp := range g.M {
		clear(m)
		clear(v)
		for i := grp * g.S; i < (grp+1)*g.S; i++ {
			for j := range g.Arms {
				m[j] += g.Mean[i*g.Arms+j] / float64(g.S)
				v[j] += g.Var[i*g.Arms+j] / float64(g.S*g.S)
			}
		}
		if grp == 0 {
			for j := range g.Arms {
				d.Scores[j] = m[j] + math.Sqrt(v[j])*rng.NormFloat64()
			}
			d.Arm = Argmax(d.Scores, excluded, rng)
		}
		WinProbs(w, m, v, excluded, OutputDraws, rng)
		if grp == 0 && winProbsDrawn(v, excluded) {
			// The decision's own draw of the output noise is one more
			// draw of group 0's: counted, the chosen arm has at least
			// 1/(OutputDraws+1) of the group (issue 30, finding 1).
			for j := range w {
				w[j] *= OutputDraws / float64(OutputDraws+1)
			}
			w[d.Arm] += 1 / float64(OutputDraws+1)
		}
		for j, p := range w {
			d.Probabilities[j] += p / float64(g.M)
		}
	}
	return g.M
}

// OutputDraws is the number of draws of the output layer's noise per
// group with which ThompsonGauss estimates the probabilities of more than
// two allowed arms (WinProbs).
const OutputDraws = 64

// WinProbs writes into dst, for independent X_j ~ N(m_j, v_j) over the
// allowed arms, P(k = argmax_j X_j) for each arm k (0 for excluded arms).
// Two allowed arms have the closed form
//
//	P(a) = Φ((m_a - m_b) / sqrt(v_a + v_b))
//
// (a zero sum of variances is a step, 1/2 at a tie, as Argmax breaks
// it), and so do point masses (every variance zero: the largest mean, 1/t
// for each of t tied). Otherwise dst is the argmax frequency of draws
// draws of X (ties broken by Argmax), an unbiased estimate in steps of
// 1/draws: the exact one-dimensional integral took milliseconds to
// reach a useful accuracy by adaptive quadrature, more than the draws
// behind the decision.
func WinProbs(dst, m, v []float64, excluded []bool, draws int, rng *rand.Rand) {
	clear(dst)
	allowed := countAllowed(excluded, len(m))
	a, b := nthAllowed(excluded, len(m), 0), nthAllowed(excluded, len(m), 1)
	zero := true
	for j := range m {
		if (excluded == nil || !excluded[j]) && v[j] > 0 {
			zero = false
		}
	}
	switch {
	case allowed == 0:
		return
	case allowed == 1:
		dst[a] = 1
		return
	case allowed == 2:
		dst[a] = cdfRatio(m[a]-m[b], v[a]+v[b])
		dst[b] = 1 - dst[a]
		return
	case zero:
		best, ties := math.Inf(-1), 0
		for j := range m {
			switch {
			case excluded != nil && excluded[j]:
			case m[j] > best:
				best, ties = m[j], 1
			case m[j] == best:
				ties++
			}
		}
		for j := range m {
			if (excluded == nil || !excluded[j]) && m[j] == best {
				dst[j] = 1 / float64(ties)
			}
		}
		return
	}
	x := make([]float64, len(m))
	for range draws {
		for j := range m {
			x[j] = m[j] + math.Sqrt(max(v[j], 0))*rng.NormFloat64()
		}
		dst[Argmax(x, excluded, rng)] += 1 / float64(draws)
	}
}

// winProbsDrawn reports whether WinProbs estimates from draws (more
// than two allowed arms, some variance positive) rather than computing
// in closed form.
func winProbsDrawn(v []float64, excluded []bool) bool {
	if countAllowed(excluded, len(v)) <= 2 {
		return false
	}
	for j := range v {
		if (excluded == nil || !excluded[j]) && v[j] > 0 {
			return true
		}
	}
	return false
}

// cdfRatio is Φ(d / sqrt(v)), with v = 0 a step (1/2 at d = 0).
func cdfRatio(d, v float64) float64 {
	if v <= 0 {
		switch {
		case d > 0:
			return 1
		case d < 0:
			return 0
		}
		return 0.5
	}
	return 0.5 * math.Erfc(-d/math.Sqrt(2*v))
}

// FloorPropensities mixes estimated probabilities p with the uniform
// distribution over the m allowed arms at weight m*floor,
//
//	p_k <- (1 - m floor) p_k + floor   (allowed arms),
//
// so that every allowed arm has probability at least floor and at most
// 1 - (m-1) floor, the sum stays 1, and no estimate moves by more than
// m*floor. Importance weights computed from the result are then at most
// 1/floor: a Monte Carlo or numerical estimate of 0 for an arm that the
// policy can in fact choose (every Thompson-sampling arm has positive
// probability) would otherwise give an infinite weight. Excluded arms
// keep 0. floor must be below 1/m.
func FloorPropensities(p []float64, excluded []bool, floor float64) {
	m := countAllowed(excluded, len(p))
	if floor <= 0 || floor*float64(m) >= 1 {
		panic(fmt.Sprintf("policy: FloorPropensities with floor %g for %d arms", floor, m))
	}
	for k := range p {
		if excluded == nil || !excluded[k] {
			p[k] = (1-float64(m)*floor)*p[k] + floor
		}
	}
}

// Argmax returns the allowed arm with the highest score, breaking ties
// uniformly at random with rng (which it calls only on ties). excluded
// may be nil; -1 means every arm is excluded.
func Argmax(scores []float64, excluded []bool, rng *rand.Rand) int {
	best, ties := -1, 0
	for a, s := range scores {
		if excluded != nil && excluded[a] {
			continue
		}
		switch {
		case best < 0 || s > scores[best]:
			best, ties = a, 1
		case s == scores[best]:
			ties++
			if rng.IntN(ties) == 0 {
				best = a
			}
		}
	}
	return best
}

func checkContext(x []float64, dim int) error {
	if len(x) != dim {
		return fmt.Errorf("policy: context has %d features, want %d", len(x), dim)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("policy: feature %d is %g", i, v)
		}
	}
	return nil
}

// ErrAllExcluded is returned when a decision excludes every arm.
var ErrAllExcluded = errors.New("policy: every arm is excluded")

func checkExcluded(excluded []bool, arms int) error {
	if excluded == nil {
		return nil
	}
	if len(excluded) != arms {
		return fmt.Errorf("policy: %d exclusion flags for %d arms", len(excluded), arms)
	}
	for _, e := range excluded {
		if !e {
			return nil
		}
	}
	return ErrAllExcluded
}
