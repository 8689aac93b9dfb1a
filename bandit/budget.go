package bandit

import (
	"fmt"
)

// The per-decision budgets of the mean-field Thompson samplers (mf-ts,
// refined-ts) and of the last-layer samplers (laplace-ts "last-layer",
// flow-ts: MaxLastLayerCost) for new and grown bandits, chosen from a
// measurement
// (issue 31, finding 4: within MaxDecisionCost and MaxDecisionFloats, 100
// arms, a hidden layer of 240 and 10,000 propensity draws took 6.1 s and
// allocated 25.5 MB per decision, and 64 clients drove the process to
// 1.94 GB). BenchmarkHeaviestDecision measures them; bench/decision-cost.md
// holds the figures. A decision draws every parameter of the network
// once per posterior draw, so its time is about draws x parameters
// Gaussian draws and multiply-adds (about 14 ns each measured on a loaded
// 2-core machine), and its memory draws x units activations.
//
// Bandits stored before these budgets that exceed them still load and
// decide (Load does not check them): refusing them would stop a serve
// that has them from loading anything.
const (
	// MaxSampledCost bounds draws x parameters of one decision: about
	// 70 ms on one loaded core at the limit.
	MaxSampledCost = 5_000_000
	// MaxSampledFloats bounds draws x (hidden units + arms): 2 MiB of
	// activations per decision at the limit, 128 MiB for the 64
	// requests in flight of --max-in-flight's default.
	MaxSampledFloats = 1 << 18
	// MaxLastLayerCost bounds draws x arms x (last-layer inputs + 1)^2,
	// the multiply-adds of one decision of laplace-ts "last-layer" and
	// flow-ts, which draw each arm's output weights from a full-covariance
	// Gaussian per draw: at the older MaxDecisionCost (2.5e8) a decision
	// took 260-287 ms on a core shared about two ways
	// (BenchmarkHeaviestLastLayerDecision, bench/decision-cost.md), 64 of
	// them in flight about 8 s of the 10 s request timeout on two cores;
	// at this limit about 105 ms, and policy.samples 3 x 32 propensity
	// draws of a 100-arm bandit with a last hidden layer of 100 (9.8e7)
	// are still allowed.
	MaxLastLayerCost = 100_000_000
)

// DecisionBudget checks the per-decision budgets MaxSampledCost,
// MaxSampledFloats and MaxLastLayerCost of a valid configuration with its
// defaults filled in:
// a *ValidationError naming policy.propensity_samples when its
// decisions would be too heavy, nil otherwise (and for the policies the
// budgets do not cover). The shadow (Config.Shadow), asked at every
// decision too, is checked the same way, named under "shadow.".
func DecisionBudget(c *Config) error {
	var v validator
	ownBudget(c, &v)
	shadowBudget(nil, c, &v)
	return v.err()
}

// shadowBudget checks the budgets of c's candidate, when it has one and
// its decisions are heavier than old's candidate's (old nil: check it),
// adding the problems to v under "shadow.".
func shadowBudget(old, c *Config, v *validator) {
	cand := Candidate(c)
	if cand == nil {
		return
	}
	if prev := Candidate(old); prev != nil && !decisionCost(cand).heavier(decisionCost(prev)) {
		return
	}
	var sv validator
	ownBudget(cand, &sv)
	for _, e := range sv.errs {
		v.add("shadow."+e.Field, e.Detail)
	}
}

// ownBudget adds the problems of c's own policy with the budgets to v.
func ownBudget(c *Config, v *validator) {
	w := decisionCost(c)
	draws := c.Policy.Samples * c.Policy.PropensitySamples
	if w.sampled > MaxSampledCost {
		v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %.0f parameters = %.3g sampled weights per decision, want at most %.3g (fewer samples or propensity_samples, or a smaller network)", draws, w.sampled/float64(draws), w.sampled, float64(MaxSampledCost)))
	}
	if w.floats > MaxSampledFloats {
		v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %.0f units = %.0f activations per decision, want at most %d", draws, w.floats/float64(draws), w.floats, MaxSampledFloats))
	}
	if w.lastLayer > MaxLastLayerCost {
		v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %d arms x (last-layer inputs + 1)^2 = %.3g per decision, want at most %.3g (fewer samples or propensity_samples, fewer arms or a narrower last hidden layer)", draws, len(c.Arms), w.lastLayer, float64(MaxLastLayerCost)))
	}
}

// decisionWeight is what the per-decision budgets count of one decision:
// draws x parameters and draws x units of the mean-field Thompson
// samplers, draws x arms x (last-layer inputs + 1)^2 of the last-layer
// samplers (laplace-ts "last-layer", flow-ts); zero where a policy has
// no such cost.
type decisionWeight struct{ sampled, floats, lastLayer float64 }

// heavier reports whether w counts more than o in any budget.
func (w decisionWeight) heavier(o decisionWeight) bool {
	return w.sampled > o.sampled || w.floats > o.floats || w.lastLayer > o.lastLayer
}

// decisionCost returns what the per-decision budgets count of one
// decision of c.
func decisionCost(c *Config) decisionWeight {
	p := c.Policy
	caps := CapabilitiesOf(p)
	if !caps.MeanField && !caps.LastLayer {
		return decisionWeight{}
	}
	draws := float64(p.Samples) * float64(p.PropensitySamples)
	in, out := netShape(c)
	arch := modelArch(c.Model, in, out)
	arms := float64(len(c.Arms))
	pairs := len(c.ArmFeatures) > 0
	if caps.LastLayer {
		last := float64(arch.Layer(arch.NumLayers()-1).In + 1)
		if pairs {
			// One output's weights drawn per draw, scored on every
			// arm's pair.
			return decisionWeight{lastLayer: draws * (last*last + arms*last)}
		}
		return decisionWeight{lastLayer: draws * arms * last * last}
	}
	units := out
	for _, h := range c.Model.Hidden {
		units += h
	}
	w := decisionWeight{sampled: draws * float64(arch.NumParams()), floats: draws * float64(units)}
	if pairs {
		// Each draw is one weight vector (the sampled weights counted)
		// and a forward pass over every arm's pair, which the budget
		// MaxDecisionCost bounds (Validate: draws x parameters x arms
		// multiply-adds; 1.0e8 of them took 11-16 ms on the fast engine,
		// BenchmarkArmFeatureDecision, bench/decision-cost.md); the draws' scores are kept.
		w.floats += draws * arms
	}
	return w
}

// checkGrownBudget checks the budgets of a patched configuration whose
// decisions are heavier than before (a bandit stored before the budgets
// may keep its weight, not grow it).
func checkGrownBudget(old, cfg *Config) error {
	var v validator
	if decisionCost(cfg).heavier(decisionCost(old)) {
		ownBudget(cfg, &v)
	}
	shadowBudget(old, cfg, &v)
	return v.err()
}
