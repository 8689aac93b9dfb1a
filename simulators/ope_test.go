package simulators

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
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
		row := OPERow{Pi: w.pi[x], Arm: a, Mu: w.mu[x][a], Reward: r, MuAll: w.mu[x]}
		if q != nil {
			row.Q = q(x)
		}
		rows = append(rows, row)
		xs = append(xs, x)
	}
	return rows, xs
}

// pick draws an index with probabilities p (zeros never drawn).
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

// The 95% intervals of IPS, SNIPS, DR and switch cover the value in 93% to 97% of 1,000
// independent logs of 500 rows: the binomial standard error of a
// coverage of 0.95 over 1,000 logs is 0.007, so this is a 3-SE band.
func TestIntervalsCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	want := testWorld.value()
	cover := map[string]int{}
	const logs = 1000
	for range logs {
		rows, xs := testWorld.log(500, func(x int) []float64 { return []float64{0.5, 0.5} }, rng)
		// Switch at tau = 5 values arm 1 at x = 2 (weight 10) by the
		// model, here the true mean rewards: unbiased, so its interval
		// must cover as the others do.
		sw := slices.Clone(rows)
		for i := range sw {
			sw[i].Q = testWorld.m[xs[i]]
		}
		for _, e := range []Estimate{IPS(rows, 1.96), SNIPS(rows, 1.96), DR(rows, 1.96), Switch(sw, 5, 1.96)} {
			if e.Lo <= want && want <= e.Hi {
				cover[e.Estimator]++
			}
		}
	}
	for _, name := range []string{EstIPS, EstSNIPS, EstDR, EstSwitch} {
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
	bandit.SetDefaults(cfg)
	if err := bandit.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	greedy := *cfg
	greedy.Policy = bandit.PolicyConfig{Kind: bandit.Greedy}
	bandit.SetDefaults(&greedy)
	if err := bandit.Validate(&greedy); err != nil {
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
	if len(gr.Estimates) != 6 || gr.ESS <= 0 || gr.ESS > 200 || gr.UnsupportedMass == nil || *gr.UnsupportedMass != 0 || rep.Clip != DefaultClip || rep.SwitchTau != DefaultSwitchTau {
		t.Errorf("greedy: %d estimates, diagnostics %+v, clip %g, tau %g", len(gr.Estimates), gr.Diagnostics, rep.Clip, rep.SwitchTau)
	}

	rows[250].Mu = 0
	_, err = Evaluate(ctx, OPEConfig{Rows: rows, Arms: 2, Dim: 1, TrainFraction: 0.5, TrainEvery: 50, Level: 0.95, Seed: 1, Candidates: []Candidate{{Name: "logging"}}})
	if err == nil || !strings.Contains(err.Error(), "decision "+rows[250].EventID+": logged propensity 0") {
		t.Errorf("a zero propensity: err = %v, want it named", err)
	}
}

// Clipped IPS and switch against the closed form on one log of 20,000
// rows (testWorld, weights up to 10): clipped IPS with a cap above every
// weight is IPS to the bit and within 4 SE of the value; with a cap of 5
// it is the hand-computed mean of min(w, 5) r; switch at tau = +Inf
// (every arm supported) is IPS, at tau = 0 DM, and at tau = 5 with the
// true mean rewards as its model within 4 SE of the value (Wang et al.
// 2017: unbiased when the model is right on the switched arms).
func TestClippedIPSAndSwitchAgainstTheClosedForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	rows, xs := testWorld.log(20000, func(int) []float64 { return []float64{0, 0} }, rng)
	want, z := testWorld.value(), ZOfLevel(0.95)
	ips := IPS(rows, z)
	if c := ClippedIPS(rows, 100, z); c.Value != ips.Value || c.SE != ips.SE || c.Estimator != EstClippedIPS {
		t.Errorf("clipped IPS with cap 100 = %+v, want IPS %+v (no weight reaches 100)", c, ips)
	} else if math.Abs(c.Value-want) > 4*c.SE {
		t.Errorf("clipped IPS = %g ± %g, want within 4 SE of %g", c.Value, c.SE, want)
	}
	var hand float64
	for _, r := range rows {
		hand += min(r.Weight(), 5) * r.Reward / float64(len(rows))
	}
	if c := ClippedIPS(rows, 5, z); math.Abs(c.Value-hand) > 1e-12 || c.Value == ips.Value {
		t.Errorf("clipped IPS with cap 5 = %.15g, want the mean of min(w, 5) r = %.15g (and not IPS %g)", c.Value, hand, ips.Value)
	}
	if s := Switch(rows, math.Inf(1), z); math.Abs(s.Value-ips.Value) > 1e-12 {
		t.Errorf("switch at tau = +Inf = %.15g, want IPS %.15g", s.Value, ips.Value)
	}
	if s, dm := Switch(rows, 0, z), DM(rows, z); math.Abs(s.Value-dm.Value) > 1e-12 {
		t.Errorf("switch at tau = 0 = %.15g, want DM %.15g", s.Value, dm.Value)
	}
	for i := range rows {
		rows[i].Q = testWorld.m[xs[i]]
	}
	if s := Switch(rows, 5, z); math.Abs(s.Value-want) > 4*s.SE || !(s.SE > 0) {
		t.Errorf("switch at tau = 5 with the true model = %g ± %g, want within 4 SE of %g", s.Value, s.SE, want)
	}
	rows[0].MuAll = nil
	if s := Switch(rows, 5, z); !math.IsNaN(s.Value) || s.Reason == "" {
		t.Errorf("switch without every logged propensity = %+v, want NaN with a reason", s)
	}
}

// gapWorld is testWorld's contexts with a third arm that the logging
// policy never plays, as after PATCH add_arms: the candidate puts half
// its probability on it, so V(pi) = 0.5 (1.1) + 0.3 (0.9) + 0.2 (2.7) =
// 1.36, of which 0.5 (1) + 0.3 (0.5) + 0.2 (2) = 1.05 comes from the
// unplayed arm.
var gapWorld = opeWorld{
	px: []float64{0.5, 0.3, 0.2},
	m:  [][]float64{{1, 0, 2}, {0, 2, 1}, {-1, 3, 4}},
	mu: [][]float64{{0.8, 0.2, 0}, {0.5, 0.5, 0}, {0.9, 0.1, 0}},
	pi: [][]float64{{0.1, 0.4, 0.5}, {0.3, 0.2, 0.5}, {0.2, 0.3, 0.5}},
	sd: 1,
}

// On a log where the candidate has half its probability on an arm the
// logging policy never played (one added after the rows were logged),
// Diagnose reports unsupported mass 0.5, all of it on a new arm, with a
// warning (and one on the mean weight, about 0.5); IPS misses the arm's value by more than 10 of its standard
// errors, and switch with the true model recovers the value (within 4
// SE) by valuing that arm with the model.
func TestSupportGapIsReportedAndSwitchCoversIt(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	rows, xs := gapWorld.log(20000, nil, rng)
	for i := range rows {
		rows[i].Q = gapWorld.m[xs[i]]
		rows[i].LoggedArms = 2
	}
	d := Diagnose(rows)
	if d.UnsupportedMass == nil || math.Abs(*d.UnsupportedMass-0.5) > 1e-12 || math.Abs(*d.NewArmMass-0.5) > 1e-12 {
		t.Fatalf("unsupported %v, new arms %v; want 0.5 and 0.5", d.UnsupportedMass, d.NewArmMass)
	}
	// The mean weight sees the gap too: E[w] = 1 - 0.5.
	if len(d.Warnings) != 2 || !strings.Contains(d.Warnings[0], "the mean weight is 0.5") ||
		!strings.Contains(d.Warnings[1], "50.0% of the candidate's probability is on arms the logging policy could not choose") ||
		!strings.Contains(d.Warnings[1], "50.0% on arms added after") {
		t.Errorf("warnings %q, want one on the mean weight and one on the support naming the new arms", d.Warnings)
	}
	want, z := gapWorld.value(), ZOfLevel(0.95)
	if math.Abs(want-1.36) > 1e-12 {
		t.Fatalf("V(pi) = %.15g, want the closed form 1.36", want)
	}
	if ips := IPS(rows, z); math.Abs(ips.Value-want) < 10*ips.SE {
		t.Errorf("IPS = %g ± %g, within 10 SE of %g: the gap should bias it", ips.Value, ips.SE, want)
	}
	if s := Switch(rows, DefaultSwitchTau, z); math.Abs(s.Value-want) > 4*s.SE {
		t.Errorf("switch = %g ± %g, want within 4 SE of %g", s.Value, s.SE, want)
	}
}

// Diagnose's thresholds: the logging policy on its own log warns of
// nothing (ESS n, largest weight 1/n of the sum, no support gap); 999
// rows of weight 1 and one of weight 1,000 warn of ESS (4.0%% of the rows:
// (1999)²/(999 + 10⁶) = 3.99) and of the largest weight (50%% of the sum);
// a near-deterministic logger warns of the mean weight only; a log
// without every propensity warns that the support is unknown.
func TestDiagnoseWarnsOutOfRange(t *testing.T) {
	w := testWorld
	w.pi = w.mu
	rows, _ := w.log(1000, nil, rand.New(rand.NewPCG(17, 18)))
	if d := Diagnose(rows); len(d.Warnings) != 0 || math.Abs(d.ESSFraction-1) > 1e-12 || math.Abs(d.MaxWeightShare-1.0/1000) > 1e-12 || *d.UnsupportedMass != 0 {
		t.Errorf("the logging policy: %+v, want no warnings, ESS fraction 1, max share 0.001, no unsupported mass", d)
	}
	var heavy []OPERow
	for i := range 1000 {
		r := OPERow{Pi: []float64{0.5, 0.5}, Arm: 0, Mu: 0.5, Reward: 1, MuAll: []float64{0.5, 0.5}}
		if i == 0 {
			r.Pi, r.Mu, r.MuAll = []float64{1, 0}, 0.001, []float64{0.001, 0.999}
		}
		heavy = append(heavy, r)
	}
	d := Diagnose(heavy)
	if math.Abs(d.ESS-1999*1999/(999+1e6)) > 1e-9 || math.Abs(d.MaxWeightShare-1000.0/1999) > 1e-12 || len(d.Warnings) != 2 ||
		!strings.Contains(d.Warnings[0], "ESS 4 is 0.4% of the 1000 rows") || !strings.Contains(d.Warnings[1], "the largest weight 1e+03 is 50.0% of the sum") {
		t.Errorf("one heavy weight: %+v", d)
	}
	// A near-deterministic logger (its arm at 0.9999, the other at
	// 1e-4) and a uniform candidate: every weight is 0.5/0.9999, so ESS
	// is n and the largest weight 1/n of the sum, and only the mean
	// weight, 0.50005 with standard error 0 (to rounding), says that half of the
	// candidate's play is where the log has no rows.
	var det []OPERow
	for range 1000 {
		det = append(det, OPERow{Pi: []float64{0.5, 0.5}, Arm: 0, Mu: 0.9999, Reward: 1, MuAll: []float64{0.9999, 1e-4}})
	}
	if d := Diagnose(det); math.Abs(d.MeanWeight-0.5/0.9999) > 1e-12 || len(d.Warnings) != 1 || !strings.Contains(d.Warnings[0], "the mean weight is 0.5 ±") {
		t.Errorf("a near-deterministic logger: %+v, want one warning, on the mean weight", d)
	}
	heavy[3].MuAll = nil
	if d := Diagnose(heavy); d.UnsupportedMass != nil || !strings.Contains(strings.Join(d.Warnings, "; "), "support unknown") {
		t.Errorf("without every propensity: unsupported %v, warnings %q; want nil and a warning", d.UnsupportedMass, d.Warnings)
	}
}
