package bandit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"time"
)

// reapLoop applies the configured default reward to decisions left
// without a reward for longer than reward.wait.
func (a *Agent) reapLoop() {
	wait := time.Duration(*a.cfg.Reward.Wait)
	every := min(max(wait/4, 50*time.Millisecond), 30*time.Second)
	t := time.NewTicker(every)
	defer t.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-a.done
		cancel()
	}()
	for {
		select {
		case <-a.done:
			return
		case <-t.C:
		}
		if err := a.reapSafely(ctx, time.Now().Add(-wait)); err != nil && ctx.Err() == nil {
			a.log.Warn("applying default rewards failed", "err", err)
		}
	}
}

// reapSafely is reap with a panic turned into an error: the reaper must
// never take the process down.
func (a *Agent) reapSafely(ctx context.Context, before time.Time) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("reaper panic: %v\n%s", v, debug.Stack())
		}
	}()
	return a.reap(ctx, before)
}

// reap stores the default reward for decisions made before the cutoff
// that have none.
func (a *Agent) reap(ctx context.Context, before time.Time) error {
	const page = 500
	for {
		ds, err := a.store.Unrewarded(ctx, a.name, before, page)
		if err != nil {
			return err
		}
		for _, d := range ds {
			err := a.store.InsertReward(ctx, &Reward{Bandit: a.name, EventID: d.EventID, Value: *a.cfg.Reward.Default})
			switch {
			case errors.Is(err, ErrConflict): // a real reward won the race
			case err != nil:
				return err
			default:
				a.obs.Rewarded(a.name, *a.cfg.Reward.Default)
				a.rewardPending()
			}
		}
		if len(ds) > 0 {
			a.notify()
		}
		if len(ds) < page {
			return nil
		}
	}
}

// Reward stores the reward of a decision and wakes the trainer. The
// same value again is accepted without a new row; ErrNotFound if the
// event is unknown, ErrConflict if it has another value.
func (a *Agent) Reward(ctx context.Context, eventID string, value float64) error {
	if !(math.Abs(value) <= MaxRewardAbs) {
		return invalid("value", fmt.Sprintf("%g, want a finite number in [-%g, %g]", value, MaxRewardAbs, MaxRewardAbs))
	}
	if a.cfg.Model.Likelihood == LikelihoodBernoulli && a.likelihoodChoice() && !(value >= 0 && value <= 1) {
		return invalid("value", fmt.Sprintf("%g, want a number in [0, 1]: the bandit's model.likelihood is bernoulli", value))
	}
	if a.step != nil {
		a.stepMu.Lock()
		defer a.stepMu.Unlock()
	}
	if err := a.store.InsertReward(ctx, &Reward{Bandit: a.name, EventID: eventID, Value: value}); err != nil {
		if errors.Is(err, ErrConflict) {
			return a.rewardConflict(ctx, eventID, err)
		}
		return err
	}
	a.obs.Rewarded(a.name, value)
	a.rewardPending()
	if a.step != nil {
		err := a.stepReward(ctx)
		if sh := a.shadow.Load(); sh != nil {
			sh.stepMu.Lock()
			err = errors.Join(err, sh.stepReward(ctx))
			sh.stepMu.Unlock()
		}
		return err
	}
	a.notify()
	return nil
}

// rewardConflict describes the reward that eventID already has: a
// *RewardConflictError saying whether it is the bandit's reward.default,
// or err when the stored reward cannot be read.
func (a *Agent) rewardConflict(ctx context.Context, eventID string, err error) error {
	rec, rerr := a.store.DecisionRecord(ctx, a.name, eventID)
	if rerr != nil || rec.Reward == nil {
		return err
	}
	ce := &RewardConflictError{EventID: eventID, Stored: rec.Reward.Value, ReceivedAt: rec.Reward.ReceivedAt}
	rc := a.cfg.Reward
	if rc.Default != nil && rc.Wait != nil && rec.Reward.Value == *rc.Default && !rec.Reward.ReceivedAt.Before(rec.CreatedAt.Add(time.Duration(*rc.Wait))) {
		ce.Default, ce.Wait = true, time.Duration(*rc.Wait)
	}
	return ce
}
