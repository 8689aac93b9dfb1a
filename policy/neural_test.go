package policy

import (
	"context"
	"math/rand/v2"
	"testing"
)

// miniMushroom is a small mushroom-like bandit: 4 one-hot categories;
// categories 0 and 1 are edible. Arm 0 (eat) pays +5 when edible and +5
// or -35 with probability 1/2 otherwise; arm 1 (pass) pays 0.
type miniMushroom struct{}

func (miniMushroom) draw(rng *rand.Rand) (x []float64, edible bool) {
	c := rng.IntN(4)
	x = make([]float64, 4)
	x[c] = 1
	return x, c < 2
}

func (miniMushroom) reward(arm int, edible bool, rng *rand.Rand) float64 {
	switch {
	case arm == 1:
		return 0
	case edible || rng.IntN(2) == 0:
		return 5
	default:
		return -35
	}
}

// playMini runs a policy for steps steps and returns the fraction of the
// last `last` decisions that took the optimal arm.
func playMini(t *testing.T, p Policy, steps, last int, rng *rand.Rand) float64 {
	t.Helper()
	env := miniMushroom{}
	ctx := context.Background()
	good := 0
	for s := range steps {
		x, edible := env.draw(rng)
		d, err := p.Decide(ctx, x, nil)
		if err != nil {
			t.Fatal(err)
		}
		if s >= steps-last && (d.Arm == 0) == edible {
			good++
		}
		if err := p.Observe(ctx, x, d.Arm, env.reward(d.Arm, edible, rng)); err != nil {
			t.Fatal(err)
		}
	}
	return float64(good) / float64(last)
}

// small is a cheap schedule for tests: a 16-unit hidden layer, retraining
// every 5 rewards for 100 iterations, 100 refinement iterations.
func small() NeuralConfig {
	c := NeuralConfig{Hidden: []int{16}, TrainEvery: 5, TrainIters: 100, LR: 0.01}
	c.Refine.Iterations = 100
	c.Refine.LR = 0.001
	return c
}

// TestNeuralPoliciesLearnMiniMushroom: after 500 steps each Thompson
// policy eats the edible and passes the poisonous mushrooms in at least
// 70% of the last 150 decisions, where uniform play scores 50%; greedy
// must at least not be worse than uniform (it can lock onto passing).
func TestNeuralPoliciesLearnMiniMushroom(t *testing.T) {
	mk := map[string]func(rng *rand.Rand) (Policy, error){
		"mean-field TS": func(rng *rand.Rand) (Policy, error) { return NewMeanFieldTS(4, 2, small(), rng) },
		"refined TS":    func(rng *rand.Rand) (Policy, error) { return NewRefinedTS(4, 2, small(), rng) },
	}
	for name, f := range mk {
		t.Run(name+" learns", func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			p, err := f(rng)
			if err != nil {
				t.Fatal(err)
			}
			got := playMini(t, p, 500, 150, rand.New(rand.NewPCG(3, 4)))
			t.Logf("%s: optimal in %.2f of the last 150 decisions", p.Name(), got)
			if got < 0.7 {
				t.Errorf("%s: optimal in %.2f of the last 150 decisions, want >= 0.7", p.Name(), got)
			}
		})
	}
}
