package policy

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Φ is the standard normal CDF.
func Φ(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// With fresh independent draws (mean-field), the arm frequencies of many
// ThompsonVote decisions and the mean of their propensity estimates must
// both match the closed form: with S = 2 draws per arm, arm 0 ~ N(0.3,
// 1) and arm 1 ~ N(0, 1), the group means differ by N(0.3, 1), so
// P(arm 0) = Φ(0.3). Tolerance: 4 standard errors of a frequency of n
// decisions, sqrt(p(1-p)/n).
func TestThompsonVoteFreshDrawsMatchClosedForm(t *testing.T) {
	const S, M, n = 2, 16, 20000
	rng := rand.New(rand.NewPCG(1, 2))
	want := Φ(0.3)
	pool := make([]float64, S*M*2)
	var chose0, meanP0 float64
	var d Decision
	for range n {
		for i := range S * M {
			pool[2*i] = 0.3 + rng.NormFloat64()
			pool[2*i+1] = rng.NormFloat64()
		}
		ThompsonVote(&d, Votes{Pool: pool, Arms: 2, S: S, M: M}, nil, rng)
		if d.Arm == 0 {
			chose0++
		}
		meanP0 += d.Probabilities[0] / n
		if s := d.Probabilities[0] + d.Probabilities[1]; math.Abs(s-1) > 1e-12 {
			t.Fatalf("probabilities sum to %g", s)
		}
	}
	tol := 4 * math.Sqrt(want*(1-want)/n)
	if f := chose0 / n; math.Abs(f-want) > tol {
		t.Errorf("arm 0 chosen in %.4f of decisions, want Φ(0.3) = %.4f ± %.4f", f, want, tol)
	}
	if math.Abs(meanP0-want) > tol {
		t.Errorf("mean propensity of arm 0 = %.4f, want Φ(0.3) = %.4f ± %.4f", meanP0, want, tol)
	}
}

// With a pool of samples at hand (refined samples, reused), a decision
// whose S samples are a uniform draw from the pool picks arm k with the
// probability that a uniform S-subset of the pool prefers k, computed
// exactly here by enumerating every subset; the arm frequencies and the
// mean propensity estimate must match it (4 standard errors).
func TestThompsonVoteResampledPoolMatchesExactProbability(t *testing.T) {
	const S, M, n, decisions = 3, 32, 9, 20000
	rng := rand.New(rand.NewPCG(3, 4))
	pool := make([]float64, n*3)
	for i := range pool {
		pool[i] = rng.NormFloat64()
	}
	excluded := []bool{false, false, true} // arm 2 must never be chosen
	// Exact: every 3-subset of the 9 rows, equally likely.
	var exact [3]float64
	subsets := 0
	for a := range n {
		for b := a + 1; b < n; b++ {
			for c := b + 1; c < n; c++ {
				s0 := pool[a*3] + pool[b*3] + pool[c*3]
				s1 := pool[a*3+1] + pool[b*3+1] + pool[c*3+1]
				if s0 > s1 {
					exact[0]++
				} else {
					exact[1]++
				}
				subsets++
			}
		}
	}
	for k := range exact {
		exact[k] /= float64(subsets)
	}
	var freq, meanP [3]float64
	rows := make([]float64, len(pool))
	perm := make([]int, n)
	var d Decision
	for range decisions {
		// The bank's choice: S distinct rows, uniformly, put first.
		for i := range perm {
			perm[i] = i
		}
		for i := range n {
			j := i + rng.IntN(n-i)
			perm[i], perm[j] = perm[j], perm[i]
		}
		for i, r := range perm {
			copy(rows[i*3:(i+1)*3], pool[r*3:(r+1)*3])
		}
		ThompsonVote(&d, Votes{Pool: rows, Arms: 3, S: S, M: M, Resample: true}, excluded, rng)
		freq[d.Arm]++
		for k, p := range d.Probabilities {
			meanP[k] += p / decisions
		}
	}
	for k := range 3 {
		tol := 4*math.Sqrt(exact[k]*(1-exact[k])/decisions) + 1e-12
		if f := freq[k] / decisions; math.Abs(f-exact[k]) > tol {
			t.Errorf("arm %d chosen in %.4f of decisions, want exactly %.4f ± %.4f", k, f, exact[k], tol)
		}
		if math.Abs(meanP[k]-exact[k]) > tol {
			t.Errorf("mean propensity of arm %d = %.4f, want %.4f ± %.4f", k, meanP[k], exact[k], tol)
		}
	}
}

// The exact probabilities of epsilon-greedy and uniform must be the
// frequencies of their choices (4 standard errors).
func TestExactRulesMatchFrequencies(t *testing.T) {
	const n = 20000
	rng := rand.New(rand.NewPCG(5, 6))
	excluded := []bool{false, true, false, false}
	rules := map[string]func(d *Decision){
		"eps-greedy 0.3": func(d *Decision) {
			d.Scores = []float64{0.1, 5, 0.7, 0.2}
			EpsGreedyRule(d, 0.3, excluded, rng)
		},
		"uniform": func(d *Decision) { UniformRule(d, 4, excluded, rng) },
	}
	for name, rule := range rules {
		var freq [4]float64
		var d Decision
		for range n {
			rule(&d)
			freq[d.Arm]++
		}
		for k, p := range d.Probabilities {
			tol := 4*math.Sqrt(p*(1-p)/n) + 1e-12
			if f := freq[k] / n; math.Abs(f-p) > tol {
				t.Errorf("%s: arm %d chosen in %.4f of decisions, probability %.4f ± %.4f", name, k, f, p, tol)
			}
		}
	}
}
