package bandit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// lockProblem is a two-arm problem on which the second arm is best on
// half the contexts: arm a pays 1 on seven decisions in ten whatever the
// side; arm b pays 1 on the right and 0 on the left (with badB, 0
// everywhere).
func lockProblem(i int, side, arm string, badB bool) float64 {
	switch {
	case arm == "a" && i%10 < 7:
		return 1
	case arm == "b" && side == "right" && !badB:
		return 1
	}
	return 0
}

// lockConfig is a small bandit of the given kind on lockProblem's one
// categorical feature, with its training fixed here rather than left to
// the defaults.
func lockConfig(kind bandit.PolicyKind) *bandit.Config {
	return &bandit.Config{
		Name:     "lock",
		Arms:     []string{"a", "b"},
		Features: []bandit.Feature{{Name: "side", Type: bandit.Categorical, Values: []string{"left", "right"}}},
		Policy:   bandit.PolicyConfig{Kind: kind},
		Model:    bandit.ModelConfig{Hidden: []int{8}},
		Training: bandit.TrainingConfig{Iterations: 50, IterationsPerReward: 50, CPUShare: 1, SnapshotEvery: 1000, MinInterval: new(bandit.Duration)},
	}
}

// lockRun drives a step-mode bandit (seed 5, a retraining every 5
// rewards) through phases of decisions on alternating sides, each
// rewarded at once by lockProblem; a phase may exclude an arm. After
// each phase it calls check with the agent.
type lockPhase struct {
	decisions int
	exclude   string
	check     func(a *bandit.Agent)
}

func lockRun(t *testing.T, cfg *bandit.Config, badB bool, phases ...lockPhase) {
	t.Helper()
	ctx := context.Background()
	a := stepAgent(t, 5, 5, cfg)
	i := 0
	for _, ph := range phases {
		for range ph.decisions {
			side := []string{"left", "right"}[i%2]
			req := bandit.DecideRequest{EventID: fmt.Sprint("e", i), Context: json.RawMessage(`{"side": "` + side + `"}`)}
			if ph.exclude != "" {
				req.Excluded = []string{ph.exclude}
			}
			o, err := a.Decide(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Reward(ctx, o.Decision.EventID, lockProblem(i, side, cfg.Arms[o.Decision.Arm], badB)); err != nil {
				t.Fatal(err)
			}
			i++
		}
		if ph.check != nil {
			ph.check(a)
		}
	}
}

// A greedy bandit driven into a lock-in on purpose: for 60 decisions arm
// b is excluded, so the MAP learns arm a's 0.7 and knows nothing of b;
// then greedy plays a on every one of 600 decisions (b's MAP reward,
// without data, stays below a's), though b pays 1 on the right. The
// diagonal Laplace posterior at the MAP still gives b's output the
// prior's spread, so b is best on many draws: the alarm fires, over the
// newest 500 decisions, with P_best(b) well above 0.05 (the margin
// asked, 0.1, leaves room for the estimate's Monte Carlo error, at most
// 0.02 from 16 draws on each of 500 contexts). Before 100 decisions it
// cannot fire.
func TestLockInAlarmFiresOnAGreedyLockIn(t *testing.T) {
	lockRun(t, lockConfig(bandit.Greedy), false,
		lockPhase{decisions: 60, exclude: "b"},
		lockPhase{decisions: 39, check: func(a *bandit.Agent) {
			l := a.Status().Health.LockIn
			if l.Decisions != 99 || l.Alarm || l.BestProbability != nil {
				t.Errorf("after 99 decisions: %+v, want 99 decisions, no probabilities and no alarm", l)
			}
		}},
		lockPhase{decisions: 561, check: func(a *bandit.Agent) {
			h := a.Status().Health
			l := h.LockIn
			t.Logf("lock-in: %+v", l)
			if l.Decisions != bandit.LockInWindow || l.TopArm != "a" || l.TopShare < bandit.LockInShare {
				t.Fatalf("the play did not lock in: %d decisions, top arm %q at %g", l.Decisions, l.TopArm, l.TopShare)
			}
			if pb := l.BestProbability["b"]; !(pb > 0.1) {
				t.Errorf("P_best(b) = %g, want above 0.1", pb)
			}
			if s := l.BestProbability["a"] + l.BestProbability["b"]; math.Abs(s-1) > 1e-9 {
				t.Errorf("P_best sums to %g, want 1", s)
			}
			if !l.Alarm {
				t.Errorf("no alarm on a locked-in greedy bandit: %+v", l)
			}
		}},
	)
}

// The alarm stays off where it must: an mf-ts bandit exploring the same
// problem (no arm takes 99% of its decisions), and a greedy bandit whose
// play is as concentrated as the locked-in one's but agrees with its
// posterior: b was played 200 times for nothing (a excluded), so its
// posterior is narrow and below a's, and P_best(b) is below 0.05.
func TestLockInAlarmStaysOff(t *testing.T) {
	t.Run("an mf-ts bandit exploring", func(t *testing.T) {
		lockRun(t, lockConfig(bandit.MeanFieldTS), false, lockPhase{decisions: 400, check: func(a *bandit.Agent) {
			l := a.Status().Health.LockIn
			t.Logf("lock-in: %+v", l)
			if l.Decisions != 400 || l.TopShare >= bandit.LockInShare || l.Alarm {
				t.Errorf("%+v, want 400 decisions, a top share below %g and no alarm", l, bandit.LockInShare)
			}
		}})
	})
	t.Run("a greedy bandit playing the arm its posterior prefers", func(t *testing.T) {
		lockRun(t, lockConfig(bandit.Greedy), true,
			lockPhase{decisions: 200, exclude: "a"},
			lockPhase{decisions: 600, check: func(a *bandit.Agent) {
				l := a.Status().Health.LockIn
				t.Logf("lock-in: %+v", l)
				if l.TopArm != "a" || l.TopShare < bandit.LockInShare {
					t.Fatalf("the play is not concentrated: top arm %q at %g", l.TopArm, l.TopShare)
				}
				if pb, ok := l.BestProbability["b"]; !ok || pb >= bandit.LockInLevel || l.Alarm {
					t.Errorf("P_best(b) = %g (computed %v), alarm %v; want below %g and no alarm", pb, ok, l.Alarm, bandit.LockInLevel)
				}
			}})
	})
}

// The figures of each published version, through the Go API: an mf-ts
// bandit on 0/1 rewards (Bernoulli) and one on real rewards (Gaussian).
// Each version after the first carries the previous version's score of
// the 5 rewards it was then trained on (a retraining every 5), with 16
// draws; log probabilities of 0/1 rewards are at most 0 and the ECE, a
// mean absolute difference of probabilities, is in [0, 1]; the recent
// window holds every reward scored so far (fewer than 512). The spread
// has one entry per layer with shares in [0, 1], the hidden layer marked
// as a point estimate (model.stochastic "output"); the noise is none under
// the Bernoulli likelihood, and one variance beside the rewards' under
// the Gaussian.
func TestHealthOfEachVersion(t *testing.T) {
	for _, c := range []struct {
		name  string
		scale float64 // rewards are lockProblem's times scale, plus 0.5 when not 1
	}{{"on 0/1 rewards", 1}, {"on real rewards", 3}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			a := stepAgent(t, 9, 5, lockConfig(bandit.MeanFieldTS))
			const n = 60
			for i := range n {
				side := []string{"left", "right"}[i%2]
				o, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"side": "` + side + `"}`)})
				if err != nil {
					t.Fatal(err)
				}
				r := lockProblem(i, side, a.Config().Arms[o.Decision.Arm], false)
				if c.scale != 1 {
					r = c.scale*r + 0.5
				}
				if err := a.Reward(ctx, o.Decision.EventID, r); err != nil {
					t.Fatal(err)
				}
			}
			st := a.Status()
			h := st.Health
			if h == nil || h.ModelVersion != st.ModelVersion || st.ModelVersion != n/5 {
				t.Fatalf("health %+v of status version %d, want version %d", h, st.ModelVersion, n/5)
			}
			ho := h.HeldOut
			if ho == nil {
				t.Fatal("no held-out figures")
			}
			if ho.ScoredBy != st.ModelVersion-1 || ho.Rewards != 5 || ho.Draws != bandit.HeldOutDraws || ho.RecentRewards != n-5 {
				t.Errorf("held out: %+v, want scored by %d, 5 rewards, %d draws, %d recent", ho, st.ModelVersion-1, bandit.HeldOutDraws, n-5)
			}
			if math.IsNaN(ho.LogLikPerReward) || math.IsInf(ho.LogLikPerReward, 0) || math.IsNaN(ho.RecentLogLikPerReward) {
				t.Errorf("log-likelihoods %g, %g, want finite", ho.LogLikPerReward, ho.RecentLogLikPerReward)
			}
			if len(h.Layers) != 2 {
				t.Errorf("%d layers, want 2", len(h.Layers))
			}
			for i, l := range h.Layers {
				// model.stochastic "output", mf-ts's default: the
				// hidden layer is a point estimate.
				if !(l.MedianSigma > 0) || l.AtPriorShare < 0 || l.AtPriorShare > 1 || l.PointEstimate != (i == 0) {
					t.Errorf("layer %+v", l)
				}
			}
			switch c.scale {
			case 1:
				if ho.LogLikPerReward > 0 || ho.CalibrationError == nil || *ho.CalibrationError < 0 || *ho.CalibrationError > 1 || ho.RecentCalibrationError == nil {
					t.Errorf("0/1 rewards: log-likelihood %g, ECE %v (recent %v); want <= 0 and in [0, 1]", ho.LogLikPerReward, ho.CalibrationError, ho.RecentCalibrationError)
				}
				if h.Noise == nil || h.Noise.Likelihood != "bernoulli" || h.Noise.Variances != nil {
					t.Errorf("noise %+v, want bernoulli without variances", h.Noise)
				}
			default:
				if ho.CalibrationError != nil || ho.RecentCalibrationError != nil {
					t.Errorf("ECE %v of rewards that are not 0/1, want none", ho.CalibrationError)
				}
				// model.noise "context", mf-ts's default: one variance
				// per arm, each the mean over its rewards' contexts.
				if h.Noise == nil || h.Noise.Likelihood != "gaussian" || len(h.Noise.Variances) != 2 {
					t.Fatalf("noise %+v, want a gaussian variance per arm", h.Noise)
				}
				rewards := 0
				for k, nv := range h.Noise.Variances {
					if !(nv.NoiseVariance > 0) || nv.RewardVariance == nil || !(*nv.RewardVariance > 0) || nv.Arm != []string{"a", "b"}[k] {
						t.Errorf("noise %+v (reward variance %v), want arm %d's positive variances", nv, nv.RewardVariance, k)
					}
					rewards += nv.Rewards
				}
				if rewards != n {
					t.Errorf("the arms' noise variances are over %d rewards, want %d", rewards, n)
				}
			}
		})
	}
}

// Every kind with a posterior computes P_best on concentrated play, and
// over the arms each decision allowed: with arm b excluded from all 150
// decisions, a takes all of them, P_best sums to 1 with b's exactly 0
// (a decision that excludes an arm is no lock-in out of it), and there
// is no alarm. uniform has no posterior: no probabilities.
func TestLockInProbabilityOfEveryKind(t *testing.T) {
	kinds := []bandit.PolicyKind{bandit.RefinedTS, bandit.MeanFieldTS, bandit.EpsGreedy, bandit.Greedy, bandit.LinearTS, bandit.LaplaceTS, bandit.FlowTS, bandit.NeuralLinear, bandit.Uniform}
	for _, kind := range kinds {
		for _, laplace := range []string{"", bandit.LaplaceLastLayer} {
			if laplace != "" && kind != bandit.LaplaceTS {
				continue
			}
			t.Run(string(kind)+laplace, func(t *testing.T) {
				cfg := lockConfig(kind)
				cfg.Policy.Laplace = laplace
				cfg.Refinement = bandit.RefinementConfig{Iterations: 5, BankSize: 6}
				lockRun(t, cfg, false, lockPhase{decisions: 150, exclude: "b", check: func(a *bandit.Agent) {
					l := a.Status().Health.LockIn
					if l.Decisions != 150 || l.TopArm != "a" || l.TopShare != 1 || l.Alarm {
						t.Errorf("%+v, want a on all 150 decisions and no alarm", l)
					}
					if kind == bandit.Uniform {
						if l.BestProbability != nil {
							t.Errorf("uniform: P_best %v, want none", l.BestProbability)
						}
						return
					}
					if l.BestProbability["a"] != 1 || l.BestProbability["b"] != 0 {
						t.Errorf("P_best %v, want a 1 and b 0", l.BestProbability)
					}
				}})
			})
		}
	}
}

// P_best against the propensities the policies log: with policy.samples
// 1, linear-ts, neural-linear, mf-ts, laplace-ts (both structures) and
// flow-ts act on one posterior draw, so each decision's logged
// probability of an arm estimates the probability that one draw ranks it
// first on that context, which P_best averages over contexts. After 100
// rewarded decisions (lockProblem: a is best on the left, b on the
// right), 100 unrewarded decisions on the right and then 100 on the left
// (in step mode the posterior stays as it is without rewards): on each
// side the mean of the logged propensities and P_best on the side's
// contexts must agree within 0.04 -- the propensities' Monte Carlo
// error averaged over 100 decisions is below 0.01, P_best's (16 draws on
// each of 100 contexts, or 1,024 shared draws) below 0.035, and the floor
// moves none by more than 2e-4.
func TestLockInProbabilityAgreesWithPropensities(t *testing.T) {
	for _, c := range []struct {
		kind    bandit.PolicyKind
		laplace string
	}{{bandit.LinearTS, ""}, {bandit.NeuralLinear, ""}, {bandit.MeanFieldTS, ""}, {bandit.LaplaceTS, bandit.LaplaceDiagonal}, {bandit.LaplaceTS, bandit.LaplaceLastLayer}, {bandit.FlowTS, ""}} {
		t.Run(string(c.kind)+" "+c.laplace, func(t *testing.T) {
			ctx := context.Background()
			cfg := lockConfig(c.kind)
			cfg.Policy.Samples, cfg.Policy.Laplace = 1, c.laplace
			a := stepAgent(t, 3, 5, cfg)
			decide := func(i int, side string) []float64 {
				o, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"side": "` + side + `"}`)})
				if err != nil {
					t.Fatal(err)
				}
				if i >= 0 {
					if err := a.Reward(ctx, o.Decision.EventID, lockProblem(i, side, cfg.Arms[o.Decision.Arm], false)); err != nil {
						t.Fatal(err)
					}
				}
				return o.Decision.Propensities
			}
			for i := range 100 {
				decide(i, []string{"left", "right"}[i%2])
			}
			for _, side := range []string{"right", "left"} {
				mean := make([]float64, 2)
				for range 100 {
					for k, p := range decide(-1, side) {
						mean[k] += p / 100
					}
				}
				pb := a.BestProbabilityOfRecent(100)
				t.Logf("%s: logged propensities %.4f, P_best %.4f", side, mean, pb)
				for k := range mean {
					if math.Abs(pb[k]-mean[k]) > 0.04 {
						t.Errorf("%s, arm %d: P_best %.4f, mean logged propensity %.4f; want within 0.04", side, k, pb[k], mean[k])
					}
				}
			}
		})
	}
}
