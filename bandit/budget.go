package bandit

import (
	"fmt"
)

// The per-decision budgets of the mean-field Thompson samplers (mf-ts,
// refined-ts) for new and grown bandits, chosen from a measurement
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
)

// DecisionBudget checks the per-decision budgets MaxSampledCost and
// MaxSampledFloats of a valid configuration with its defaults filled in:
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
	if prev := Candidate(old); prev != nil {
		oc, of := decisionCost(prev)
		if nc, nf := decisionCost(cand); nc <= oc && nf <= of {
			return
		}
	}
	var sv validator
	ownBudget(cand, &sv)
	for _, e := range sv.errs {
		v.add("shadow."+e.Field, e.Detail)
	}
}

// ownBudget adds the problems of c's own policy with the budgets to v.
func ownBudget(c *Config, v *validator) {
	cost, floats := decisionCost(c)
	if cost == 0 {
		return
	}
	draws := c.Policy.Samples * c.Policy.PropensitySamples
	if cost > MaxSampledCost {
		v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %.0f parameters = %.3g sampled weights per decision, want at most %.3g (fewer samples or propensity_samples, or a smaller network)", draws, cost/float64(draws), cost, float64(MaxSampledCost)))
	}
	if floats > MaxSampledFloats {
		v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %.0f units = %.0f activations per decision, want at most %d", draws, floats/float64(draws), floats, MaxSampledFloats))
	}
}

// decisionCost returns draws x parameters and draws x units of one
// decision of the mean-field Thompson samplers, zero for other policies.
func decisionCost(c *Config) (cost, floats float64) {
	p := c.Policy
	if !CapabilitiesOf(p).MeanField {
		return 0, 0
	}
	draws := float64(p.Samples) * float64(p.PropensitySamples)
	units := len(c.Arms)
	for _, h := range c.Model.Hidden {
		units += h
	}
	params := modelArch(c.Model, encodedDim(c), len(c.Arms)).NumParams()
	return draws * float64(params), draws * float64(units)
}

// checkGrownBudget checks the budgets of a patched configuration whose
// decisions are heavier than before (a bandit stored before the budgets
// may keep its weight, not grow it).
func checkGrownBudget(old, cfg *Config) error {
	var v validator
	oc, of := decisionCost(old)
	if nc, nf := decisionCost(cfg); nc > oc || nf > of {
		ownBudget(cfg, &v)
	}
	shadowBudget(old, cfg, &v)
	return v.err()
}
