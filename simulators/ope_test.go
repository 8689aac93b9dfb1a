package simulators

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// opeWorld is a synthetic bandit with known everything: contexts x in
// {0, 1, 2} with probabilities px, two arms with mean rewards m[x][a]
// and Gaussian noise sd, a logging policy mu[x][a] and a candidate
// pi[x][a]. Its value is the closed form
//
//	V(pi) = Σ_x px[x] Σ_a pi[x][a] m[x][a].
type opeWorld struct {
	px     []float64
	m      [][]float64
	mu, pi [][]float64
	sd     float64
}

var testWorld = opeWorld{
	px: []float64{0.5, 0.3, 0.2},
	m:  [][]float64{{1, 0}, {0, 2}, {-1, 3}},
	mu: [][]float64{{0.8, 0.2}, {0.5, 0.5}, {0.9, 0.1}},
	pi: [][]float64{{0.1, 0.9}, {0.3, 0.7}, {0, 1}},
	sd: 1,
}

// value is V(pi): 0.5 (0.1) + 0.3 (1.4) + 0.2 (3) = 1.07.
func (w opeWorld) value() float64 {
	var v float64
	for x, p := range w.px {
		for a := range w.pi[x] {
			v += p * w.pi[x][a] * w.m[x][a]
		}
	}
	return v
}

// log draws n logged rows with q as the reward model (nil: none).
func (w opeWorld) log(n int, q func(x int) []float64, rng *rand.Rand) (rows []OPERow, xs []int) {
	for range n {
		x := pick(w.px, rng)
		a := pick(w.mu[x], rng)
		r := w.m[x][a] + w.sd*rng.NormFloat64()
		row := OPERow{Pi: w.pi[x], Arm: a, Mu: w.mu[x][a], Reward: r}
		if q != nil {
			row.Q = q(x)
		}
		rows = append(rows, row)
		xs = append(xs, x)
	}
	return rows, xs
}

func pick(p []float64, rng *rand.Rand) int {
	u := rng.Float64()
	for i, v := range p {
		if u < v {
			return i
		}
		u -= v
	}
	return len(p) - 1
}

func TestSyntheticWorldValue(t *testing.T) {
	if got, want := testWorld.value(), 1.07; math.Abs(got-want) > 1e-12 {
		t.Fatalf("V(pi) = %g, want the closed form %g", got, want)
	}
}

// On one log of 20,000 rows, IPS, SNIPS and DR (with a wrong reward
// model: 0 everywhere) land within 4 of their own standard errors of
// the closed-form value, and their 95% intervals contain it (seeded: a
// failure is a bug, not bad luck; 4 SE is a 6e-5 two-sided event).
func TestEstimatorsAgainstTheClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rows, _ := testWorld.log(20000, func(int) []float64 { return []float64{0, 0} }, rng)
	want := testWorld.value()
	z := ZOfLevel(0.95)
	if math.Abs(z-1.959963984540054) > 1e-9 {
		t.Errorf("ZOfLevel(0.95) = %.15g, want 1.959963984540054", z)
	}
	for _, e := range []Estimate{IPS(rows, z), SNIPS(rows, z), DR(rows, z)} {
		if math.Abs(e.Value-want) > 4*e.SE || !(e.Lo <= want && want <= e.Hi) {
			t.Errorf("%s = %g [%g, %g] (SE %g), want within 4 SE of %g and an interval containing it", e.Estimator, e.Value, e.Lo, e.Hi, e.SE, want)
		}
		if !(e.SE > 0) || math.Abs((e.Hi-e.Lo)/2-z*e.SE) > 1e-12 {
			t.Errorf("%s: interval [%g, %g] is not value ± z SE (SE %g)", e.Estimator, e.Lo, e.Hi, e.SE)
		}
	}
	// DM with the zero model is 0, far from the truth: its interval
	// covers the contexts only.
	if dm := DM(rows, z); dm.Value != 0 || dm.SE != 0 {
		t.Errorf("DM with q = 0: %+v, want exactly 0", dm)
	}
}

// IPS is unbiased: its mean over 4,000 independent logs of 50 rows is
// within 4 standard errors of the mean of the closed-form value, where
// SNIPS, which is not, may sit anywhere (it is only checked to be
// finite). The standard error of the mean is the sample sd of the 4,000
// estimates over sqrt(4,000).
func TestIPSIsUnbiased(t *testing.T) {
	const logs, n = 4000, 50
	rng := rand.New(rand.NewPCG(3, 4))
	est := make([]float64, logs)
	for i := range est {
		rows, _ := testWorld.log(n, nil, rng)
		est[i] = IPS(rows, 1.96).Value
		if s := SNIPS(rows, 1.96).Value; math.IsInf(s, 0) {
			t.Fatalf("SNIPS = %g", s)
		}
	}
	mean, se := meanSE(est)
	if want := testWorld.value(); math.Abs(mean-want) > 4*se {
		t.Errorf("mean IPS over %d logs = %g ± %g, want %g (unbiased)", logs, mean, se, want)
	}
}

// The 95% intervals of IPS and DR cover the value in 93% to 97% of 1,000
// independent logs of 500 rows: the binomial standard error of a
// coverage of 0.95 over 1,000 logs is 0.007, so this is a 3-SE band.
func TestIntervalsCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	want := testWorld.value()
	cover := map[string]int{}
	const logs = 1000
	for range logs {
		rows, _ := testWorld.log(500, func(x int) []float64 { return []float64{0.5, 0.5} }, rng)
		for _, e := range []Estimate{IPS(rows, 1.96), SNIPS(rows, 1.96), DR(rows, 1.96)} {
			if e.Lo <= want && want <= e.Hi {
				cover[e.Estimator]++
			}
		}
	}
	for _, name := range []string{EstIPS, EstSNIPS, EstDR} {
		if c := float64(cover[name]) / logs; c < 0.93 || c > 0.97 {
			t.Errorf("%s: 95%% intervals covered the value in %.3f of %d logs, want 0.93 to 0.97", name, c, logs)
		}
	}
}

// With the true mean rewards as its model and noiseless rewards, DR's
// every term is Σ_a π(a|x) m(x, a): DR equals the candidate's value on
// the logged contexts to rounding, whatever the weights, where IPS does
// not.
func TestDRIsExactWhenTheModelIs(t *testing.T) {
	w := testWorld
	w.sd = 0
	rng := rand.New(rand.NewPCG(7, 8))
	rows, xs := w.log(300, func(x int) []float64 { return w.m[x] }, rng)
	var onContexts float64
	for _, x := range xs {
		onContexts += dot(w.pi[x], w.m[x]) / float64(len(xs))
	}
	dr, dm, ips := DR(rows, 1.96), DM(rows, 1.96), IPS(rows, 1.96)
	if math.Abs(dr.Value-onContexts) > 1e-12 || math.Abs(dm.Value-onContexts) > 1e-12 {
		t.Errorf("DR = %.15g, DM = %.15g, want both the value on the logged contexts %.15g", dr.Value, dm.Value, onContexts)
	}
	if math.Abs(ips.Value-onContexts) < 1e-3 {
		t.Errorf("IPS = %g equals the value on the contexts %g: the test shows nothing", ips.Value, onContexts)
	}
}

// The logging policy evaluated on its own log: every weight is 1, IPS
// and SNIPS are the mean logged reward, and ESS is n.
func TestTheLoggingPolicyRecoversTheLoggedMean(t *testing.T) {
	w := testWorld
	w.pi = w.mu
	rng := rand.New(rand.NewPCG(9, 10))
	rows, _ := w.log(1000, nil, rng)
	var mean float64
	for _, r := range rows {
		mean += r.Reward / float64(len(rows))
	}
	ips, snips := IPS(rows, 1.96), SNIPS(rows, 1.96)
	if math.Abs(ips.Value-mean) > 1e-12 || math.Abs(snips.Value-mean) > 1e-12 {
		t.Errorf("IPS = %.15g, SNIPS = %.15g, want the logged mean %.15g", ips.Value, snips.Value, mean)
	}
	if math.Abs(ips.SE-snips.SE) > 1e-12 {
		t.Errorf("IPS SE %g, SNIPS SE %g: with unit weights both are sd(r)/sqrt(n)", ips.SE, snips.SE)
	}
	if ess := ESS(rows); math.Abs(ess-1000) > 1e-9 {
		t.Errorf("ESS = %g, want n = 1000", ess)
	}
}

// ESS = (Σw)²/Σw²: weights 1, 1, 2, 4 give 64/22; all-zero weights 0.
func TestESS(t *testing.T) {
	var rows []OPERow
	for _, w := range []float64{1, 1, 2, 4} {
		rows = append(rows, OPERow{Pi: []float64{w / 8, 1 - w/8}, Arm: 0, Mu: 0.125})
	}
	if got, want := ESS(rows), 64.0/22; math.Abs(got-want) > 1e-12 {
		t.Errorf("ESS = %.15g, want %.15g", got, want)
	}
	for i := range rows {
		rows[i].Pi = []float64{0, 1}
	}
	if got := ESS(rows); got != 0 {
		t.Errorf("ESS of zero weights = %g, want 0", got)
	}
	if s := SNIPS(rows, 1.96); !math.IsNaN(s.Value) {
		t.Errorf("SNIPS of zero weights = %g, want NaN", s.Value)
	}
}

// Evaluate on a log of a two-arm bandit with one numeric feature: the
// logging candidate's IPS and SNIPS are the mean reward of the
// evaluation half exactly, the uniform candidate's probabilities are
// exact (1/2), so its IPS is computed here by hand and must agree to
// rounding, and a learning candidate (greedy) is fit and asked for
// probabilities that sum to 1. A zero logged propensity is an error
// naming the decision.
func TestEvaluate(t *testing.T) {
	cfg := &bandit.Config{Name: "b", Arms: []string{"a", "b"}, Features: []bandit.Feature{{Name: "x", Type: bandit.Numeric}},
		Policy: bandit.PolicyConfig{Kind: bandit.Uniform}, Model: bandit.ModelConfig{Hidden: []int{4}}}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	greedy := *cfg
	greedy.Policy = bandit.PolicyConfig{Kind: bandit.Greedy}
	greedy.SetDefaults()
	if err := greedy.Validate(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	var rows []LoggedRow
	for i := range 400 {
		x := rng.Float64()*2 - 1
		mu := []float64{0.7, 0.3}
		a := pick(mu, rng)
		r := x*float64(2*a-1) + 0.1*rng.NormFloat64()
		ctx, _ := json.Marshal(map[string]float64{"x": x})
		rows = append(rows, LoggedRow{EventID: "e" + strconv.Itoa(i), Context: ctx, X: []float64{x}, Arm: a, Propensities: mu, Mu: mu[a], Reward: r})
	}
	ctx := context.Background()
	rep, err := Evaluate(ctx, OPEConfig{Rows: rows, Arms: 2, Dim: 1, TrainFraction: 0.5, TrainEvery: 50, Level: 0.95, Seed: 1,
		Candidates: []Candidate{{Name: "logging"}, {Name: "uniform", Config: cfg}, {Name: "greedy", Config: &greedy}}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.TrainRows != 200 || rep.EvalRows != 200 {
		t.Fatalf("train %d, eval %d rows, want 200 and 200", rep.TrainRows, rep.EvalRows)
	}
	var mean, uniformIPS float64
	for _, r := range rows[200:] {
		mean += r.Reward / 200
		uniformIPS += 0.5 / r.Mu * r.Reward / 200
	}
	get := func(c CandidateResult, est string) Estimate {
		for _, e := range c.Estimates {
			if e.Estimator == est {
				return e
			}
		}
		t.Fatalf("%s has no %s estimate", c.Name, est)
		return Estimate{}
	}
	lg, un, gr := rep.Candidates[0], rep.Candidates[1], rep.Candidates[2]
	if v := get(lg, EstIPS).Value; math.Abs(v-mean) > 1e-12 || math.Abs(rep.LoggedMean-mean) > 1e-12 {
		t.Errorf("logging IPS = %.15g, logged mean %.15g, want both %.15g", v, rep.LoggedMean, mean)
	}
	if v := get(un, EstIPS).Value; math.Abs(v-uniformIPS) > 1e-12 {
		t.Errorf("uniform IPS = %.15g, want %.15g", v, uniformIPS)
	}
	if un.PiEstimator != "exact" || gr.PiEstimator != "exact" || lg.PiEstimator != "logged" {
		t.Errorf("pi estimators %q, %q, %q; want logged, exact, exact", lg.PiEstimator, un.PiEstimator, gr.PiEstimator)
	}
	// The greedy candidate learned r = x (2a - 1): it plays b for x > 0
	// and a for x < 0, worth E|x| = 0.5, well above uniform's 0.
	if v := get(gr, EstDR).Value; !(v > 0.3) {
		t.Errorf("greedy DR = %g, want near 0.5 (it should have learned the sign of x)", v)
	}
	if len(gr.Estimates) != 4 || gr.ESS <= 0 || gr.ESS > 200 {
		t.Errorf("greedy: %d estimates, ESS %g", len(gr.Estimates), gr.ESS)
	}

	rows[250].Mu = 0
	_, err = Evaluate(ctx, OPEConfig{Rows: rows, Arms: 2, Dim: 1, TrainFraction: 0.5, TrainEvery: 50, Level: 0.95, Seed: 1, Candidates: []Candidate{{Name: "logging"}}})
	if err == nil || !strings.Contains(err.Error(), "decision "+rows[250].EventID+": logged propensity 0") {
		t.Errorf("a zero propensity: err = %v, want it named", err)
	}
}
