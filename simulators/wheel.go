package simulators

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// WheelConfig parameterizes the wheel bandit. Every field is used as
// given (zero is a legal value for several of them); start from
// DefaultWheelConfig.
type WheelConfig struct {
	// Delta is the exploration parameter δ in [0, 1]: contexts with
	// ‖x‖ ≥ δ are in the outer ring, where one arm pays Mu3. The larger
	// δ, the rarer and harder to find the outer ring (its probability is
	// 1 - δ²). Default 0.95.
	Delta float64
	// Mu1 is the mean reward of the safe arm a1, everywhere (default 1.2).
	Mu1 float64
	// Mu2 is the mean reward of arms a2-a5 where they are not optimal
	// (default 1.0).
	Mu2 float64
	// Mu3 is the mean reward of the quadrant's arm in the outer ring
	// (default 50).
	Mu3 float64
	// Sigma is the standard deviation of the Gaussian reward noise of
	// every arm (default 0.01).
	Sigma float64
}

// DefaultWheelConfig returns the constants of Riquelme, Tucker, Snoek
// (2018), "Deep Bayesian Bandits Showdown" (arXiv:1802.09127), the wheel
// bandit section (Section 5.4 according to the authors' README):
// μ1 = 1.2, μ2 = 1.0, μ3 = 50, σ = 0.01, with δ = 0.95, the value of the
// authors' example_main.py (their tables report δ in {0.5, 0.7, 0.9,
// 0.95, 0.99}).
//
// The constants were checked against the authors' code, not the paper's
// text: the deep_contextual_bandits sampler sample_wheel_bandit_data and
// the edward2 wheel-bandit generator use mean_v = [1.0, 1.0, 1.0, 1.0,
// 1.2], mu_large = 50, std_large = 0.01 and std_v = 0.01 for every arm;
// example_main.py uses std_v = 0.05 for the small rewards instead. Set
// Sigma to reproduce that variant (one σ serves all arms here).
func DefaultWheelConfig() WheelConfig {
	return WheelConfig{Delta: 0.95, Mu1: 1.2, Mu2: 1.0, Mu3: 50, Sigma: 0.01}
}

func (c WheelConfig) validate() error {
	if !(c.Delta >= 0 && c.Delta <= 1) {
		return fmt.Errorf("wheel delta = %g, want it in [0, 1]", c.Delta)
	}
	if !(c.Sigma >= 0) || math.IsInf(c.Sigma, 0) {
		return fmt.Errorf("wheel sigma = %g, want a finite number >= 0", c.Sigma)
	}
	for _, m := range []struct {
		name string
		v    float64
	}{{"mu1", c.Mu1}, {"mu2", c.Mu2}, {"mu3", c.Mu3}} {
		if math.IsNaN(m.v) || math.IsInf(m.v, 0) {
			return fmt.Errorf("wheel %s = %g, want a finite number", m.name, m.v)
		}
	}
	return nil
}

// Wheel is the wheel bandit (Riquelme, Tucker, Snoek 2018; see
// DefaultWheelConfig for the source of the constants):
// the context x = (x1, x2) is uniform in the unit disk and there are five
// arms. a1 (index 0) pays N(μ1, σ²) everywhere. Inside the disk of radius
// δ, a2-a5 pay N(μ2, σ²), so a1 is optimal. Outside it, the arm of x's
// quadrant pays N(μ3, σ²) and is optimal, the other three of a2-a5 pay
// N(μ2, σ²):
//
//	a2 (index 1): x1 > 0, x2 > 0
//	a3 (index 2): x1 > 0, x2 ≤ 0
//	a4 (index 3): x1 ≤ 0, x2 > 0
//	a5 (index 4): x1 ≤ 0, x2 ≤ 0
//
// with the outer ring taken as ‖x‖ ≥ δ, as in the authors' code. (Their
// code puts the safe arm last, at index 4, and the quadrant arms at 0-3
// in the order above; here the safe arm is first, as a1 in the paper.)
//
// Each step draws the context as x = √u (cos 2πv, sin 2πv) with u, v
// uniform on [0, 1) (uniform on the disk), then one Gaussian per arm:
// exactly two Float64 and five NormFloat64 draws.
type Wheel struct {
	cfg  WheelConfig
	name string
}

var _ Env = (*Wheel)(nil)

// NewWheel returns the wheel bandit with cfg.
func NewWheel(cfg WheelConfig) (*Wheel, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	name := "wheel:delta=" + strconv.FormatFloat(cfg.Delta, 'g', -1, 64)
	def := DefaultWheelConfig()
	for _, o := range []struct {
		key      string
		got, def float64
	}{{"mu1", cfg.Mu1, def.Mu1}, {"mu2", cfg.Mu2, def.Mu2}, {"mu3", cfg.Mu3, def.Mu3}, {"sigma", cfg.Sigma, def.Sigma}} {
		if o.got != o.def {
			name += "," + o.key + "=" + strconv.FormatFloat(o.got, 'g', -1, 64)
		}
	}
	return &Wheel{cfg: cfg, name: name}, nil
}

// Name returns "wheel:delta=D", followed by the other options that
// differ from the defaults.
func (w *Wheel) Name() string { return w.name }

// NumArms returns 5.
func (w *Wheel) NumArms() int { return 5 }

// NumFeatures returns 2: the context is (x1, x2) itself.
func (w *Wheel) NumFeatures() int { return 2 }

// ArmNames returns ["a1", "a2", "a3", "a4", "a5"], as in the paper.
func (w *Wheel) ArmNames() []string { return wheelArms }

var wheelArms = []string{"a1", "a2", "a3", "a4", "a5"}

// Expected returns the mean reward of every arm at context x (2 long)
// into dst (5 long, allocated if nil).
func (w *Wheel) Expected(x, dst []float64) []float64 {
	if len(x) != 2 {
		panic(fmt.Sprintf("simulators: wheel context of length %d, want 2", len(x)))
	}
	if dst == nil {
		dst = make([]float64, 5)
	}
	dst[0] = w.cfg.Mu1
	for a := 1; a < 5; a++ {
		dst[a] = w.cfg.Mu2
	}
	if math.Hypot(x[0], x[1]) >= w.cfg.Delta {
		dst[wheelQuadrantArm(x)] = w.cfg.Mu3
	}
	return dst
}

// wheelQuadrantArm returns the index of the arm that owns x's quadrant.
func wheelQuadrantArm(x []float64) int {
	switch {
	case x[0] > 0 && x[1] > 0:
		return 1
	case x[0] > 0:
		return 2
	case x[1] > 0:
		return 3
	default:
		return 4
	}
}

// Next draws a context uniformly from the unit disk and a reward for
// every arm.
func (w *Wheel) Next(rng *rand.Rand) Step {
	r := math.Sqrt(rng.Float64())
	sin, cos := math.Sincos(2 * math.Pi * rng.Float64())
	x := []float64{r * cos, r * sin}
	exp := w.Expected(x, nil)
	rel := make([]float64, len(exp))
	for a, m := range exp {
		rel[a] = m + w.cfg.Sigma*rng.NormFloat64()
	}
	return Step{X: x, Expected: exp, Realized: rel, Best: argmax(exp)}
}
