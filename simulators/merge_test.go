package simulators

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// simulateInto runs cfg with the given policies and seeds and writes its
// outputs into a new directory, as `refinery simulate --out` does.
func simulateInto(t *testing.T, cfg RunConfig, policies []PolicySpec, first, seeds int) string {
	t.Helper()
	cfg.Policies, cfg.FirstSeed, cfg.Seeds = policies, first, seeds
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := WriteOutputs(dir, cfg, results, Summarize(cfg, results)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMergeIsTheSimulationOfAllRuns: seeds 1-2 of some policies, seed 3
// of them and seeds 1-3 of another, simulated apart and merged, give the
// summary and regret.csv of one simulation of all of them (timings
// aside, which are the sources' sums).
func TestMergeIsTheSimulationOfAllRuns(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Steps, cfg.Workers = 40, 1
	all := slices.DeleteFunc(slices.Clone(cfg.Policies), func(p PolicySpec) bool { return p.Name == "refined-ts" })
	first, last := all[:len(all)-1], all[len(all)-1:]

	want := simulateInto(t, cfg, all, 1, 3)
	a := simulateInto(t, cfg, first, 1, 2)
	b := simulateInto(t, cfg, first, 3, 1)
	c := simulateInto(t, cfg, last, 1, 3)

	sum, results, err := Merge([]string{a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := WriteMerged(out, sum, results); err != nil {
		t.Fatal(err)
	}
	wantSum, _, err := ReadOutputs(want)
	if err != nil {
		t.Fatal(err)
	}
	gotSum, _, err := ReadOutputs(out)
	if err != nil {
		t.Fatal(err)
	}
	if gotSum.Env != wantSum.Env || gotSum.Steps != wantSum.Steps || gotSum.Seeds != 3 || gotSum.FirstSeed != 1 || gotSum.SeedList != nil || len(gotSum.Sources) != 3 {
		t.Errorf("merged header: env %s, %d steps, seeds %d from %d (list %v), %d sources; want %s, %d, 3 from 1, no list, 3 sources",
			gotSum.Env, gotSum.Steps, gotSum.Seeds, gotSum.FirstSeed, gotSum.SeedList, len(gotSum.Sources), wantSum.Env, wantSum.Steps)
	}
	if len(gotSum.Policies) != len(wantSum.Policies) {
		t.Fatalf("merged %d policies, want %d", len(gotSum.Policies), len(wantSum.Policies))
	}
	for i, w := range wantSum.Policies {
		g := gotSum.Policies[i]
		if g.Policy != w.Policy || g.Runs != w.Runs || g.ExpectedMean != w.ExpectedMean || g.RealizedMean != w.RealizedMean ||
			g.LockedIn != w.LockedIn || !slices.Equal(g.LockedInSeeds, w.LockedInSeeds) || g.TrainEvery != w.TrainEvery {
			t.Errorf("policy %d: merged %+v\nwant %+v", i, g, w)
		}
		for _, d := range [][2]float64{{g.ExpectedStd, w.ExpectedStd}, {g.ExpectedSE, w.ExpectedSE}, {g.RealizedStd, w.RealizedStd}} {
			if math.Abs(d[0]-d[1]) > 1e-9*(1+math.Abs(d[1])) {
				t.Errorf("%s: merged spread %g, want %g", w.Policy, d[0], d[1])
			}
		}
		for k, share := range w.Samples {
			if math.Abs(g.Samples[k]-share) > 1e-12 {
				t.Errorf("%s: %s share %g, want %g", w.Policy, k, g.Samples[k], share)
			}
		}
		if !(g.CPUSeconds > 0) || !(g.StepsPerSecond > 0) {
			t.Errorf("%s: merged CPU %g s, %g steps/s; want the sources' positive figures", g.Policy, g.CPUSeconds, g.StepsPerSecond)
		}
	}
	// regret.csv: the same lines (the merge orders runs by policy, then
	// seed, as one simulation does).
	gotCSV, err := os.ReadFile(filepath.Join(out, "regret.csv"))
	if err != nil {
		t.Fatal(err)
	}
	wantCSV, err := os.ReadFile(filepath.Join(want, "regret.csv"))
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := strings.Split(string(gotCSV), "\n"), strings.Split(string(wantCSV), "\n")
	slices.Sort(gl)
	slices.Sort(wl)
	if !slices.Equal(gl, wl) {
		t.Errorf("merged regret.csv differs from one simulation's:\n%s\nwant\n%s", gotCSV, wantCSV)
	}
	// A merge of merges is the same merge; Replot reads its outputs.
	again, _, err := Merge([]string{out})
	if err != nil {
		t.Fatal(err)
	}
	if again.Policies[0].ExpectedMean != sum.Policies[0].ExpectedMean || again.Seeds != 3 {
		t.Errorf("merging a merged output changed it: %+v", again.Policies[0])
	}
	if err := Replot(out); err != nil {
		t.Fatal(err)
	}
}

// TestMergeRefuses: the same run twice, another step count or another
// environment are errors naming the directories; seeds that are not a
// range are listed.
func TestMergeRefuses(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Steps, cfg.Workers = 20, 1
	pol := cfg.Policies[:1] // uniform
	s1 := simulateInto(t, cfg, pol, 1, 1)
	s3 := simulateInto(t, cfg, pol, 3, 1)
	long := cfg
	long.Steps = 40
	l1 := simulateInto(t, long, pol, 2, 1)
	wheel, err := ParseEnv("wheel", "")
	if err != nil {
		t.Fatal(err)
	}
	other := cfg
	other.Env = wheel
	w1 := simulateInto(t, other, pol, 2, 1)

	for _, c := range []struct {
		dirs []string
		want string
	}{
		{[]string{s1, s1}, "uniform seed 1 is in both " + s1 + " and " + s1},
		{[]string{s1, l1}, l1 + " has 40 steps"},
		{[]string{s1, w1}, "is env wheel"},
		{nil, "no directories"},
		{[]string{s1, filepath.Join(s1, "missing")}, "no such file"},
	} {
		if _, _, err := Merge(c.dirs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Merge(%v) = %v, want an error containing %q", c.dirs, err, c.want)
		}
	}

	// DIR:POLICY takes one policy: seed 1 of linear-ts from a directory
	// that holds uniform too, beside seed 1 of uniform from another.
	two := simulateInto(t, cfg, cfg.Policies[:2], 1, 1) // uniform, linear-ts
	if sum, _, err := Merge([]string{two + ":linear-ts", s1}); err != nil || len(sum.Policies) != 2 || sum.Policies[0].Policy != "linear-ts" || sum.Policies[1].Runs != 1 {
		t.Errorf("Merge(two:linear-ts, s1) = %+v, %v", sum.Policies, err)
	}
	if _, _, err := Merge([]string{two, s1}); err == nil {
		t.Error("uniform seed 1 from two directories merged")
	}
	// An interruption of another policy's run in DIR is not DIR:POLICY's.
	b, err := os.ReadFile(filepath.Join(two, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["interrupted"], raw["errors"] = true, []string{"uniform seed 2: 7/20 steps: context canceled"}
	if b, err = json.Marshal(raw); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(two, "summary.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if sum, _, err := Merge([]string{two + ":linear-ts"}); err != nil || sum.Interrupted || len(sum.Errors) != 0 {
		t.Errorf("two:linear-ts, uniform interrupted: interrupted %v, errors %q (%v); want neither", sum.Interrupted, sum.Errors, err)
	}
	if sum, _, err := Merge([]string{two + ":uniform"}); err != nil || !sum.Interrupted || len(sum.Errors) != 1 {
		t.Errorf("two:uniform, uniform interrupted: interrupted %v, errors %q (%v); want both", sum.Interrupted, sum.Errors, err)
	}

	sum, _, err := Merge([]string{s1, s3})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Seeds != 2 || !slices.Equal(sum.SeedList, []int{1, 3}) || sum.Policies[0].Runs != 2 {
		t.Errorf("seeds 1 and 3 merged: %d seeds, list %v, %d runs", sum.Seeds, sum.SeedList, sum.Policies[0].Runs)
	}
	var md strings.Builder
	if err := WriteSummaryMarkdown(&md, sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "2 seeds (1, 3)") || !strings.Contains(md.String(), "Merged from:") {
		t.Errorf("summary.md of a merge:\n%s", md.String())
	}
}
