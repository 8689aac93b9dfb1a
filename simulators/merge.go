package simulators

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/plural"
)

// Source is one simulation that a merged summary was made from.
type Source struct {
	// Dir is the directory its outputs were read from.
	Dir string `json:"dir"`
	// Runs says which runs it gave ("refined-ts@ris seeds 3, 4").
	Runs    string `json:"runs"`
	Command string `json:"command,omitempty"`
	Version string `json:"version,omitempty"`
}

// Merge combines the outputs of simulations of one environment, number of
// steps and preset, written to dirs by `refinery simulate --out` (or by an
// earlier Merge; "DIR:POLICY" takes only that policy's runs of DIR), into
// one summary and one list of runs, as if one
// simulation had run them all: the way to finish a long comparison over
// several sessions (`--first-seed`) or to add policies to one. Each
// policy's final regrets, standard errors and lock-ins are computed again
// over all its runs; its wall and CPU seconds are the sources' sums and
// its sample shares their run-weighted mean.
//
// A run (policy and seed) may come from one source only: two runs of one
// seed are two results, and which one counts is the caller's choice, not
// Merge's. Sources of another environment, step count, preset, retraining
// schedule or reward delay are refused. Where a policy's bandit
// configuration differs between sources (a default that changed between
// commits, say), the first source's is kept and a note says so.
func Merge(dirs []string) (Summary, []*RunResult, error) {
	if len(dirs) == 0 {
		return Summary{}, nil, fmt.Errorf("merge: no directories")
	}
	type acc struct {
		ps       PolicySummary
		decided  float64
		bandit   []byte
		from     string
		runs     []*RunResult
		lockedIn map[int]bool
		// candidate names the shadow of the policy's runs, "" for none.
		candidate string
	}
	var (
		out    Summary
		order  []string
		byName = map[string]*acc{}
		owner  = map[string]string{} // policy\x00seed -> dir
		seeds  = map[int]bool{}
	)
	wallOf := map[string]bool{}
	for i, spec := range dirs {
		dir, only := spec, ""
		if k := strings.LastIndexByte(spec, ':'); k >= 0 {
			dir, only = spec[:k], spec[k+1:]
		}
		sum, results, err := ReadOutputs(dir)
		if err != nil {
			return Summary{}, nil, fmt.Errorf("merge: %w", err)
		}
		if only != "" {
			var names []string
			sum.Policies = slices.DeleteFunc(sum.Policies, func(p PolicySummary) bool {
				names = append(names, p.Policy)
				return p.Policy != only
			})
			if len(sum.Policies) == 0 {
				return Summary{}, nil, fmt.Errorf("merge: %s has no policy %s (it has %s)", dir, only, strings.Join(names, ", "))
			}
			results = slices.DeleteFunc(results, func(r *RunResult) bool { return r.Policy != only })
		}
		if i == 0 {
			out = Summary{Env: sum.Env, Steps: sum.Steps, Preset: sum.Preset}
		} else {
			switch {
			case sum.Env != out.Env:
				return Summary{}, nil, fmt.Errorf("merge: %s is env %s, %s is env %s", dir, sum.Env, dirs[0], out.Env)
			case sum.Steps != out.Steps:
				return Summary{}, nil, fmt.Errorf("merge: %s has %d steps, %s has %d", dir, sum.Steps, dirs[0], out.Steps)
			case sum.Preset.Name != out.Preset.Name:
				return Summary{}, nil, fmt.Errorf("merge: %s has preset %s, %s has %s", dir, sum.Preset.Name, dirs[0], out.Preset.Name)
			}
		}
		if out.Shadow == "" {
			out.Shadow = sum.Shadow
		}
		if !wallOf[dir] {
			wallOf[dir] = true
			out.WallSeconds += sum.WallSeconds
		}
		errs := sum.Errors
		if only != "" {
			// Another policy's failed or interrupted runs are not this
			// one's: a directory can give a policy it completed.
			errs = slices.DeleteFunc(slices.Clone(errs), func(e string) bool { return !strings.HasPrefix(e, only+" seed ") })
			sum.Interrupted = sum.Interrupted && (len(errs) > 0 || len(sum.Policies[0].InterruptedRuns) > 0)
		}
		out.Interrupted = out.Interrupted || sum.Interrupted
		for _, e := range errs {
			out.Errors = append(out.Errors, dir+": "+e)
		}
		runsOf := map[string][]int{}
		for _, r := range results {
			key := fmt.Sprintf("%s\x00%d", r.Policy, r.Seed)
			if prev, ok := owner[key]; ok {
				return Summary{}, nil, fmt.Errorf("merge: %s seed %d is in both %s and %s; merge one of them (DIR:POLICY takes one policy of a directory)", r.Policy, r.Seed, prev, dir)
			}
			owner[key] = dir
			if r.Steps < sum.Steps && sum.Interrupted {
				// A run an interrupt cut short is no run of sum.Steps.
				out.Notes = append(out.Notes, fmt.Sprintf("%s seed %d of %s was interrupted at step %d of %d and is left out", r.Policy, r.Seed, dir, r.Steps, sum.Steps))
				continue
			}
			if r.Steps != sum.Steps {
				return Summary{}, nil, fmt.Errorf("merge: %s: %s seed %d ends at step %d of %d", dir, r.Policy, r.Seed, r.Steps, sum.Steps)
			}
			runsOf[r.Policy] = append(runsOf[r.Policy], r.Seed)
			seeds[r.Seed] = true
		}
		src := Source{Dir: spec, Command: sum.Command, Version: sum.Version}
		var described []string
		for _, p := range sum.Policies {
			got := runsOf[p.Policy]
			if p.AtStep > 0 {
				// Its runs were all interrupted (left out above).
				p.Runs = 0
			}
			if len(got) != p.Runs {
				return Summary{}, nil, fmt.Errorf("merge: %s: summary.json counts %d runs of %s, regret.csv has %d", dir, p.Runs, p.Policy, len(got))
			}
			if p.Runs == 0 {
				continue
			}
			described = append(described, fmt.Sprintf("%s %s %s", p.Policy, plural.Word(len(got), "seed", "seeds"), joinInts(got)))
			cand := ""
			if p.Shadow != nil {
				cand = p.Shadow.Candidate
			}
			a := byName[p.Policy]
			bj, _ := json.Marshal(p.Bandit)
			if a == nil {
				a = &acc{
					ps:        PolicySummary{Policy: p.Policy, Bandit: p.Bandit, TrainEvery: p.TrainEvery, RewardDelay: p.RewardDelay},
					bandit:    bj,
					from:      dir,
					lockedIn:  map[int]bool{},
					candidate: cand,
				}
				byName[p.Policy] = a
				order = append(order, p.Policy)
			} else {
				switch {
				case p.TrainEvery != a.ps.TrainEvery:
					return Summary{}, nil, fmt.Errorf("merge: %s retrains %s every %d rewards, %s every %d", dir, p.Policy, p.TrainEvery, a.from, a.ps.TrainEvery)
				case p.RewardDelay != a.ps.RewardDelay:
					return Summary{}, nil, fmt.Errorf("merge: %s delays %s's rewards by %d steps, %s by %d", dir, p.Policy, p.RewardDelay, a.from, a.ps.RewardDelay)
				case cand != a.candidate:
					return Summary{}, nil, fmt.Errorf("merge: %s's runs in %s have candidate %q, in %s %q; merge runs of one candidate", p.Policy, dir, cand, a.from, a.candidate)
				case string(bj) != string(a.bandit):
					out.Notes = append(out.Notes, fmt.Sprintf("%s's bandit configuration in %s differs from %s's; the summary shows %s's", p.Policy, dir, a.from, a.from))
				}
			}
			a.ps.WallSeconds += p.WallSeconds
			a.ps.CPUSeconds += p.CPUSeconds
			for k, share := range p.Samples {
				if a.ps.Samples == nil {
					a.ps.Samples = map[bandit.SampleKind]float64{}
				}
				a.ps.Samples[k] += share * float64(p.Runs)
			}
			a.decided += float64(p.Runs)
			for _, s := range p.LockedInSeeds {
				a.lockedIn[s] = true
			}
		}
		for _, r := range results {
			if r.Steps == sum.Steps {
				byName[r.Policy].runs = append(byName[r.Policy].runs, r)
			}
		}
		src.Runs = strings.Join(described, "; ")
		out.Sources = append(out.Sources, src)
	}

	var all []*RunResult
	for _, name := range order {
		a := byName[name]
		slices.SortFunc(a.runs, func(x, y *RunResult) int { return x.Seed - y.Seed })
		var exp, real []float64
		for _, r := range a.runs {
			exp = append(exp, r.Expected)
			real = append(real, r.Realized)
			if a.lockedIn[r.Seed] {
				a.ps.LockedIn++
				a.ps.LockedInSeeds = append(a.ps.LockedInSeeds, r.Seed)
			}
		}
		ps := &a.ps
		ps.Runs = len(a.runs)
		ps.ExpectedMean, ps.ExpectedStd = meanStd(exp)
		ps.RealizedMean, ps.RealizedStd = meanStd(real)
		ps.ExpectedSE = ps.ExpectedStd / math.Sqrt(float64(ps.Runs))
		if ps.WallSeconds > 0 {
			ps.StepsPerSecond = float64(ps.Runs*out.Steps) / ps.WallSeconds
		}
		for k := range ps.Samples {
			ps.Samples[k] /= a.decided
		}
		if a.candidate != "" {
			ps.Shadow = summarizeShadow(a.candidate, a.runs, out.Steps)
		}
		out.Policies = append(out.Policies, *ps)
		all = append(all, a.runs...)
	}
	list := make([]int, 0, len(seeds))
	for s := range seeds {
		list = append(list, s)
	}
	slices.Sort(list)
	if len(list) > 0 {
		out.FirstSeed, out.Seeds = list[0], len(list)
		if list[len(list)-1]-list[0] != len(list)-1 {
			out.SeedList = list
		}
	}
	return out, all, nil
}

// WriteMerged writes a merged summary and its runs to dir as a simulation
// would: regret.csv, summary.json, summary.md, regret.png and regret.svg.
func WriteMerged(dir string, sum Summary, results []*RunResult) error {
	return WriteOutputs(dir, plotConfig(sum), results, sum)
}
