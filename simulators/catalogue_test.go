package simulators_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
)

// TestNewArmLearnsFromItsFeatures: on the catalogue, after 300 decisions
// on six arms, an arm that arrives with its features costs mf-ts less
// regret over its first 200 decisions than the same arm added to a
// bandit with one output per arm, which starts it at the prior, summed
// over seeds 1-3 (step mode: deterministic).
func TestNewArmLearnsFromItsFeatures(t *testing.T) {
	ctx := context.Background()
	var with, without float64
	for seed := uint64(1); seed <= 3; seed++ {
		for _, features := range []bool{true, false} {
			r, err := simulators.NewArmRegret(ctx, simulators.DefaultCatalogue, simulators.NewArmRun{Kind: bandit.MeanFieldTS, Features: features, Seed: seed, Warmup: 300, After: 200, TrainEvery: 10})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("seed %d, arm features %v: regret %.1f over 200, new arm best %d, chosen %d", seed, features, r.Regret, r.NewBest, r.NewChosen)
			if features {
				with += r.Regret
			} else {
				without += r.Regret
			}
		}
	}
	if with >= without {
		t.Errorf("regret over the new arm's first 200 decisions, seeds 1-3: %.1f with arm features, %.1f without; want less with", with, without)
	}
}

// TestNewArmScreen is the comparison of bench/arm-features, run by make
// bench-arm-features: NEWARM_SEEDS seeds (skipped when unset) of each
// kind that takes arm features, with and without them.
func TestNewArmScreen(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NEWARM_SEEDS"))
	if n < 1 {
		t.Skip("NEWARM_SEEDS unset: make bench-arm-features runs it")
	}
	ctx := context.Background()
	fmt.Println("kind\tseed\tfeatures\tregret_200\tnew_best\tnew_chosen")
	for _, kind := range []bandit.PolicyKind{bandit.RefinedTS, bandit.MeanFieldTS, bandit.EpsGreedy, bandit.LinearTS} {
		for seed := uint64(1); seed <= uint64(n); seed++ {
			for _, features := range []bool{true, false} {
				r, err := simulators.NewArmRegret(ctx, simulators.DefaultCatalogue, simulators.NewArmRun{Kind: kind, Features: features, Seed: seed, Warmup: 300, After: 200, TrainEvery: 10})
				if err != nil {
					t.Fatal(err)
				}
				fmt.Printf("%s\t%d\t%v\t%.2f\t%d\t%d\n", kind, seed, features, r.Regret, r.NewBest, r.NewChosen)
			}
		}
	}
}
