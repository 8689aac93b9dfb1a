package simulators

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// tinyPreset keeps the end-to-end test fast: an 8-unit network retrained
// every 10 steps for 20 iterations, 10 refinement iterations, 2 samples.
func tinyPreset() Preset {
	return Preset{
		Name:        "tiny",
		Description: "test preset",
		Bandit: bandit.Config{
			Policy:     bandit.PolicyConfig{Samples: 2, MaxSampleUses: 1},
			Model:      bandit.ModelConfig{Hidden: []int{8}},
			Training:   bandit.TrainingConfig{Iterations: 20, StopTolerance: new(float64)},
			Refinement: bandit.RefinementConfig{Fractions: []float64{0.7, 0.3}, Iterations: 10, BankSize: 2},
		},
		TrainEvery: 10,
		Epsilons:   []float64{0.1},
	}
}

func tinyConfig(t *testing.T) RunConfig {
	env, err := ParseEnv("mushroom", sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPreset()
	specs, err := ParsePolicies("uniform,linear-ts,greedy,eps-greedy,mf-ts,refined-ts", p)
	if err != nil {
		t.Fatal(err)
	}
	return RunConfig{Env: env, Policies: specs, Steps: 60, Seeds: 2, Preset: p, Every: 20}
}

// TestSimulateEndToEnd runs every policy for 60 steps on two seeds,
// writes the outputs and checks the files, the summary's fields and a
// golden summary (timings zeroed): same seeds, same regrets.
func TestSimulateEndToEnd(t *testing.T) {
	cfg := tinyConfig(t)
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	sum := Summarize(cfg, results)
	dir := t.TempDir()
	if err := WriteOutputs(dir, cfg, results, sum); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"regret.csv", "summary.json", "summary.md", "regret.png", "regret.svg"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (size %d)", f, err, st.Size())
		}
	}

	// summary.md names the preset in one line, once.
	md, err := os.ReadFile(filepath.Join(dir, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(md), "tiny"); got != 1 {
		t.Errorf("summary.md names the preset %d times, want once:\n%s", got, md)
	}
	if want := "Preset `tiny`: "; !strings.Contains(string(md), want) {
		t.Errorf("summary.md lacks %q:\n%s", want, md)
	}

	// regret.csv: header, then 3 points (steps 20, 40, 60) per run.
	fh, err := os.Open(filepath.Join(dir, "regret.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rows, err := csv.NewReader(fh).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := "step,policy,seed,cumulative_expected_regret,cumulative_realized_regret"
	if got := strings.Join(rows[0], ","); got != wantHeader {
		t.Errorf("regret.csv header = %q, want %q", got, wantHeader)
	}
	if got, want := len(rows)-1, len(cfg.Policies)*cfg.Seeds*3; got != want {
		t.Errorf("regret.csv has %d rows, want %d", got, want)
	}

	// summary.json round-trips and has every policy with both runs.
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got Summary
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Env != "mushroom" || got.Steps != 60 || got.Seeds != 2 || got.Preset.Name != "tiny" || got.Interrupted {
		t.Errorf("summary header = %+v", got)
	}
	names := map[string]bool{}
	for _, p := range got.Policies {
		names[p.Policy] = true
		if p.Runs != 2 || !(p.WallSeconds > 0) || !(p.StepsPerSecond > 0) {
			t.Errorf("policy %s: runs %d, wall %g s, %g steps/s; want 2 runs and positive timings", p.Policy, p.Runs, p.WallSeconds, p.StepsPerSecond)
		}
		if runtime.GOOS == "linux" && !(p.CPUSeconds > 0) {
			t.Errorf("policy %s: CPU %g s, want positive (thread CPU time on Linux)", p.Policy, p.CPUSeconds)
		}
		if p.ExpectedMean < 0 {
			t.Errorf("policy %s: negative mean expected regret %g", p.Policy, p.ExpectedMean)
		}
	}
	for _, want := range []string{"uniform", "linear-ts", "greedy", "eps-greedy-0.1", "mf-ts", "refined-ts"} {
		if !names[want] {
			t.Errorf("summary lacks policy %s", want)
		}
	}

	// Golden summary: everything but the timings.
	got.WallSeconds = 0
	for i := range got.Policies {
		got.Policies[i].WallSeconds = 0
		got.Policies[i].StepsPerSecond = 0
		got.Policies[i].CPUSeconds = 0
	}
	gb, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "golden_summary.json")
	if *update {
		if err := os.WriteFile(golden, append(gb, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(bytes.TrimSpace(gb), bytes.TrimSpace(want)) {
		t.Errorf("summary differs from %s (run with -update if the change is intended):\n%s", golden, gb)
	}
}

// TestSimulateInterrupted: a cancelled simulation returns the context's
// error, marks the summary interrupted and writes only completed runs.
func TestSimulateInterrupted(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Policies = cfg.Policies[:2] // uniform, linear-ts
	cfg.Steps = 50
	cfg.Workers = 1
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	results, err := Run(ctx, cfg)
	if err == nil {
		t.Fatal("Run on a cancelled context returned no error")
	}
	sum := Summarize(cfg, results)
	if !sum.Interrupted {
		t.Error("summary not marked interrupted")
	}
	for _, p := range sum.Policies {
		if p.Runs != 0 {
			t.Errorf("policy %s reports %d completed runs of a cancelled simulation", p.Policy, p.Runs)
		}
	}
	var md strings.Builder
	if err := WriteSummaryMarkdown(&md, sum); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(md.String(), "0.0 ± 0.0") || !strings.Contains(md.String(), "| uniform | 0 of 2 | missing |") {
		t.Errorf("a policy without a completed run is not marked missing:\n%s", md.String())
	}
	if got := seedsPlotted(sum); got != "no completed run" {
		t.Errorf("plot title says over %q", got)
	}
	if err := WriteOutputs(t.TempDir(), cfg, results, sum); err != nil {
		t.Fatal(err)
	}
}

func TestSeedsPlotted(t *testing.T) {
	for _, c := range []struct {
		runs []int
		want string
	}{
		{[]int{5, 5}, "5 seeds"},
		{[]int{1}, "1 seed"},
		{[]int{5, 2, 0}, "2 to 5 seeds per policy"},
		{[]int{0, 0}, "no completed run"},
	} {
		var sum Summary
		for _, n := range c.runs {
			sum.Policies = append(sum.Policies, PolicySummary{Runs: n})
		}
		if got := seedsPlotted(sum); got != c.want {
			t.Errorf("runs %v: %q, want %q", c.runs, got, c.want)
		}
	}
}

func TestParsePolicies(t *testing.T) {
	p := Presets()["fast"]
	specs, err := ParsePolicies("refined-ts, eps-greedy ,eps-greedy:0.2", p)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	if got, want := strings.Join(names, ","), "refined-ts,eps-greedy-0.01,eps-greedy-0.05,eps-greedy-0.2"; got != want {
		t.Errorf("names = %s, want %s", got, want)
	}
	specs, err = ParsePolicies("mf-ts@ngvi,refined-ts@collapsed-mean+ngvi,mf-ts", p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(specs); got != "[{mf-ts@ngvi mf-ts 0 [ngvi]  false <nil>} {refined-ts@collapsed-mean+ngvi refined-ts 0 [collapsed-mean ngvi]  false <nil>} {mf-ts mf-ts 0 []  false <nil>}]" {
		t.Errorf("specs = %s", got)
	}
	specs, err = ParsePolicies("laplace-ts,laplace-ts:last-layer,laplace-ts:diagonal", p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(specs); got != "[{laplace-ts laplace-ts 0 []  false <nil>} {laplace-ts-last-layer laplace-ts 0 [] last-layer false <nil>} {laplace-ts-diagonal laplace-ts 0 [] diagonal false <nil>}]" {
		t.Errorf("specs = %s", got)
	}
	env, err := ParseEnv("wheel", "")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := BanditConfig(specs[1], env, p); err != nil || c.Policy.Laplace != "last-layer" {
		t.Errorf("laplace-ts:last-layer plays policy.laplace %q (%v)", c.Policy.Laplace, err)
	}
	for _, bad := range []string{"", "nope", "mf-ts,mf-ts", "eps-greedy:2", "mf-ts:3", "eps-greedy:x", "laplace-ts:full", "flow-ts:last-layer", "laplace-ts:last-layer,laplace-ts:last-layer",
		"mf-ts@nope", "mf-ts@", "mf-ts@ngvi+", "greedy@ngvi", "eps-greedy:0.1@ngvi", "mf-ts@ngvi,mf-ts@ngvi"} {
		if _, err := ParsePolicies(bad, p); err == nil {
			t.Errorf("ParsePolicies(%q) = nil error, want one", bad)
		}
	}
}

// TestTrainingMethodsSetTheTrainingConfiguration: a policy's training
// methods set the fields they name on top of the preset, in order.
func TestTrainingMethodsSetTheTrainingConfiguration(t *testing.T) {
	env, err := ParseEnv("mushroom", sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	p := Presets()["fast"]
	p.Bandit.Training.Estimator = "weight-reparam" // as --estimator would
	for _, c := range []struct {
		policy    string
		estimator bandit.Estimator
		bound     bandit.Bound
		optimizer bandit.Optimizer
	}{
		{"mf-ts", "weight-reparam", bandit.DefaultBound, "adam"},
		{"mf-ts@elbo", "local-reparam", "elbo", "adam"},
		{"mf-ts@ris", "ris", "elbo", "adam"},
		{"mf-ts@collapsed-mean", "weight-reparam", "collapsed-mean", "adam"},
		{"refined-ts@collapsed-mean-var", "weight-reparam", "collapsed-mean-var", "adam"},
		{"mf-ts@ngvi", "weight-reparam", "elbo", "ngvi"},
		{"refined-ts@collapsed-mean+ngvi", "weight-reparam", "collapsed-mean", "ngvi"},
		{"mf-ts@ngvi+elbo", "local-reparam", "elbo", "adam"},
	} {
		specs, err := ParsePolicies(c.policy, p)
		if err != nil {
			t.Fatal(err)
		}
		bc, err := BanditConfig(specs[0], env, p)
		if err != nil {
			t.Fatal(err)
		}
		tr := bc.Training
		if tr.Estimator != c.estimator || tr.Bound != c.bound || tr.Optimizer != c.optimizer {
			t.Errorf("%s: estimator %s, bound %s, optimizer %s; want %s, %s, %s", c.policy, tr.Estimator, tr.Bound, tr.Optimizer, c.estimator, c.bound, c.optimizer)
		}
	}
}

// TestTrainingMethodsShareTheSeed: "mf-ts@collapsed-mean" is "mf-ts"
// under a preset of the defaults (collapsed-mean is the default bound),
// and decides exactly as it does on every seed (ServiceSeed ignores the
// methods); "mf-ts@ngvi" (on the ELBO) starts from the same seed and
// decides otherwise.
func TestTrainingMethodsShareTheSeed(t *testing.T) {
	env, err := ParseEnv("mushroom", sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPreset()
	specs, err := ParsePolicies("mf-ts,mf-ts@"+string(bandit.DefaultBound)+",mf-ts@ngvi", p)
	if err != nil {
		t.Fatal(err)
	}
	results, err := Run(context.Background(), RunConfig{Env: env, Policies: specs, Steps: 40, Seeds: 2, Preset: p, Every: 1, KeepDecisions: true})
	if err != nil {
		t.Fatal(err)
	}
	arms := func(r *RunResult) []int {
		var a []int
		for _, d := range r.Decisions {
			a = append(a, d.Arm)
		}
		return a
	}
	for s := range 2 {
		plain, elbo, ngvi := results[s], results[2+s], results[4+s]
		if !slices.Equal(arms(plain), arms(elbo)) || plain.Expected != elbo.Expected {
			t.Errorf("seed %d: mf-ts@%s chose %v (regret %g), mf-ts %v (regret %g); want the same", plain.Seed, bandit.DefaultBound, arms(elbo), elbo.Expected, arms(plain), plain.Expected)
		}
		if slices.Equal(arms(plain), arms(ngvi)) {
			t.Errorf("seed %d: mf-ts@ngvi chose the same arms as mf-ts in all 40 steps", plain.Seed)
		}
	}
}

// TestLockIn: a run locks into an arm when that arm took at least 99% of
// the decisions of its last 2,000 steps; Summarize counts such runs.
func TestLockIn(t *testing.T) {
	c := newArmCounter(5000, 2)
	for i := range 5000 {
		arm := 1
		if i < 3000 || i%200 == 0 { // 10 of the last 2,000 steps eat
			arm = 0
		}
		c.record(i, arm)
	}
	if arm, share := c.top(); arm != 1 || share != 0.995 {
		t.Errorf("top = arm %d, share %g; want arm 1, 0.995", arm, share)
	}
	short := newArmCounter(100, 2)
	for i := range 100 {
		short.record(i, i%2)
	}
	if _, share := short.top(); share != 0.5 {
		t.Errorf("a 100-step run: share %g, want 0.5 (all its steps counted)", share)
	}
	for _, c := range []struct {
		share  float64
		locked bool
	}{{0.995, true}, {0.99, true}, {0.9899, false}, {0.5, false}} {
		if got := (&RunResult{TopArmShare: c.share}).LockedIn(); got != c.locked {
			t.Errorf("LockedIn at share %g = %v, want %v", c.share, got, c.locked)
		}
	}
	env, err := ParseEnv("mushroom", sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := RunConfig{Env: env, Policies: []PolicySpec{{Name: "uniform", Kind: "uniform"}}, Steps: 10, Seeds: 3, Preset: tinyPreset()}
	results := []*RunResult{
		{Policy: "uniform", Seed: 1, Steps: 10, TopArmShare: 1},
		{Policy: "uniform", Seed: 2, Steps: 10, TopArmShare: 0.6},
		{Policy: "uniform", Seed: 3, Steps: 10, TopArmShare: 0.99},
	}
	ps := Summarize(cfg, results).Policies[0]
	if ps.LockedIn != 2 || !slices.Equal(ps.LockedInSeeds, []int{1, 3}) {
		t.Errorf("locked in: %d runs, seeds %v; want 2, [1 3]", ps.LockedIn, ps.LockedInSeeds)
	}
}

// TestRefinedTSSupply: refined-ts:supply is refined-ts with the service's
// sample supply (policy.max_sample_uses 1000, refinement.bank_size 16) and
// nothing else changed, on refined-ts's seed, and it decides on refined
// samples.
func TestRefinedTSSupply(t *testing.T) {
	cfg := tinyConfig(t)
	env, p := cfg.Env, cfg.Preset
	specs, err := ParsePolicies("refined-ts,refined-ts:supply", p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(specs); got != "[{refined-ts refined-ts 0 []  false <nil>} {refined-ts-supply refined-ts 0 []  true <nil>}]" {
		t.Errorf("specs = %s", got)
	}
	fresh, err := BanditConfig(specs[0], env, p)
	if err != nil {
		t.Fatal(err)
	}
	supply, err := BanditConfig(specs[1], env, p)
	if err != nil {
		t.Fatal(err)
	}
	if supply.Policy.MaxSampleUses != bandit.DefaultMaxSampleUses || supply.Refinement.BankSize != bandit.DefaultBankSize {
		t.Errorf("refined-ts:supply: max_sample_uses %d, bank_size %d; want the service's %d, %d",
			supply.Policy.MaxSampleUses, supply.Refinement.BankSize, bandit.DefaultMaxSampleUses, bandit.DefaultBankSize)
	}
	if fresh.Policy.MaxSampleUses != 1 || fresh.Refinement.BankSize != 2 {
		t.Errorf("refined-ts: max_sample_uses %d, bank_size %d; want the preset's 1, 2", fresh.Policy.MaxSampleUses, fresh.Refinement.BankSize)
	}
	supply.Policy.MaxSampleUses, supply.Refinement.BankSize = fresh.Policy.MaxSampleUses, fresh.Refinement.BankSize
	if !reflect.DeepEqual(fresh, supply) {
		t.Errorf("refined-ts:supply differs from refined-ts beyond the supply:\n%+v\n%+v", supply, fresh)
	}
	if a, b := ServiceSeed(3, specs[0].seedName()), ServiceSeed(3, specs[1].seedName()); a != b {
		t.Errorf("refined-ts-supply plays seed %#x, refined-ts %#x; want refined-ts's", b, a)
	}
	// Both decide on mean-field samples until the first training (after
	// TrainEvery rewards) publishes a posterior to refine, and on refined
	// samples from then on.
	results, err := Run(context.Background(), RunConfig{Env: env, Policies: specs, Steps: 30, Seeds: 1, Preset: p, Every: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := map[bandit.SampleKind]int{bandit.SampleMeanField: p.TrainEvery, bandit.SampleRefined: 30 - p.TrainEvery}
	for _, r := range results {
		if !r.Complete(30) || !maps.Equal(r.Samples, want) {
			t.Errorf("%s: %d steps (%v), samples %v; want %v", r.Policy, r.Steps, r.Err, r.Samples, want)
		}
	}
	for _, bad := range []string{"refined-ts:fresh", "refined-ts:supply@ngvi", "refined-ts:supply,refined-ts:supply"} {
		if _, err := ParsePolicies(bad, p); err == nil {
			t.Errorf("ParsePolicies(%q) = nil error, want one", bad)
		}
	}
}

// A policy with one run has no spread: the table says "-" where a
// standard deviation or error would be, not 0.0.
func TestOneRunHasNoSpread(t *testing.T) {
	sum := Summary{Env: "e", Steps: 10, Seeds: 1, FirstSeed: 1, Policies: []PolicySummary{{Policy: "uniform", Runs: 1, ExpectedMean: 12.5, RealizedMean: 13}}}
	var md strings.Builder
	if err := WriteSummaryMarkdown(&md, sum); err != nil {
		t.Fatal(err)
	}
	if want := "| uniform | 1 | 12.5 ± - | - | 13.0 ± - |"; !strings.Contains(md.String(), want) {
		t.Errorf("one-run row is not %q:\n%s", want, md.String())
	}
}

// TestSummarizeInterruptedRuns: a policy with completed runs is summarized
// over them, its interrupted runs listed beside; a policy whose runs were
// all interrupted is summarized over them at the last step all of them
// kept, and the outputs read back (Replot, Merge) agree.
func TestSummarizeInterruptedRuns(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Policies = cfg.Policies[:2] // uniform, linear-ts
	cfg.Steps = 100
	points := func(steps int, slope float64) []RegretPoint {
		var p []RegretPoint
		for s := 20; s <= steps; s += 20 {
			p = append(p, RegretPoint{Step: s, Expected: slope * float64(s), Realized: slope * float64(s)})
		}
		if steps%20 != 0 {
			p = append(p, RegretPoint{Step: steps, Expected: slope * float64(steps), Realized: slope * float64(steps)})
		}
		return p
	}
	run := func(policy string, seed, steps int, slope float64, err error) *RunResult {
		p := points(steps, slope)
		return &RunResult{Policy: policy, Seed: seed, Steps: steps, Points: p, Expected: p[len(p)-1].Expected, Realized: p[len(p)-1].Realized, Err: err}
	}
	results := []*RunResult{
		run("uniform", 1, 100, 1, nil),
		run("uniform", 2, 47, 1, context.Canceled),
		run("linear-ts", 1, 73, 0.5, context.Canceled),
		run("linear-ts", 2, 55, 0.25, fmt.Errorf("decide: %w", context.Canceled)),
	}
	sum := Summarize(cfg, results)
	if !sum.Interrupted || len(sum.Errors) > 0 {
		t.Fatalf("interrupted %v, errors %q; want interrupted without errors", sum.Interrupted, sum.Errors)
	}
	u, l := sum.Policies[0], sum.Policies[1]
	if u.Runs != 1 || u.AtStep != 0 || u.ExpectedMean != 100 || len(u.InterruptedRuns) != 1 || u.InterruptedRuns[0] != (InterruptedRun{Seed: 2, Steps: 47, Expected: 47, Realized: 47}) {
		t.Errorf("uniform: %d runs at step %d, mean %g, interrupted %+v; want its completed run (100) and seed 2 at step 47", u.Runs, u.AtStep, u.ExpectedMean, u.InterruptedRuns)
	}
	// Seeds 1 and 2 of linear-ts both kept step 40 (not 55: seed 1
	// kept 60, not 55).
	if want := (0.5*40 + 0.25*40) / 2; l.Runs != 2 || l.AtStep != 40 || l.ExpectedMean != want {
		t.Errorf("linear-ts: %d runs at step %d, mean %g; want 2 at step 40, mean %g", l.Runs, l.AtStep, l.ExpectedMean, want)
	}
	if lo, hi := sum.InterruptedSteps(); lo != 47 || hi != 73 {
		t.Errorf("InterruptedSteps() = %d, %d, want 47, 73", lo, hi)
	}
	var md strings.Builder
	if err := WriteSummaryMarkdown(&md, sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**Interrupted** at steps 47 to 73 of 100", "| linear-ts | 2, interrupted at step 40 |", "- uniform seed 2 at step 47 of 100: expected regret 47.0, realized 47.0 (not in the table"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("summary.md has no %q:\n%s", want, md.String())
		}
	}
	dir := t.TempDir()
	if err := WriteOutputs(dir, cfg, results, sum); err != nil {
		t.Fatal(err)
	}
	back, runs, err := ReadOutputs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 4 {
		t.Errorf("regret.csv holds %d runs, want all 4 (steps done)", len(runs))
	}
	if again := Summarize(plotConfigEnv(back, cfg), runs); again.Policies[1].AtStep != 40 || again.Policies[1].ExpectedMean != l.ExpectedMean {
		t.Errorf("read back, linear-ts is at step %d, mean %g", again.Policies[1].AtStep, again.Policies[1].ExpectedMean)
	}
	if err := Replot(dir); err != nil {
		t.Fatal(err)
	}
	// A merge takes the completed run only, and says what it left out.
	merged, mruns, err := Merge([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(mruns) != 1 || len(merged.Policies) != 1 || merged.Policies[0].Runs != 1 || len(merged.Notes) != 3 {
		t.Errorf("merge of an interrupted simulation: %d runs, policies %+v, notes %q; want uniform's completed run and 3 notes", len(mruns), merged.Policies, merged.Notes)
	}
}

// plotConfigEnv is plotConfig(sum) with cfg's environment, for Summarize.
func plotConfigEnv(sum Summary, cfg RunConfig) RunConfig {
	c := plotConfig(sum)
	c.Env, c.Preset = cfg.Env, cfg.Preset
	return c
}

// regret.png's axes carry round ticks: at least four labels on the y
// axis, none with decimals on counts (gonum's default gave two, "0.00"
// and "2500.00"; issue 30, polish).
func TestRegretPlotTicks(t *testing.T) {
	for _, c := range []struct {
		name   string
		r      roundTicks
		lo, hi float64
		want   []string
	}{
		{"regret up to 2,625", roundTicks{}, 0, 2625, []string{"0", "500", "1000", "1500", "2000", "2500"}},
		{"steps 6 to 3,000", roundTicks{integer: true}, 6, 3000, []string{"1000", "2000", "3000"}},
		{"regret up to 11,800", roundTicks{}, 0, 11800, []string{"0", "2k", "4k", "6k", "8k", "10k"}},
		{"regret up to 1.6", roundTicks{}, 0, 1.6, []string{"0", "0.5", "1.0", "1.5"}},
	} {
		var got []string
		for _, tk := range c.r.Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: labels %q, want %q", c.name, got, c.want)
		}
	}
}

// TestAtEnd: RunConfig.AtEnd gets each run's bandit once, after its last
// step, while the bandit still decides; its error fails that run only.
func TestAtEnd(t *testing.T) {
	env, err := ParseEnv("mushroom", sharedMushroom(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[int]int{}
	cfg := RunConfig{Env: env, Policies: []PolicySpec{{Name: "linear-ts", Kind: "linear-ts"}}, Steps: 30, Seeds: 3, Preset: tinyPreset(), Workers: 2,
		AtEnd: func(ctx context.Context, r *RunResult, agent *bandit.Agent) error {
			mu.Lock()
			seen[r.Seed] = r.Steps
			mu.Unlock()
			x, _ := env.(*Mushroom).At(0)
			raw, err := bandit.NewEncoder(agent.Config().Features).Decode(x)
			if err != nil {
				return err
			}
			if _, err := agent.Decide(ctx, bandit.DecideRequest{EventID: "probe", Context: raw}); err != nil {
				return err
			}
			if r.Seed == 2 {
				return errors.New("probe failed")
			}
			return nil
		}}
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || seen[1] != 30 || seen[2] != 30 || seen[3] != 30 {
		t.Errorf("AtEnd saw runs %v (seed: steps), want seeds 1-3 at 30 steps each", seen)
	}
	for _, r := range results {
		if failed := r.Err != nil; failed != (r.Seed == 2) {
			t.Errorf("seed %d: err %v; want an error for seed 2 only", r.Seed, r.Err)
		}
	}
	if r := results[1]; r.Err == nil || !strings.Contains(r.Err.Error(), "probe failed") {
		t.Errorf("seed 2's error %v does not carry AtEnd's", r.Err)
	}
}
