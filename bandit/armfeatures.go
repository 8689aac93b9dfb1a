package bandit

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	mrand "math/rand/v2"
	"slices"
	"strings"

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

// armInputs is the input side of a bandit with arm features: the
// encoded features of each arm, in the order of Config.Arms.
type armInputs struct {
	ctxDim int
	armDim int
	arms   [][]float64
}

// newArmInputs returns the arm inputs of a validated configuration,
// nil when it declares no arm features.
func newArmInputs(c *Config) *armInputs {
	if len(c.ArmFeatures) == 0 {
		return nil
	}
	enc := NewEncoder(c.ArmFeatures)
	p := &armInputs{ctxDim: encodedDim(c), armDim: enc.Dim(), arms: make([][]float64, len(c.Arms))}
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
func (p *armInputs) dim() int { return p.ctxDim + p.armDim }

// row writes z(x, arm) into dst (allocated when nil) and returns it.
func (p *armInputs) row(dst, x []float64, arm int) []float64 {
	if dst == nil {
		dst = make([]float64, p.dim())
	}
	copy(dst, x)
	copy(dst[p.ctxDim:], p.arms[arm])
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

// netShape returns the network's inputs and outputs under configuration
// c: the encoded context and one output per arm, or with arm features
// the encoded pair and one output.
func netShape(c *Config) (in, out int) {
	if len(c.ArmFeatures) == 0 {
		return encodedDim(c), len(c.Arms)
	}
	return encodedDim(c) + schemaDim(c.ArmFeatures), 1
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

// validateArmFeatures checks the arms' schema, that the policy kind
// scores pairs, and every arm's features against the schema.
func validateArmFeatures(c *Config, v *validator) {
	if !validateSchema("arm_features", c.ArmFeatures, v) {
		return
	}
	if d := deciderOf(c.Policy.Kind); d != nil && !CapabilitiesOf(c.Policy).ArmFeatures {
		v.add("policy.kind", fmt.Sprintf("%s does not take arm_features: want one of %s", c.Policy.Kind, armFeatureKinds()))
	}
	enc := NewEncoder(c.ArmFeatures)
	for _, name := range c.Arms {
		at := "arm_values." + name
		raw, ok := c.ArmValues[name]
		if !ok {
			v.add(at, "missing: every arm of a bandit with arm_features needs its features")
			continue
		}
		if _, err := enc.Encode(raw); err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) {
				v.add(at, err.Error())
				continue
			}
			for _, fe := range ve.Errors {
				v.add(at+strings.TrimPrefix(fe.Field, "context"), fe.Detail)
			}
			v.omitted += ve.Omitted
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

// armFeatureKinds lists the policy kinds that take arm features.
func armFeatureKinds() string {
	var b strings.Builder
	for _, k := range PolicyKinds() {
		if !KindCapabilities(k).ArmFeatures {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(k))
	}
	return b.String()
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
