// Command probe plays a policy on the mushroom as `refinery simulate`
// does (simulators.Run, the same seeds and steps) and then asks each
// run's trained bandit about every mushroom of the data set, without
// rewards: how many of its decisions would be wrong, by the mushroom's
// odor and class, and the quantiles of the sampled scores' margin (the
// eat arm's score less the pass arm's: the policy eats when it is
// positive). It says which mushrooms a policy's late regret comes
// from, which the regret curve does not.
//
//	go run ./bench/model-or-rows/probe --policy refined-ts:supply --steps 5000 --seeds 3
//
// Each mushroom is asked --asks times, each ask a decision of its own:
// on refined TS's sample supply one of the bank's samples drawn at
// random, on mean-field and linear TS a fresh posterior draw.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

// tally is what one run's bandit decided about one group of mushrooms.
type tally struct {
	mushrooms int
	wrong     float64   // expected wrong decisions: the share of asks wrong, summed
	allWrong  int       // mushrooms wrong at every ask
	margins   []float64 // the eat score less the pass score of every ask
}

func run() error {
	data := flag.String("data", "", "path of agaricus-lepiota.data or its directory (default: simulate's search)")
	policy := flag.String("policy", "refined-ts:supply", "the policy, as simulate's --policies (one), on the fast preset")
	steps := flag.Int("steps", 5000, "steps per run")
	seeds := flag.Int("seeds", 1, "seeds")
	first := flag.Int("first-seed", 1, "first seed")
	asks := flag.Int("asks", 4, "decisions asked per mushroom at the end")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	if *asks < 1 || *steps < 1 || *seeds < 1 || *first < 1 {
		return errors.New("--asks, --steps, --seeds and --first-seed must be positive")
	}
	e, err := simulators.ParseEnv("mushroom", *data)
	if err != nil {
		return err
	}
	env := e.(*simulators.Mushroom)
	preset := simulators.Presets()["fast"]
	specs, err := simulators.ParsePolicies(*policy, preset)
	if err != nil {
		return fmt.Errorf("--policy: %w", err)
	}
	if len(specs) != 1 {
		return fmt.Errorf("--policy %s: want one policy, not %d", *policy, len(specs))
	}
	odor := odorColumns(env.FeatureNames())
	var mu sync.Mutex
	tallies := map[int]map[string]*tally{} // seed -> group -> tally
	cfg := simulators.RunConfig{Env: env, Policies: specs, Steps: *steps, Seeds: *seeds, FirstSeed: *first, Preset: preset,
		AtEnd: func(ctx context.Context, r *simulators.RunResult, agent *bandit.Agent) error {
			t, err := probe(ctx, env, agent, odor, *asks)
			mu.Lock()
			tallies[r.Seed] = t
			mu.Unlock()
			return err
		}}
	results, err := simulators.Run(context.Background(), cfg)
	if err != nil {
		return err
	}
	times := "times"
	if *asks == 1 {
		times = "time"
	}
	fmt.Printf("# %s on the mushroom, %d steps: each trained bandit asked %d %s about each of the %d mushrooms\n\n", specs[0].Name, *steps, *asks, times, env.Len())
	fmt.Println("| seed | final expected regret | mushrooms (class, odor) | count | expected wrong decisions | wrong at every ask | eat less pass: 1% | 50% | 99% |")
	fmt.Println("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
		groups := make([]string, 0, len(tallies[r.Seed]))
		for g := range tallies[r.Seed] {
			groups = append(groups, g)
		}
		sort.Strings(groups)
		for _, g := range groups {
			t := tallies[r.Seed][g]
			sort.Float64s(t.margins)
			q := func(p float64) float64 { return t.margins[int(p*float64(len(t.margins)-1))] }
			fmt.Printf("| %d | %.0f | %s | %d | %.1f | %d | %.1f | %.1f | %.1f |\n", r.Seed, r.Expected, g, t.mushrooms, t.wrong, t.allWrong, q(0.01), q(0.5), q(0.99))
		}
	}
	return nil
}

// odorColumns maps the encoded columns of the odor feature to its values.
func odorColumns(names []string) map[int]string {
	m := map[int]string{}
	for j, n := range names {
		if v, ok := strings.CutPrefix(n, "odor="); ok {
			m[j] = v
		}
	}
	return m
}

// probe asks agent asks decisions about every mushroom of env and tallies
// the wrong ones by class and odor: eating a poisonous one, passing an
// edible one.
func probe(ctx context.Context, env *simulators.Mushroom, agent *bandit.Agent, odor map[int]string, asks int) (map[string]*tally, error) {
	enc := bandit.NewEncoder(agent.Config().Features)
	out := map[string]*tally{}
	for i := range env.Len() {
		x, expected := env.At(i)
		raw, err := enc.Decode(x)
		if err != nil {
			return nil, err
		}
		edible := expected[simulators.MushroomEat] > expected[simulators.MushroomPass]
		wrong := 0
		var margins []float64
		for k := range asks {
			o, err := agent.Decide(ctx, bandit.DecideRequest{EventID: "probe-" + strconv.Itoa(i) + "-" + strconv.Itoa(k), Context: raw})
			if err != nil {
				return nil, err
			}
			sc := o.Decision.Scores
			margins = append(margins, sc[simulators.MushroomEat]-sc[simulators.MushroomPass])
			if eat := o.Decision.Arm == simulators.MushroomEat; eat != edible {
				wrong++
			}
		}
		g := "poisonous"
		if edible {
			g = "edible"
		}
		for j, v := range odor {
			if x[j] == 1 {
				g += ", odor " + v
			}
		}
		t := out[g]
		if t == nil {
			t = &tally{}
			out[g] = t
		}
		t.mushrooms++
		t.margins = append(t.margins, margins...)
		t.wrong += float64(wrong) / float64(asks)
		if wrong == asks {
			t.allWrong++
		}
	}
	return out, nil
}
