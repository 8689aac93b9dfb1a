// Package simulators holds contextual-bandit environments (the UCI
// mushroom bandit, the wheel bandit, any classification CSV), their data
// loading and fetching, regret accounting, the offline runner behind
// `refinery simulate` (Run; Merge, WriteOutputs and the plots of its
// results) and the off-policy estimators behind `refinery evaluate`
// (IPS, SNIPS, DR, DM; Evaluate).
//
// An environment draws one context at a time. A step carries the encoded
// context, every arm's expected reward (for the oracle and the expected
// regret) and one draw of every arm's realized reward, all taken from the
// *rand.Rand the caller passes in, so that a run is a deterministic
// function of its seed. Run plays each (policy, seed) on a bandit of the
// service's own code (a bandit.Agent in step mode, bandit.StepConfig, on
// an in-memory store), sending it contexts and rewards as JSON, as a
// client would; per step (runOne):
//
//	step := env.Next(envRNG)
//	out, err := agent.Decide(ctx, bandit.DecideRequest{EventID: id, Context: raw})
//	regret.Record(step, out.Decision.Arm)
//	err = agent.Reward(ctx, id, step.Realized[out.Decision.Arm]) // RewardDelay steps later
//
// Because Next draws every arm's reward before the policy chooses, the
// environment's random stream does not depend on the policy's choices:
// with a random source of its own (envRNG above), every policy run on the
// same seed sees the same contexts and the same reward draws (common
// random numbers), which makes policies directly comparable seed by seed.
package simulators

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Env is a contextual-bandit environment.
type Env interface {
	// Name identifies the environment and its options in results, for
	// example "mushroom" or "wheel:delta=0.95".
	Name() string
	// NumArms is the number of arms, at least 2.
	NumArms() int
	// NumFeatures is the length of every encoded context.
	NumFeatures() int
	// ArmNames returns one name per arm. The caller must not modify it.
	ArmNames() []string
	// Next draws a context and every arm's reward with rng. The slices
	// of the returned Step are fresh; the caller owns them.
	Next(rng *rand.Rand) Step
}

// Step is one context drawn from an environment, with the rewards of
// every arm for it.
type Step struct {
	// X is the encoded context, NumFeatures long.
	X []float64
	// Expected[a] is the expected reward of arm a for this context.
	Expected []float64
	// Realized[a] is the reward arm a pays in this step: one draw per
	// arm, all taken together before any arm is chosen.
	Realized []float64
	// Best is the oracle's arm: the arm with the highest expected
	// reward (the lowest index among ties).
	Best int
}

// Regret returns the instantaneous expected and realized regret of
// choosing arm in this step:
//
//	expected = Expected[Best] - Expected[arm]
//	realized = Realized[Best] - Realized[arm]
//
// The realized regret compares the oracle and the chosen arm on the same
// reward draw; it can be negative (see Regret for the definition and its
// source). Regret panics if arm is out of range.
func (s Step) Regret(arm int) (expected, realized float64) {
	if arm < 0 || arm >= len(s.Expected) {
		panic(fmt.Sprintf("simulators: arm %d out of range [0,%d)", arm, len(s.Expected)))
	}
	return s.Expected[s.Best] - s.Expected[arm], s.Realized[s.Best] - s.Realized[arm]
}

// argmax returns the index of the largest element, the lowest among ties.
func argmax(v []float64) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// ParseEnv builds the environment that spec names. dataPath is the
// explicit location of the mushroom data (the --data flag), "" to search
// the usual places (see ResolveMushroom); other environments ignore it.
//
// A spec is a name, optionally followed by a colon and options:
//
//	mushroom[:key=value,...]   keys: encoding (onehot|ordinal),
//	                           eat_edible, eat_poisonous_win,
//	                           eat_poisonous_loss, loss_prob, pass
//	wheel[:key=value,...]      keys: delta, mu1, mu2, mu3, sigma
//	csv:PATH[?header=auto|yes|no]
//
// For example "mushroom", "mushroom:encoding=ordinal",
// "wheel:delta=0.5,sigma=0.05" or "csv:testdata/iris.csv?header=yes".
// Options not given keep their defaults (DefaultMushroomRewards,
// DefaultWheelConfig, header=auto). Everything after "csv:" up to an
// optional final "?header=..." is the path, so paths may contain commas
// and colons.
//
// A malformed spec (an unknown environment or option, a bad value) is an
// *EnvSpecError; failing to load the data is not.
func ParseEnv(spec, dataPath string) (Env, error) {
	name, rest, _ := strings.Cut(spec, ":")
	switch name {
	case "mushroom":
		opts, err := parseOptions(rest)
		if err != nil {
			return nil, &EnvSpecError{fmt.Errorf("env %q: %w", spec, err)}
		}
		enc := MushroomOneHot
		if v, ok := opts["encoding"]; ok {
			enc = MushroomEncoding(v)
			delete(opts, "encoding")
		}
		rw := DefaultMushroomRewards()
		if err := setFloats(opts, map[string]*float64{
			"eat_edible":         &rw.EatEdible,
			"eat_poisonous_win":  &rw.EatPoisonousWin,
			"eat_poisonous_loss": &rw.EatPoisonousLoss,
			"loss_prob":          &rw.LossProb,
			"pass":               &rw.Pass,
		}, "encoding"); err != nil {
			return nil, &EnvSpecError{fmt.Errorf("env %q: %w", spec, err)}
		}
		path, err := ResolveMushroom(dataPath)
		if err != nil {
			return nil, err
		}
		data, err := LoadMushroom(path)
		if err != nil {
			return nil, err
		}
		return NewMushroom(data, enc, rw)
	case "wheel":
		opts, err := parseOptions(rest)
		if err != nil {
			return nil, &EnvSpecError{fmt.Errorf("env %q: %w", spec, err)}
		}
		cfg := DefaultWheelConfig()
		if err := setFloats(opts, map[string]*float64{
			"delta": &cfg.Delta,
			"mu1":   &cfg.Mu1,
			"mu2":   &cfg.Mu2,
			"mu3":   &cfg.Mu3,
			"sigma": &cfg.Sigma,
		}); err != nil {
			return nil, &EnvSpecError{fmt.Errorf("env %q: %w", spec, err)}
		}
		return NewWheel(cfg)
	case "csv":
		path, header := rest, HeaderAuto
		if i := strings.LastIndex(rest, "?header="); i >= 0 {
			path = rest[:i]
			var err error
			if header, err = ParseHeaderMode(rest[i+len("?header="):]); err != nil {
				return nil, &EnvSpecError{fmt.Errorf("env %q: %w", spec, err)}
			}
		}
		if path == "" {
			return nil, &EnvSpecError{fmt.Errorf("env %q: want csv:PATH", spec)}
		}
		return LoadClassificationCSV(path, header)
	default:
		return nil, &EnvSpecError{fmt.Errorf("env %q: unknown environment %q (want mushroom, wheel or csv:PATH)", spec, name)}
	}
}

// EnvSpecError is ParseEnv's error for a malformed environment spec (a
// usage mistake, as opposed to data that cannot be loaded).
type EnvSpecError struct{ Err error }

func (e *EnvSpecError) Error() string { return e.Err.Error() }
func (e *EnvSpecError) Unwrap() error { return e.Err }

// parseOptions splits "k=v,k=v" into a map; "" gives an empty map.
func parseOptions(s string) (map[string]string, error) {
	opts := make(map[string]string)
	if s == "" {
		return opts, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("option %q: want key=value", kv)
		}
		if _, dup := opts[k]; dup {
			return nil, fmt.Errorf("option %q given twice", k)
		}
		opts[k] = v
	}
	return opts, nil
}

// setFloats parses every option into the float it names and rejects
// options that name none; other lists the options the caller handled
// itself, for the error message.
func setFloats(opts map[string]string, dst map[string]*float64, other ...string) error {
	for k, v := range opts {
		p, ok := dst[k]
		if !ok {
			known := slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(dst)), other...)))
			return fmt.Errorf("unknown option %q (known: %s)", k, strings.Join(known, ", "))
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("option %s=%q: not a number", k, v)
		}
		*p = f
	}
	return nil
}
