package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// newUserStepRegret plays newUserProblem's stream seed through a bandit of
// kind (every other setting the default, then set) in step mode,
// retraining after every trainEvery rewards, and returns its expected
// regret per decision over the last window of steps decisions.
func newUserStepRegret(t *testing.T, kind bandit.PolicyKind, seed uint64, steps, window, trainEvery int, set func(*bandit.Config)) float64 {
	t.Helper()
	ctx := context.Background()
	clock := bandit.NewManualClock(time.Unix(0, 0).UTC())
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Seed: seed<<8 | 1, Step: &bandit.StepConfig{Clock: clock, TrainEvery: trainEvery}})
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	cfg := bandit.Config{Name: "layouts", Arms: nuArms, Features: []bandit.Feature{
		{Name: "device", Type: "categorical", Values: nuDevices},
		{Name: "price", Type: "numeric"},
		{Name: "account_age", Type: "numeric"},
	}}
	cfg.Policy.Kind = kind
	if set != nil {
		set(&cfg)
	}
	a, err := svc.Create(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	var pb newUserProblem
	env := rand.New(rand.NewPCG(seed, 1))
	coin := rand.New(rand.NewPCG(seed, 2))
	var regret float64
	var counts [3][4]int
	for i := range steps {
		c := pb.draw(env)
		p := pb.probs(c)
		raw, _ := json.Marshal(c.json())
		out, err := a.Decide(ctx, bandit.DecideRequest{EventID: "e" + strconv.Itoa(i), Context: raw})
		if err != nil {
			t.Fatal(err)
		}
		arm := out.Decision.Arm
		if i >= steps-window {
			regret += max(p[0], p[1], p[2], p[3]) - p[arm]
			counts[c.device][arm]++
		}
		r := 0.0
		if coin.Float64() < p[arm] {
			r = 1
		}
		if err := a.Reward(ctx, out.Decision.EventID, r); err != nil {
			t.Fatal(err)
		}
		clock.Advance(10 * time.Millisecond)
	}
	if os.Getenv("NU_VERBOSE") != "" {
		fmt.Printf("seed %d %s: arms per device over the last %d %v\n", seed, kind, window, counts)
		for d := range nuDevices {
			raw, _ := json.Marshal(map[string]any{"device": nuDevices[d], "price": 1.0, "account_age": 0.0})
			for k := 0; k < 3; k++ {
				out, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprintf("probe-%d-%d", d, k), Context: raw})
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("  %s probe %d: arm %d scores %.3f propensities %.3f\n", nuDevices[d], k, out.Decision.Arm, out.Decision.Scores, out.Decision.Propensities)
			}
		}
	}
	return regret / float64(window)
}

// TestNewUserStepScreen is the measurement of `make bench-newuser`
// (bench/newuser-step), skipped unless NU_SEEDS is set: newUserProblem's
// streams NU_FIRST+1 .. NU_FIRST+NU_SEEDS, each played in step mode (no
// goroutine timing: the same stream gives the same decisions) by refined
// TS with the service's defaults (training.collapsed_reg NU_REG and
// policy.samples NU_SAMPLES when they are set, and every PATH=VALUE of
// NU_SET, separated by spaces, as simulate's --set applies it), and by
// linear TS. It
// prints the regret per decision over the last 500 of 2,000; with
// NU_VERBOSE, the arms each device got over them and three decisions per
// device at the end. TestNewUserBanditLearns is
// the HTTP test of the same problem, on one stream whose decisions depend
// on the trainer's and the refinement workers' timing.
func TestNewUserStepScreen(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NU_SEEDS"))
	if n == 0 {
		t.Skip("a measurement: make bench-newuser (NU_SEEDS streams)")
	}
	reg, _ := strconv.ParseFloat(os.Getenv("NU_REG"), 64)
	samples, _ := strconv.Atoi(os.Getenv("NU_SAMPLES"))
	first, _ := strconv.Atoi(os.Getenv("NU_FIRST"))
	sets := setFlags(strings.Fields(os.Getenv("NU_SET")))
	for s := first; s < first+n; s++ {
		start := time.Now()
		got := newUserStepRegret(t, bandit.RefinedTS, uint64(s+1), 2000, 500, 5, func(c *bandit.Config) {
			c.Training.CollapsedReg, c.Policy.Samples = reg, samples
			if err := sets.apply(c); err != nil {
				t.Fatal(err)
			}
		})
		lin := newUserStepRegret(t, bandit.LinearTS, uint64(s+1), 2000, 500, 5, nil)
		fmt.Printf("seed %d reg %g samples %d set %q: refined %.4f linear %.4f ratio %.1f (%.1fs)\n", s+1, reg, samples, os.Getenv("NU_SET"), got, lin, got/lin, time.Since(start).Seconds())
	}
}
