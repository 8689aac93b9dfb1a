package bandit

import (
	"context"
	"errors"
	"fmt"
)

// Off-policy evaluation (refinery evaluate) asks an agent what its
// policy would do on logged contexts without deciding: Probabilities,
// and TrainNow to fit a step-mode agent to every row stored so far.

// Probabilities returns, for the encoded context x, the probability that
// the agent's policy picks each arm, computed by the code and estimator
// Decide uses (choose: exact for uniform, greedy and eps-greedy;
// computed by numerical integration for linear-ts and neural-linear; the
// Monte Carlo or subset estimates of the other Thompson-sampling kinds;
// floored at MinPropensity but for the first three). Nothing is stored and no observer is told; the
// random sources advance as a decision's would (a refined-ts agent in
// step mode refines when its bank runs short, as Decide does). No arm is
// excluded but the retired ones (Config.Retired), which are never
// chosen.
func (a *Agent) Probabilities(ctx context.Context, x []float64) ([]float64, *Propensity, error) {
	if len(x) != a.enc.Dim() {
		return nil, nil, fmt.Errorf("bandit %s: context of %d inputs, want %d", a.name, len(x), a.enc.Dim())
	}
	rng := a.acquireRNG()
	defer a.releaseRNG(rng)
	d := &Decision{Bandit: a.name}
	prop, err := a.choose(ctx, d, a.model.Load(), x, retiredMask(&a.cfg), rng)
	if err != nil {
		return nil, nil, err
	}
	return d.Propensities, prop, nil
}

// ErrNotStepMode is TrainNow's error for a live agent.
var ErrNotStepMode = errors.New("bandit: not in step mode")

// TrainNow trains a step-mode agent on the rows stored since its last
// training and publishes the result, as the TrainEvery-th reward would.
func (a *Agent) TrainNow(ctx context.Context) error {
	if a.step == nil {
		return ErrNotStepMode
	}
	a.stepMu.Lock()
	defer a.stepMu.Unlock()
	a.pending = 0
	return a.trainSafely(ctx)
}
