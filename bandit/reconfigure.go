package bandit

// The settings a PATCH changes on the live agent, without building a new
// one (Service.Update): the bank's bounds (policy.max_sample_uses,
// max_sample_age, max_versions_behind), which the bank holds under its
// lock, and eps-greedy's policy.epsilon, which each decision reads from
// the agent's current configuration. Every other setting is read when
// the agent is built (the network, its trainer, the predictors' batch,
// the bank's size, the refiner) and changes by a new agent.

// liveSettings returns c with the settings that change in place set to
// cur's: c differs from cur only in such settings when it equals cur.
func liveSettings(cur, c *Config) Config {
	x := *c
	x.Policy.MaxSampleUses = cur.Policy.MaxSampleUses
	x.Policy.MaxSampleAge = cur.Policy.MaxSampleAge
	x.Policy.MaxVersionsBehind = cur.Policy.MaxVersionsBehind
	x.Policy.Epsilon = cur.Policy.Epsilon
	return x
}

// changesInPlace reports whether changing cur to c changes only settings
// that the live agent applies in place (reconfigure).
func changesInPlace(cur, c *Config) bool {
	return sameConfig(liveSettings(cur, c), *cur)
}

// changesInPlace reports whether changing the agent's configuration to
// c changes only settings that it applies in place.
func (a *Agent) changesInPlace(c *Config) bool {
	cur := a.Config() // with its candidate, as c has it
	return changesInPlace(&cur, c)
}

// reconfigure makes c, which differs from the agent's configuration only
// in settings that change in place (changesInPlace), the agent's
// configuration: decisions from now read it, and the bank keeps its
// samples under c's bounds (those past them are moved aside at once).
// Safe for concurrent use with decisions; the caller serializes changes
// (Service.lockLife).
func (a *Agent) reconfigure(c *Config) {
	cp := *c
	a.current.Store(&cp)
	if a.bank != nil {
		a.bank.setBounds(boundsOf(cp.Policy))
	}
}
