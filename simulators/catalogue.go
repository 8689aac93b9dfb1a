package simulators

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// Catalogue is a synthetic catalogue whose arms are described by
// features and arrive over time (issue 32): a context is x ~ N(0, I_2),
// an arm is a vector theta_a in R^2, and the arm pays
//
//	r(x, a) = x . theta_a + Noise e,  e ~ N(0, 1),
//
// so that the best arm depends on the context and an arm's rewards follow
// from its features. The first Initial arms lie on the unit circle at
// angles 2 pi k / Initial; the arm that arrives later (NewArm) lies
// between the first two, at angle pi / Initial, with norm NewNorm: on
// the contexts near its direction it is the best arm.
type Catalogue struct {
	Initial int
	NewNorm float64
	Noise   float64
}

// DefaultCatalogue is the catalogue of bench/arm-features: six arms, a
// new one a quarter longer than theirs, noise 0.3.
var DefaultCatalogue = Catalogue{Initial: 6, NewNorm: 1.25, Noise: 0.3}

// theta returns arm k's vector; k = Initial is the new arm.
func (c Catalogue) theta(k int) [2]float64 {
	if k == c.Initial {
		a := math.Pi / float64(c.Initial)
		return [2]float64{c.NewNorm * math.Cos(a), c.NewNorm * math.Sin(a)}
	}
	a := 2 * math.Pi * float64(k) / float64(c.Initial)
	return [2]float64{math.Cos(a), math.Sin(a)}
}

// armName names arm k; k = Initial is the new arm.
func (c Catalogue) armName(k int) string {
	if k == c.Initial {
		return "new"
	}
	return fmt.Sprint("item", k)
}

// next draws a context and the rewards of the first arms arms.
func (c Catalogue) next(rng *rand.Rand, arms int) Step {
	x := []float64{rng.NormFloat64(), rng.NormFloat64()}
	s := Step{X: x, Expected: make([]float64, arms), Realized: make([]float64, arms)}
	for k := range arms {
		th := c.theta(k)
		s.Expected[k] = x[0]*th[0] + x[1]*th[1]
		s.Realized[k] = s.Expected[k] + c.Noise*rng.NormFloat64()
		if s.Expected[k] > s.Expected[s.Best] {
			s.Best = k
		}
	}
	return s
}

// armValues returns arm k's features as the bandit's arm_values take
// them.
func (c Catalogue) armValues(k int) json.RawMessage {
	th := c.theta(k)
	raw, _ := json.Marshal(map[string]float64{"t1": th[0], "t2": th[1]})
	return raw
}

// config returns the bandit of the catalogue's first Initial arms, with
// the arms' features (arm_features t1, t2) or without (one output per
// arm): kind's defaults but a network of one hidden layer of 32 and
// training of 300 iterations.
func (c Catalogue) config(kind bandit.PolicyKind, features bool) *bandit.Config {
	cfg := &bandit.Config{
		Name:     "catalogue",
		Features: []bandit.Feature{{Name: "x1", Type: bandit.Numeric}, {Name: "x2", Type: bandit.Numeric}},
		Policy:   bandit.PolicyConfig{Kind: kind},
		Model:    bandit.ModelConfig{Hidden: []int{32}},
		Training: bandit.TrainingConfig{Iterations: 300, IterationsPerReward: 300},
	}
	for k := range c.Initial {
		cfg.Arms = append(cfg.Arms, c.armName(k))
	}
	if features {
		cfg.ArmFeatures = []bandit.Feature{{Name: "t1", Type: bandit.Numeric}, {Name: "t2", Type: bandit.Numeric}}
		cfg.ArmValues = map[string]json.RawMessage{}
		for k := range c.Initial {
			cfg.ArmValues[c.armName(k)] = c.armValues(k)
		}
	}
	return cfg
}

// NewArmRun is one run of the new arm's comparison (NewArmRegret).
type NewArmRun struct {
	Kind     bandit.PolicyKind
	Features bool // the bandit scores the arms on their features
	Seed     uint64
	// Warmup decisions on the first arms before the new one arrives,
	// After decisions after; every decision is rewarded at once, and
	// the agent (step mode) retrains after every TrainEvery rewards.
	Warmup, After, TrainEvery int
}

// NewArmResult is what a NewArmRun measured over the After decisions
// that follow the new arm's arrival.
type NewArmResult struct {
	// Regret is the cumulative expected regret, against the best of
	// every arm (the new one included).
	Regret float64
	// NewBest counts the decisions whose best arm was the new one,
	// NewChosen those that chose it.
	NewBest, NewChosen int
}

// NewArmRegret plays r on the catalogue c with the service's own agent
// in step mode (an in-memory store): Warmup decisions on the first
// c.Initial arms, then the new arm is added by a patch (Service.Update,
// as PATCH add_arms does: with its features when r.Features), then After
// decisions on every arm. The environment's random stream is r.Seed's
// whatever the policy does (common random numbers across runs).
func NewArmRegret(ctx context.Context, c Catalogue, r NewArmRun) (NewArmResult, error) {
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Seed: r.Seed, Step: &bandit.StepConfig{TrainEvery: r.TrainEvery}})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		return NewArmResult{}, err
	}
	a, err := svc.Create(ctx, c.config(r.Kind, r.Features))
	if err != nil {
		return NewArmResult{}, err
	}
	env := rand.New(rand.NewPCG(r.Seed, 0xca7a))
	var res NewArmResult
	for i := range r.Warmup + r.After {
		arms := c.Initial
		if i == r.Warmup {
			p := &bandit.Patch{AddArms: []string{c.armName(c.Initial)}}
			if r.Features {
				p.ArmValues = map[string]json.RawMessage{c.armName(c.Initial): c.armValues(c.Initial)}
			}
			if a, _, err = svc.Update(ctx, "catalogue", p); err != nil {
				return res, err
			}
		}
		if i >= r.Warmup {
			arms++
		}
		s := c.next(env, arms)
		raw, _ := json.Marshal(map[string]float64{"x1": s.X[0], "x2": s.X[1]})
		id := fmt.Sprint("e", i)
		out, err := a.Decide(ctx, bandit.DecideRequest{EventID: id, Context: raw})
		if err != nil {
			return res, err
		}
		k := out.Decision.Arm
		if i >= r.Warmup {
			exp, _ := s.Regret(k)
			res.Regret += exp
			if s.Best == c.Initial {
				res.NewBest++
			}
			if k == c.Initial {
				res.NewChosen++
			}
		}
		if err := a.Reward(ctx, id, s.Realized[k]); err != nil {
			return res, err
		}
	}
	return res, nil
}
