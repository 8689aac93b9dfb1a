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
// m the number of allowed arms. d.Scores must hold the scores.
func EpsGreedyRule(d *Decision, eps float64, excluded []bool, rng *rand.Rand) {
	arms := len(d.Scores)
	allowed := countAllowed(excluded, arms)
	greedy := Argmax(d.Scores, excluded, rng)
	d.Probabilities = sized(d.Probabilities, arms)
	for a := range arms {
		if excluded == nil || !excluded[a] {
			d.Probabilities[a] = eps / float64(allowed)
		}
	}
	d.Probabilities[greedy] += 1 - eps
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
func ThompsonVote(d *Decision, v Votes, excluded []bool, rng *rand.Rand) {
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
