package bandit

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/policy"
)

// Arms with features (issue 32; Vowpal Wabbit's action-dependent
// features, Personalizer's actions with features). A bandit that declares
// arm_features scores each (context, arm) pair with one network output
// instead of keeping one output per arm: the network's input is the
// pair's
//
//	z(x, a) = [enc(x); enc_arm(a)],
//
// the context's encoding followed by the arm's (the same Encoder, on the
// arms' schema), and its single output is the pair's predicted reward. A
// training row is (z(x, a), reward) with output 0, so the likelihood's
// data term is over pairs and the rest of the model (prior, mean-field
// posterior, refinement, Laplace) is unchanged. A decision scores every
// arm with the same posterior sample: one weight draw, one forward pass
// over the arms' rows (armInputs.rows), so that the scores of the arms in
// one draw are a joint Thompson sample. Adding an arm adds a row, not an
// output: its first scores are the network's on its features, learned
// from the arms like it.
//
// A linear model on [x; a] cannot make the best arm depend on the
// context: x's part of the score is the same for every arm. linear-ts,
// which has no network, therefore takes the pair with its interactions,
// Vowpal Wabbit's -q between the context's and the arm's namespaces:
//
//	z(x, a) = [enc(x); enc_arm(a); vec(enc(x) enc_arm(a)^T)],
//
// the products x_i a_j in row-major order (x_1 a_1, x_1 a_2, ...), and
// one policy.Linear posterior on it (policy.Linear.DrawRows draws one
// coefficient vector per draw and scores every arm with it). The neural
// kinds' hidden layers make the interactions; the linear heads of
// neural-linear, laplace-ts "last-layer" and flow-ts act on the hidden
// features of the pair, which carry them.

// armInputs is the input side of a bandit with arm features: the
// encoded features of each arm, in the order of Config.Arms.
type armInputs struct {
	ctxDim int
	armDim int
	// interact: the pair carries the products of the context's and the
	// arm's inputs (linear-ts).
	interact bool
	arms     [][]float64
}

// newArmInputs returns the arm inputs of a validated configuration,
// nil when it declares no arm features.
func newArmInputs(c *Config) *armInputs {
	if len(c.ArmFeatures) == 0 {
		return nil
	}
	enc := NewEncoder(c.ArmFeatures)
	p := &armInputs{ctxDim: encodedDim(c), armDim: enc.Dim(), interact: interacts(c), arms: make([][]float64, len(c.Arms))}
	for k, name := range c.Arms {
		x, err := enc.Encode(c.ArmValues[name])
		if err != nil {
			panic(fmt.Sprintf("bandit: arm %q of a validated configuration: %v", name, err))
		}
		p.arms[k] = x
	}
	return p
}

// dim is the length of a pair's input, z(x, a).
func (p *armInputs) dim() int { return pairDim(p.ctxDim, p.armDim, p.interact) }

// pairDim is the length of z(x, a) for contexts of cx inputs and arms
// of ca, with the interactions or without.
func pairDim(cx, ca int, interact bool) int {
	if interact {
		return cx + ca + cx*ca
	}
	return cx + ca
}

// interacts reports whether the pairs of c's kind carry the
// interactions: a model without a network.
func interacts(c *Config) bool { return !CapabilitiesOf(c.Policy).Network }

// row writes z(x, arm) into dst (allocated when nil) and returns it.
func (p *armInputs) row(dst, x []float64, arm int) []float64 {
	if dst == nil {
		dst = make([]float64, p.dim())
	}
	copy(dst, x)
	av := p.arms[arm]
	copy(dst[p.ctxDim:], av)
	if p.interact {
		q := dst[p.ctxDim+p.armDim:]
		for i, xi := range x {
			for j, aj := range av {
				q[i*p.armDim+j] = xi * aj
			}
		}
	}
	return dst
}

// rows returns the pairs of x with every arm, arms x dim row-major: the
// batch a decision's forward pass scores.
func (p *armInputs) rows(x []float64) []float64 {
	d := p.dim()
	out := make([]float64, len(p.arms)*d)
	for k := range p.arms {
		p.row(out[k*d:(k+1)*d], x, k)
	}
	return out
}

// netShape returns the model's inputs and outputs under configuration
// c: the encoded context and one output per arm, or with arm features
// the encoded pair (with its interactions for linear-ts) and one output.
func netShape(c *Config) (in, out int) {
	if len(c.ArmFeatures) == 0 {
		return encodedDim(c), len(c.Arms)
	}
	return pairDim(encodedDim(c), schemaDim(c.ArmFeatures), interacts(c)), 1
}

// schemaDim is the length of an encoding of the schema fs.
func schemaDim(fs []Feature) int {
	dim := 0
	for _, f := range fs {
		if f.Type == Categorical {
			dim += len(f.Values)
		} else {
			dim++
		}
	}
	return dim
}

// scoreInput returns the input whose prediction is one score per arm:
// x itself (one output per arm), or the pairs of x with every arm.
func (a *Agent) scoreInput(x []float64) []float64 {
	if a.pairs == nil {
		return x
	}
	return a.pairs.rows(x)
}

// weightPool returns n joint draws of every arm's score at x, rows of
// arms, each from one weight sample w ~ N(mu, diag(sig2)) scored on
// every arm's pair (the Thompson samplers on a Gaussian over every
// weight with arm features: local reparameterization draws activations
// per input row, which would make the arms' scores independent).
func (a *Agent) weightPool(m *model, mu, sig2, x []float64, n int, rng *mrand.Rand) []float64 {
	arms := len(a.cfg.Arms)
	X := a.scoreInput(x)
	p := a.predictor()
	defer a.predictors.Put(p)
	sd := make([]float64, len(sig2))
	for i, v := range sig2 {
		sd[i] = math.Sqrt(max(v, 0))
	}
	pool := make([]float64, n*arms)
	for i := range n {
		p.Sample(pool[i*arms:(i+1)*arms], mu, sd, X, m.std, rng)
	}
	return pool
}

// armThompson is meanFieldThompson with arm features: Thompson sampling
// (policy.ThompsonVote) on M groups of S joint weight draws
// (weightPool), group 0 deciding and all M estimating the propensities.
func (a *Agent) armThompson(pd *policy.Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) *Propensity {
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	pool := a.weightPool(m, m.mu, m.sig2, x, M*S, rng)
	groups, exact := policy.ThompsonVote(pd, policy.Votes{Pool: pool, Arms: len(a.cfg.Arms), S: S, M: M}, excluded, rng)
	pd.Sample = SampleMeanField
	return &Propensity{Estimator: "mean-field", Samples: M * S, Groups: groups, Exact: exact}
}

// armRanking is meanFieldRanking with arm features: group 0 of
// weightPool's M groups of S draws ranks, the M groups count the slots'
// probabilities (voteRanking).
func (a *Agent) armRanking(m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) *ranking {
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	groups, _ := policy.GroupMeans(policy.Votes{Pool: a.weightPool(m, m.mu, m.sig2, x, M*S, rng), Arms: arms, S: S, M: M}, nil)
	r := voteRanking(groups[:arms], groups, arms, excluded, k, Propensity{Estimator: "mean-field", Samples: M * S})
	r.sample = SampleMeanField
	return r
}

// retiredMask returns the flags of the retired arms (Config.Retired),
// in a new slice.
func retiredMask(c *Config) []bool {
	ex := make([]bool, len(c.Arms))
	for _, n := range c.Retired {
		if k := slices.Index(c.Arms, n); k >= 0 {
			ex[k] = true
		}
	}
	return ex
}

// validateArms checks the arm features (ArmFeatures, ArmValues) and the
// retired arms of c, whose arms and policy are checked elsewhere.
func validateArms(c *Config, v *validator) {
	if len(c.ArmFeatures) == 0 {
		if len(c.ArmValues) > 0 {
			v.add("arm_values", "arm values need arm_features, the arms' schema")
		}
	} else {
		validateArmFeatures(c, v)
	}
	seen := make(map[string]bool, len(c.Retired))
	for i, n := range c.Retired {
		at := fmt.Sprintf("retired[%d]", i)
		switch {
		case !slices.Contains(c.Arms, n):
			v.add(at, fmt.Sprintf("unknown arm %q", n))
		case seen[n]:
			v.add(at, fmt.Sprintf("arm %q is retired already", n))
		}
		seen[n] = true
	}
	if len(c.Arms) > 0 && len(seen) >= len(c.Arms) && !slices.ContainsFunc(c.Arms, func(n string) bool { return !seen[n] }) {
		v.add("retired", "every arm is retired: at least one must stay live")
	}
}

// validateArmFeatures checks the arms' schema and every arm's features
// against it. Every policy kind takes arm features.
func validateArmFeatures(c *Config, v *validator) {
	if !validateSchema("arm_features", c.ArmFeatures, v) {
		return
	}
	enc := NewEncoder(c.ArmFeatures)
	for _, name := range c.Arms {
		at := "arm_values." + name
		raw, ok := c.ArmValues[name]
		if !ok {
			v.add(at, "missing: every arm of a bandit with arm_features needs its features")
			continue
		}
		if _, err := encodeField(enc, raw, at, v); err != nil {
			v.add(at, err.Error())
		}
	}
	names := make([]string, 0, len(c.ArmValues))
	for n := range c.ArmValues {
		if !slices.Contains(c.Arms, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		v.add("arm_values."+n, "not an arm of the bandit")
	}
}

// patchArms applies a patch's arm_values (the features of the arms it
// adds) and retire_arms to c, a copy of cur with p's arms added, and
// reports their problems to v.
func patchArms(v *validator, c *Config, cur *Config, p *Patch) {
	if p.ArmValues != nil {
		names := make([]string, 0, len(p.ArmValues))
		for n := range p.ArmValues {
			names = append(names, n)
		}
		slices.Sort(names)
		vals := make(map[string]json.RawMessage, len(c.ArmValues)+len(p.ArmValues))
		maps.Copy(vals, c.ArmValues)
		for _, n := range names {
			switch {
			case len(cur.ArmFeatures) == 0:
				v.add("arm_values."+n, "the bandit has no arm_features")
			case !slices.Contains(p.AddArms, n):
				v.add("arm_values."+n, "not an arm of add_arms: an arm's features are fixed once it is added (its rewards were learned on them)")
			default:
				vals[n] = p.ArmValues[n]
			}
		}
		c.ArmValues = vals
	}
	if p.RetireArms != nil {
		if len(p.RetireArms) == 0 {
			v.add("retire_arms", "want at least one arm to retire")
		}
		retired := slices.Clone(cur.Retired)
		for i, n := range p.RetireArms {
			at := fmt.Sprintf("retire_arms[%d]", i)
			switch {
			case !slices.Contains(cur.Arms, n):
				v.add(at, fmt.Sprintf("unknown arm %q", n))
			case slices.Contains(retired, n):
				v.add(at, fmt.Sprintf("arm %q is retired already", n))
			default:
				retired = append(retired, n)
			}
		}
		c.Retired = retired
	}
}

// linearArmPool returns n joint draws of every arm's score under the
// linear posterior lin (its one model, policy.Linear.DrawRows) on phi,
// the features of every arm's pair (rows of arms), from rng (nil: lin's
// own, as decisions draw).
func (a *Agent) linearArmPool(lin *policy.Linear, phi []float64, n int, rng *mrand.Rand) ([]float64, error) {
	a.linMu.Lock()
	defer a.linMu.Unlock()
	return lin.DrawRows(nil, phi, len(a.cfg.Arms), 0, n, rng)
}

// linearArmThompson is linear Thompson sampling with arm features
// (linear-ts on the pairs with their interactions, neural-linear on the
// pairs' hidden features): policy.ThompsonVote on policy.propensity_samples
// joint draws of one coefficient vector each, the first deciding. The
// arms' scores share the draw, so the probabilities are estimated from
// the draws, not computed as for independent per-arm posteriors.
func (a *Agent) linearArmThompson(pd *policy.Decision, lin *policy.Linear, phi []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	M := a.cfg.Policy.PropensitySamples
	pool, err := a.linearArmPool(lin, phi, M, nil)
	if err != nil {
		return nil, err
	}
	groups, exact := policy.ThompsonVote(pd, policy.Votes{Pool: pool, Arms: len(a.cfg.Arms), S: 1, M: M}, excluded, rng)
	pd.Sample = SampleExact
	return &Propensity{Estimator: "linear-posterior", Samples: M, Groups: groups, Exact: exact}, nil
}

// linearArmRanking ranks by the first of linearArmThompson's draws, the
// slots' probabilities counted over all of them (voteRanking).
func (a *Agent) linearArmRanking(lin *policy.Linear, phi []float64, excluded []bool, k int) (*ranking, error) {
	arms, M := len(a.cfg.Arms), a.cfg.Policy.PropensitySamples
	pool, err := a.linearArmPool(lin, phi, M, nil)
	if err != nil {
		return nil, err
	}
	r := voteRanking(pool[:arms], pool, arms, excluded, k, Propensity{Estimator: "linear-posterior", Samples: M})
	r.sample = SampleExact
	return r, nil
}

// linearArmBest is linearBest with arm features: LockInDraws joint
// draws of every arm's score per context (linearArmPool, from rng).
func (a *Agent) linearArmBest(m *model, lin *policy.Linear, xs [][]float64, ex [][]bool, rng *mrand.Rand) []float64 {
	arms := len(a.cfg.Arms)
	pb := make([]float64, arms)
	for i, x := range xs {
		phi := a.scoreInput(x)
		if a.caps.Network {
			p := a.predictor()
			phi = p.Features(nil, m.q.Mu, phi)
			a.predictors.Put(p)
		}
		pool, err := a.linearArmPool(lin, phi, LockInDraws, rng)
		if err != nil {
			return nil
		}
		for s := range LockInDraws {
			pb[argmaxAllowed(pool[s*arms:(s+1)*arms], ex[i])]++
		}
	}
	for k := range pb {
		pb[k] /= float64(LockInDraws * len(xs))
	}
	return pb
}
