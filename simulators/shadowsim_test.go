package simulators

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestShadowCandidateCountsItsOwnRegret runs mf-ts as the candidate of
// greedy and of linear TS (RunConfig.Shadow) on the wheel and checks,
// against the environment replayed from the run's seed, that each run's
// ShadowExpected is the expected regret of the candidate's logged
// choices (ShadowArm) at the run's own contexts; that the candidate does
// not change the live policy's play (the same regrets as without it);
// that the summary's paired difference is the mean of the per-run
// differences; and that the figures survive writing, reading back and
// merging.
func TestShadowCandidateCountsItsOwnRegret(t *testing.T) {
	env, err := ParseEnv("wheel:delta=0.5", "")
	if err != nil {
		t.Fatal(err)
	}
	p := tinyPreset()
	specs, err := ParsePolicies("greedy,linear-ts", p)
	if err != nil {
		t.Fatal(err)
	}
	cand, err := ParsePolicies("mf-ts", p)
	if err != nil {
		t.Fatal(err)
	}
	cfg := RunConfig{Env: env, Policies: specs, Steps: 80, Seeds: 2, Preset: p, Every: 20, KeepDecisions: true, Workers: 2}
	plain, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Shadow = &cand[0]
	results, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		if r.Err != nil {
			t.Fatalf("%s seed %d: %v", r.Policy, r.Seed, r.Err)
		}
		if r.Expected != plain[i].Expected || !reflect.DeepEqual(r.Points, plain[i].Points) {
			t.Errorf("%s seed %d: regret %g with the candidate, %g without: the candidate changed the live play", r.Policy, r.Seed, r.Expected, plain[i].Expected)
		}
		if r.ShadowDecisions != cfg.Steps {
			t.Fatalf("%s seed %d: the candidate chose at %d of %d decisions", r.Policy, r.Seed, r.ShadowDecisions, cfg.Steps)
		}
		// Replay the run's contexts and score the logged choices.
		rng := rand.New(rand.NewPCG(uint64(r.Seed), envStream))
		var want float64
		differ := false
		for k, d := range r.Decisions {
			st := env.Next(rng)
			e, _ := st.Regret(d.ShadowArm)
			want += e
			differ = differ || d.ShadowArm != d.Arm
			if d.ShadowPropensities == nil || math.Abs(total(d.ShadowPropensities)-1) > 1e-9 {
				t.Fatalf("%s seed %d decision %d: candidate's probabilities %v", r.Policy, r.Seed, k, d.ShadowPropensities)
			}
		}
		if math.Abs(r.ShadowExpected-want) > 1e-9*math.Max(1, want) {
			t.Errorf("%s seed %d: ShadowExpected %g, the replayed choices' regret %g", r.Policy, r.Seed, r.ShadowExpected, want)
		}
		if !differ {
			t.Errorf("%s seed %d: the candidate chose the live arm at every decision; the test shows nothing", r.Policy, r.Seed)
		}
	}
	sum := Summarize(cfg, results)
	if sum.Shadow != "mf-ts" {
		t.Errorf("Summary.Shadow %q, want mf-ts", sum.Shadow)
	}
	for _, ps := range sum.Policies {
		sh := ps.Shadow
		if sh == nil || sh.Candidate != "mf-ts" || len(sh.Runs) != 2 || sh.DiffMean == nil {
			t.Fatalf("%s: shadow summary %+v", ps.Policy, sh)
		}
		var d, e float64
		for _, r := range results {
			if r.Policy == ps.Policy {
				d += (r.ShadowExpected - r.Expected) / 2
				e += r.ShadowExpected / 2
			}
		}
		if math.Abs(*sh.DiffMean-d) > 1e-9 || math.Abs(sh.ExpectedMean-e) > 1e-9 {
			t.Errorf("%s: paired difference %g and mean %g, want %g and %g", ps.Policy, *sh.DiffMean, sh.ExpectedMean, d, e)
		}
	}
	var md strings.Builder
	if err := WriteSummaryMarkdown(&md, sum); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| greedy | mf-ts | 2 |") {
		t.Errorf("summary.md has no candidate row for greedy:\n%s", md.String())
	}
	// Written, read back and merged (the two seeds from two directories).
	dir := t.TempDir()
	var dirs []string
	for seed := 1; seed <= 2; seed++ {
		var part []*RunResult
		for _, r := range results {
			if r.Seed == seed {
				part = append(part, r)
			}
		}
		c := cfg
		c.Seeds, c.FirstSeed = 1, seed
		d := filepath.Join(dir, "seed"+string(rune('0'+seed)))
		if err := WriteOutputs(d, c, part, Summarize(c, part)); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	merged, _, err := Merge(dirs)
	if err != nil {
		t.Fatal(err)
	}
	for i, ps := range merged.Policies {
		if !reflect.DeepEqual(ps.Shadow, sum.Policies[i].Shadow) {
			t.Errorf("%s: merged shadow %+v, want %+v", ps.Policy, ps.Shadow, sum.Policies[i].Shadow)
		}
	}
	if merged.Shadow != "mf-ts" {
		t.Errorf("merged Summary.Shadow %q", merged.Shadow)
	}
	// Runs without the candidate do not merge with runs that had it.
	var plain2 []*RunResult
	for _, r := range plain {
		if r.Seed == 2 {
			plain2 = append(plain2, r)
		}
	}
	c := cfg
	c.Shadow, c.Seeds, c.FirstSeed = nil, 1, 2
	bare := filepath.Join(dir, "bare")
	if err := WriteOutputs(bare, c, plain2, Summarize(c, plain2)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Merge([]string{dirs[0], bare}); err == nil || !strings.Contains(err.Error(), "merge runs of one candidate") {
		t.Errorf("merging runs with and without a candidate: %v, want a refusal", err)
	}
}

func total(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s
}
