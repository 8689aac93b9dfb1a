package bandit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/posterior"
)

// Clock tells an agent the time: when a posterior was trained and how
// old a refined sample is.
type Clock interface {
	Now() time.Time
}

// systemClock is the wall clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// ManualClock is a Clock that moves only when told to: a simulation
// advances it by a fixed step per decision, so that a run's times (and
// what depends on them) are a function of its seed. It is safe for
// concurrent use.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock returns a clock that reads t until moved.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// StepConfig runs a service's agents in step mode, the mode of `refinery
// simulate`: the same agents, decision rules, trainer and bank of refined
// samples as a live service, with no goroutine of their own. Training
// happens inside Agent.Reward once TrainEvery rewards have arrived since
// the last training (all of them stored first); refinement happens inside
// Agent.Decide when a refined-ts decision finds fewer than policy.samples
// usable samples in the bank: it then fills the bank to
// refinement.bank_size, as a live service's workers keep it full, and the
// decision draws its samples from the bank as a live one does. Every
// random draw comes from sources seeded by ServiceConfig.Seed, so with
// decisions and rewards sent one at a time a run is a deterministic
// function of the seed and the order of the calls, through the Go API or
// the HTTP API alike. Decisions and rewards of one agent are serialized;
// the reaper of unrewarded decisions (reward.default) does not run.
//
// The paper's offline protocol (Havasi et al. 2021, Section 4.3: 500 ELBO
// iterations after every reward, fresh refined samples for every
// decision) is TrainEvery 1 with training.iterations and
// training.iterations_per_reward 500, training.stop_tolerance 0,
// policy.max_sample_uses 1 and refinement.bank_size = policy.samples.
type StepConfig struct {
	// Clock is the agents' clock; nil means a ManualClock that stays at
	// the Unix epoch.
	Clock Clock
	// TrainEvery retrains after this many rewards; zero means 1.
	TrainEvery int
}

func (c StepConfig) withDefaults() StepConfig {
	if c.Clock == nil {
		c.Clock = NewManualClock(time.Unix(0, 0).UTC())
	}
	if c.TrainEvery <= 0 {
		c.TrainEvery = 1
	}
	return c
}

// refineNow fills the bank from m when it has fewer than n usable
// samples (step mode; a.stepMu is held).
func (a *Agent) refineNow(ctx context.Context, m *model, n int) error {
	if a.refiner == nil || a.refLik.NumHyper() != m.lik.NumHyper() { // new, or another likelihood family
		ref, err := posterior.NewRefiner(m.lik, a.refineCfg)
		if err != nil {
			return fmt.Errorf("bandit %s: %w", a.name, err)
		}
		a.refiner, a.refLik = ref, m.lik
	} else if a.refLik != m.lik {
		a.refiner.SetLikelihood(m.lik)
		a.refLik = m.lik
	}
	if a.bank.usable() >= n {
		return nil
	}
	for a.bank.reserve() {
		w, st, err := a.refiner.Refine(ctx, nil, a.refineFrom(m), a.refRNG)
		if err != nil {
			a.bank.put(m.version, nil, m.std)
			return fmt.Errorf("bandit %s: refine: %w", a.name, err)
		}
		a.bank.put(m.version, a.arch.PrepareWeights(w), m.std)
		a.obs.Refined(a.name, st.Duration)
	}
	return nil
}

// stepReward trains once enough rewards have arrived (step mode; a.stepMu
// is held).
func (a *Agent) stepReward(ctx context.Context) error {
	a.pending++
	if a.pending < a.step.TrainEvery {
		return nil
	}
	a.pending = 0
	return a.trainSafely(ctx)
}
