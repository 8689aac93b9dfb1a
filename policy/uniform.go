package policy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
)

// Uniform picks uniformly at random among the arms that are not
// excluded. It has no model: every score is 0 and the propensities are
// exact, 1/m for each of the m allowed arms.
type Uniform struct {
	arms, features int
	rng            *rand.Rand
}

var _ Policy = (*Uniform)(nil)

// NewUniform returns the uniform policy over arms arms for contexts of
// length features. It draws from rng, which it keeps (see Policy).
func NewUniform(arms, features int, rng *rand.Rand) (*Uniform, error) {
	if rng == nil {
		panic("policy: NewUniform with a nil *rand.Rand")
	}
	if arms < 1 {
		return nil, fmt.Errorf("policy: uniform over %d arms, want at least 1", arms)
	}
	if features < 0 {
		return nil, fmt.Errorf("policy: uniform with %d features, want at least 0", features)
	}
	return &Uniform{arms: arms, features: features, rng: rng}, nil
}

// Name returns "uniform".
func (u *Uniform) Name() string { return "uniform" }

// Decide picks an allowed arm uniformly; it draws one IntN.
func (u *Uniform) Decide(_ context.Context, x []float64, excluded []bool) (Decision, error) {
	if err := checkContext(x, u.features); err != nil {
		return Decision{}, err
	}
	if err := checkExcluded(excluded, u.arms); err != nil {
		return Decision{}, err
	}
	var d Decision
	UniformRule(&d, u.arms, excluded, u.rng)
	return d, nil
}

// Observe checks its arguments and otherwise ignores them.
func (u *Uniform) Observe(_ context.Context, x []float64, arm int, reward float64) error {
	if err := checkContext(x, u.features); err != nil {
		return err
	}
	return checkArmReward(arm, u.arms, reward)
}

// checkArmReward returns an error unless arm is in [0, arms) and reward
// is finite: the part of Observe's checks that checkContext (rules.go)
// does not do.
func checkArmReward(arm, arms int, reward float64) error {
	if arm < 0 || arm >= arms {
		return fmt.Errorf("policy: arm %d out of range [0, %d)", arm, arms)
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return fmt.Errorf("policy: reward %g is not finite", reward)
	}
	return nil
}
