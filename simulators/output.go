package simulators

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/plural"
	"github.com/refinery-bandits/refinery/internal/ticks"
)

// Summary describes a simulation: its configuration and, per policy, the
// final cumulative regret over the completed runs.
type Summary struct {
	Env   string `json:"env"`
	Steps int    `json:"steps"`
	Seeds int    `json:"seeds"`
	// FirstSeed is the first of the seeds.
	FirstSeed int    `json:"first_seed"`
	Preset    Preset `json:"preset"`
	// BanditConfig names the file of simulate --bandit-config when the
	// runs played that configuration instead of the preset's (which then
	// gives only the retraining schedule).
	BanditConfig string `json:"bandit_config,omitempty"`
	// Shadow names the candidate every bandit ran beside its policy
	// (simulate --shadow), empty without one.
	Shadow   string          `json:"shadow,omitempty"`
	Policies []PolicySummary `json:"policies"`
	// WallSeconds is the wall time of the whole simulation.
	WallSeconds float64 `json:"wall_seconds"`
	// Command is the command line that produced the results.
	Command string `json:"command,omitempty"`
	// Version is the binary's version and kernel level ("refinery
	// 4a22cbd (kernels: avx2)"): a seed replays bit for bit only on the
	// same commit and kernel level (Sgemm's accumulation order is the
	// level's own).
	Version string `json:"version,omitempty"`
	// SeedList, when set, lists the seeds of a merged summary whose seeds
	// are not the range FirstSeed .. FirstSeed+Seeds-1 (Merge).
	SeedList []int `json:"seed_list,omitempty"`
	// Sources are the simulations a merged summary was made from (Merge).
	Sources []Source `json:"sources,omitempty"`
	// Notes are what a merge found worth saying (Merge).
	Notes []string `json:"notes,omitempty"`
	// Interrupted is set when the simulation was stopped early; only
	// completed runs are summarized.
	Interrupted bool     `json:"interrupted"`
	Errors      []string `json:"errors,omitempty"`
}

// PolicySummary aggregates the runs of one policy: its completed runs,
// or, when an interrupt left it none, the runs it cut short, at the last
// step they all reached (AtStep).
type PolicySummary struct {
	Policy string `json:"policy"`
	// Runs is the number of runs (seeds) summarized: the completed ones,
	// or the interrupted ones when none completed.
	Runs int `json:"runs"`
	// AtStep, when not zero, is the step the regrets are taken at: the
	// last step every summarized run reached, when an interrupt cut all
	// of them short. Zero means the simulation's steps.
	AtStep int `json:"at_step,omitempty"`
	// InterruptedRuns are the runs an interrupt stopped part way, each
	// with the steps it did and its regret after them.
	InterruptedRuns []InterruptedRun `json:"interrupted_runs,omitempty"`
	// Final cumulative expected regret: mean, sample standard deviation
	// and standard error of the mean over runs.
	ExpectedMean float64 `json:"final_expected_regret_mean"`
	ExpectedStd  float64 `json:"final_expected_regret_std"`
	ExpectedSE   float64 `json:"final_expected_regret_se"`
	// Final cumulative realized regret: mean and standard deviation.
	RealizedMean float64 `json:"final_realized_regret_mean"`
	RealizedStd  float64 `json:"final_realized_regret_std"`
	// WallSeconds sums the wall time of the runs; StepsPerSecond is the
	// steps of a single run per second of its wall time.
	WallSeconds    float64 `json:"wall_seconds"`
	StepsPerSecond float64 `json:"steps_per_second"`
	// CPUSeconds sums the CPU time of the runs (RunResult.CPU).
	CPUSeconds float64 `json:"cpu_seconds"`
	// Samples is the share of the decisions of the completed runs by
	// the kind of sample they acted on (refined, mean-field, ...).
	Samples map[bandit.SampleKind]float64 `json:"samples,omitempty"`
	// LockedIn is the number of completed runs that locked into one arm
	// (RunResult.LockedIn: one arm took at least LockInShare of the
	// decisions of the last LockInWindow steps), and LockedInSeeds
	// their seeds. Interrupted runs are not judged.
	LockedIn      int   `json:"locked_in"`
	LockedInSeeds []int `json:"locked_in_seeds,omitempty"`
	// Bandit is the configuration the service played, defaults filled
	// in (BanditConfig), without its features (one numeric feature per
	// input of the environment, or those of a --bandit-config file);
	// TrainEvery and RewardDelay are the run's.
	Bandit      *bandit.Config `json:"bandit,omitempty"`
	TrainEvery  int            `json:"train_every"`
	RewardDelay int            `json:"reward_delay"`
	// Shadow is what the bandit's candidate (RunConfig.Shadow) would
	// have cost at this policy's decisions; nil without one.
	Shadow *ShadowSummary `json:"shadow,omitempty"`
}

// ShadowSummary is a candidate's counterfactual regret at one policy's
// decisions (RunResult.ShadowExpected), over the summarized runs.
type ShadowSummary struct {
	// Candidate names the candidate's policy ("refined-ts-supply").
	Candidate string `json:"candidate"`
	// Runs are the runs' own figures, by seed.
	Runs []ShadowRun `json:"runs"`
	// The candidate's cumulative expected regret: mean, sample standard
	// deviation and standard error over Runs.
	ExpectedMean float64 `json:"expected_regret_mean"`
	ExpectedStd  float64 `json:"expected_regret_std"`
	ExpectedSE   float64 `json:"expected_regret_se"`
	// DiffMean and DiffSE are the candidate's regret less the live
	// policy's, paired by run (the same contexts): mean and standard
	// error over Runs. Set only when the candidate chose at every
	// decision of every run (else the two sums are over different
	// decisions).
	DiffMean *float64 `json:"paired_difference_mean,omitempty"`
	DiffSE   *float64 `json:"paired_difference_se,omitempty"`
}

// ShadowRun is one run's candidate figures: the decisions it chose at
// and the expected regret of those choices.
type ShadowRun struct {
	Seed      int     `json:"seed"`
	Decisions int     `json:"decisions"`
	Expected  float64 `json:"expected_regret"`
}

// summarizeShadow summarizes the candidate's figures of runs (each
// completed, of steps steps), nil when no run had a candidate.
func summarizeShadow(candidate string, runs []*RunResult, steps int) *ShadowSummary {
	sh := &ShadowSummary{Candidate: candidate}
	var exp, diff []float64
	every := true
	for _, r := range runs {
		if r.ShadowDecisions == 0 {
			continue
		}
		sh.Runs = append(sh.Runs, ShadowRun{Seed: r.Seed, Decisions: r.ShadowDecisions, Expected: r.ShadowExpected})
		exp = append(exp, r.ShadowExpected)
		diff = append(diff, r.ShadowExpected-r.Expected)
		every = every && r.ShadowDecisions == r.Steps && r.Steps == steps
	}
	if len(sh.Runs) == 0 {
		return nil
	}
	sh.ExpectedMean, sh.ExpectedStd = meanStd(exp)
	sh.ExpectedSE = sh.ExpectedStd / math.Sqrt(float64(len(exp)))
	if every && len(sh.Runs) == len(runs) {
		m, sd := meanStd(diff)
		se := sd / math.Sqrt(float64(len(diff)))
		sh.DiffMean, sh.DiffSE = &m, &se
	}
	return sh
}

// InterruptedRun is a run that an interrupt stopped after Steps steps of
// the simulation's, with its cumulative regrets then.
type InterruptedRun struct {
	Seed     int     `json:"seed"`
	Steps    int     `json:"steps"`
	Expected float64 `json:"expected_regret"`
	Realized float64 `json:"realized_regret"`
}

// cutShort reports whether r is a run that an interrupt stopped after
// some of its steps (read back from regret.csv, such a run carries no
// error, only fewer steps).
func cutShort(r *RunResult, steps int) bool {
	return r.Steps > 0 && r.Steps < steps && (r.Err == nil || isCancel(r.Err))
}

// summarized returns the runs of policy name that its summary and plot
// show, and the step they are shown at (0: the last): its completed runs,
// or, when an interrupt left it none, the runs it cut short at the last
// kept point all of them reached. cut are the runs cut short.
func summarized(steps int, results []*RunResult, name string) (runs []*RunResult, at int, cut []*RunResult) {
	for _, r := range results {
		switch {
		case r.Policy != name:
		case r.Complete(steps):
			runs = append(runs, r)
		case cutShort(r, steps):
			cut = append(cut, r)
		}
	}
	if len(runs) > 0 || len(cut) == 0 {
		return runs, 0, cut
	}
	// Each run keeps the same points (every k-th step) and its last
	// step, so the largest step all of them kept is where they can be
	// compared.
	seen := map[int]int{}
	for _, r := range cut {
		for _, p := range r.Points {
			seen[p.Step]++
		}
	}
	for s, n := range seen {
		if n == len(cut) && s > at {
			at = s
		}
	}
	if at == 0 {
		return nil, 0, cut
	}
	return cut, at, cut
}

// pointAt returns r's regret point at step at, or its last point for 0.
func pointAt(r *RunResult, at int) RegretPoint {
	if at == 0 {
		return RegretPoint{Step: r.Steps, Expected: r.Expected, Realized: r.Realized}
	}
	for _, p := range r.Points {
		if p.Step == at {
			return p
		}
	}
	panic(fmt.Sprintf("simulators: %s seed %d has no point at step %d", r.Policy, r.Seed, at))
}

// InterruptedSteps returns the fewest and the most steps that the runs an
// interrupt cut short had done, or zeros when there were none.
func (s Summary) InterruptedSteps() (lo, hi int) {
	for _, p := range s.Policies {
		for _, r := range p.InterruptedRuns {
			if lo == 0 || r.Steps < lo {
				lo = r.Steps
			}
			hi = max(hi, r.Steps)
		}
	}
	return lo, hi
}

// Summarize aggregates results: the completed runs of each policy, or the
// runs an interrupt cut short when it has none (PolicySummary.AtStep).
func Summarize(cfg RunConfig, results []*RunResult) Summary {
	s := Summary{Env: cfg.Env.Name(), Steps: cfg.Steps, Seeds: cfg.Seeds, FirstSeed: max(cfg.FirstSeed, 1), Preset: cfg.Preset}
	candidate := "shadow" // a --bandit-config file's own
	if cfg.Shadow != nil {
		s.Shadow, candidate = cfg.Shadow.Name, cfg.Shadow.Name
	}
	for _, p := range cfg.Policies {
		ps := PolicySummary{Policy: p.Name, RewardDelay: cfg.RewardDelay, TrainEvery: cfg.Preset.Retraining(cfg.TrainEvery)}
		if bc, err := BanditConfig(p, cfg.Env, cfg.Preset); err == nil {
			bc.Features = nil
			ps.Bandit = bc
		}
		for _, r := range results {
			if r.Policy != p.Name || r.Complete(cfg.Steps) {
				continue
			}
			if r.Err != nil && !isCancel(r.Err) {
				s.Errors = appendUnique(s.Errors, fmt.Sprintf("%s seed %d: %d/%d steps: %v", r.Policy, r.Seed, r.Steps, cfg.Steps, r.Err))
			}
			s.Interrupted = s.Interrupted || isCancel(r.Err)
		}
		runs, at, cut := summarized(cfg.Steps, results, p.Name)
		for _, r := range cut {
			ps.InterruptedRuns = append(ps.InterruptedRuns, InterruptedRun{Seed: r.Seed, Steps: r.Steps, Expected: r.Expected, Realized: r.Realized})
		}
		ps.AtStep = at
		var decided int
		var exp, real []float64
		var steps int
		for _, r := range runs {
			pt := pointAt(r, at)
			exp = append(exp, pt.Expected)
			real = append(real, pt.Realized)
			if at == 0 && r.LockedIn() {
				ps.LockedIn++
				ps.LockedInSeeds = append(ps.LockedInSeeds, r.Seed)
			}
			for k, n := range r.Samples {
				if ps.Samples == nil {
					ps.Samples = map[bandit.SampleKind]float64{}
				}
				ps.Samples[k] += float64(n)
				decided += n
			}
			ps.WallSeconds += r.Wall.Seconds()
			ps.CPUSeconds += r.CPU.Seconds()
			steps += r.Steps
		}
		ps.Runs = len(exp)
		ps.ExpectedMean, ps.ExpectedStd = meanStd(exp)
		ps.RealizedMean, ps.RealizedStd = meanStd(real)
		if ps.Runs > 0 {
			ps.ExpectedSE = ps.ExpectedStd / math.Sqrt(float64(ps.Runs))
		}
		if ps.WallSeconds > 0 {
			ps.StepsPerSecond = float64(steps) / ps.WallSeconds
		}
		for k := range ps.Samples {
			ps.Samples[k] /= float64(decided)
		}
		if at == 0 {
			ps.Shadow = summarizeShadow(candidate, runs, cfg.Steps)
		}
		s.Policies = append(s.Policies, ps)
	}
	return s
}

func isCancel(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "context canceled") || strings.Contains(err.Error(), "deadline exceeded"))
}

func appendUnique(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// meanStd returns the mean and the sample standard deviation (n-1) of x;
// the deviation is 0 for fewer than two values.
func meanStd(x []float64) (mean, std float64) {
	if len(x) == 0 {
		return 0, 0
	}
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(x)-1))
}

// WriteOutputs writes a simulation's outputs into dir (created if
// missing): regret.csv, summary.json, summary.md, regret.png and
// regret.svg (docs/simulate.md describes each). Complete runs and the
// steps done of runs an interrupt cut short are written; failed runs are
// not.
func WriteOutputs(dir string, cfg RunConfig, results []*RunResult, sum Summary) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "regret.csv"), func(w io.Writer) error { return writeRegretCSV(w, cfg, results) }); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "summary.json"), func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	}); err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, "summary.md"), func(w io.Writer) error { return WriteSummaryMarkdown(w, sum) }); err != nil {
		return err
	}
	p, err := regretPlot(cfg, results, sum)
	if err != nil {
		return err
	}
	return savePlot(p, dir)
}

// writeFile writes through a temporary file and renames it into place.
func writeFileAtomic(path string, f func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriter(tmp)
	if err := f(bw); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func writeRegretCSV(w io.Writer, cfg RunConfig, results []*RunResult) error {
	if _, err := io.WriteString(w, "step,policy,seed,cumulative_expected_regret,cumulative_realized_regret\n"); err != nil {
		return err
	}
	var buf []byte
	for _, r := range results {
		if !r.Complete(cfg.Steps) && !cutShort(r, cfg.Steps) {
			continue
		}
		for _, p := range r.Points {
			buf = strconv.AppendInt(buf[:0], int64(p.Step), 10)
			buf = append(buf, ',')
			buf = append(buf, r.Policy...)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(r.Seed), 10)
			buf = append(buf, ',')
			buf = strconv.AppendFloat(buf, p.Expected, 'g', -1, 64)
			buf = append(buf, ',')
			buf = strconv.AppendFloat(buf, p.Realized, 'g', -1, 64)
			buf = append(buf, '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
	}
	return nil
}

// spread formats a standard deviation or error over runs runs: one run
// has no spread, so its standard deviation and error are undefined
// ("-"), not 0.
func spread(runs int, x float64) string {
	if runs < 2 {
		return "-"
	}
	return fmt.Sprintf("%.1f", x)
}

// writeShadowTable writes the candidates' counterfactual regrets of ps
// (PolicySummary.Shadow), if any, as a table of their own.
func writeShadowTable(b *strings.Builder, ps []PolicySummary) {
	head := true
	for _, p := range ps {
		sh := p.Shadow
		if sh == nil {
			continue
		}
		if head {
			b.WriteString("\nA candidate beside each policy (simulate --shadow; bandit.Config.Shadow): trained on the policy's log and asked at each of its decisions without acting on the answer, its choices' expected regret there, and less the policy's own on the same runs:\n\n")
			b.WriteString("| policy | candidate | runs | candidate's expected regret (mean ± std) | std. error | candidate - policy, paired by run | decisions with a choice |\n")
			b.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
			head = false
		}
		n := len(sh.Runs)
		diff := "-"
		if sh.DiffMean != nil {
			diff = fmt.Sprintf("%+.1f ± %s", *sh.DiffMean, spread(n, *sh.DiffSE))
		}
		var decided int
		for _, r := range sh.Runs {
			decided += r.Decisions
		}
		fmt.Fprintf(b, "| %s | %s | %d | %.1f ± %s | %s | %s | %d |\n", p.Policy, sh.Candidate, n, sh.ExpectedMean, spread(n, sh.ExpectedStd), spread(n, sh.ExpectedSE), diff, decided)
	}
}

// WriteSummaryMarkdown writes the summary as a Markdown table, best
// policy (lowest mean final expected regret) first.
func WriteSummaryMarkdown(w io.Writer, s Summary) error {
	var b strings.Builder
	// The preset is named once, in its own line below the title (the
	// title named it too, and the same line was then printed twice).
	if len(s.SeedList) > 0 {
		fmt.Fprintf(&b, "# Regret: %s, %s, %s (%s)\n\n", s.Env, plural.Count(s.Steps, "step", "steps"), plural.Count(s.Seeds, "seed", "seeds"), joinInts(s.SeedList))
	} else {
		seeds := fmt.Sprintf("%d to %d", s.FirstSeed, s.FirstSeed+s.Seeds-1)
		if s.Seeds == 1 {
			seeds = strconv.Itoa(s.FirstSeed)
		}
		fmt.Fprintf(&b, "# Regret: %s, %s, %s (%s)\n\n", s.Env, plural.Count(s.Steps, "step", "steps"), plural.Count(s.Seeds, "seed", "seeds"), seeds)
	}
	if s.BanditConfig != "" {
		// The schedule the runs kept (--train-every's when given), not
		// the preset's.
		every := s.Preset.Retraining(0)
		if len(s.Policies) > 0 && s.Policies[0].TrainEvery > 0 {
			every = s.Policies[0].TrainEvery
		}
		fmt.Fprintf(&b, "Bandit configuration `%s`, retrained every %d rewards (the preset `%s` gives only the retraining schedule, --train-every overrides it).\n\n", s.BanditConfig, every, s.Preset.Name)
	} else {
		fmt.Fprintf(&b, "Preset `%s`: %s.\n\n", s.Preset.Name, s.Preset.Description)
	}
	if s.Command != "" {
		fmt.Fprintf(&b, "Command: `%s`\n\n", s.Command)
	}
	if s.Version != "" {
		fmt.Fprintf(&b, "Binary: %s.\n\n", s.Version)
	}
	if len(s.Sources) > 0 {
		b.WriteString("Merged from:\n\n")
		for _, src := range s.Sources {
			fmt.Fprintf(&b, "- `%s`: %s", src.Dir, src.Runs)
			if src.Version != "" {
				fmt.Fprintf(&b, "; %s", src.Version)
			}
			if src.Command != "" {
				fmt.Fprintf(&b, "; `%s`", src.Command)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	for _, n := range s.Notes {
		fmt.Fprintf(&b, "Note: %s\n\n", n)
	}
	if len(s.Sources) > 0 {
		fmt.Fprintf(&b, "Wall time: %.0f s (the sources' sum).", s.WallSeconds)
	} else {
		fmt.Fprintf(&b, "Wall time: %.0f s.", s.WallSeconds)
	}
	if s.Interrupted {
		if lo, hi := s.InterruptedSteps(); hi == 0 {
			b.WriteString(" **Interrupted** between runs: only completed runs are summarized.")
		} else {
			fmt.Fprintf(&b, " **Interrupted** at %s of %d: a policy with completed runs is summarized over them, one without over its interrupted runs at the last step they all reached.", stepRange(lo, hi), s.Steps)
		}
	}
	b.WriteString("\n\n")
	b.WriteString("| policy | runs | final expected regret (mean ± std) | std. error | final realized regret (mean ± std) | on refined samples | locked into one arm | steps/s per run | CPU s per run |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	ps := append([]PolicySummary(nil), s.Policies...)
	sortPolicies(ps)
	for _, p := range ps {
		runs := strconv.Itoa(p.Runs)
		if p.Runs < s.Seeds {
			runs = fmt.Sprintf("%d of %d", p.Runs, s.Seeds)
		}
		if p.AtStep > 0 {
			runs += fmt.Sprintf(", interrupted at step %d", p.AtStep)
		}
		if p.Runs == 0 {
			// No mean of nothing: a policy without a completed run is
			// missing, not a regret of 0.
			fmt.Fprintf(&b, "| %s | %s | missing | - | missing | - | - | - | - |\n", p.Policy, runs)
			continue
		}
		refined := "-"
		if share, ok := p.Samples[bandit.SampleRefined]; ok {
			refined = fmt.Sprintf("%.1f%%", 100*share)
		}
		locked := fmt.Sprintf("%d of %d", p.LockedIn, p.Runs)
		if p.AtStep > 0 {
			locked = "-"
		} else if p.LockedIn > 0 {
			locked += fmt.Sprintf(" (%s %s)", plural.Word(p.LockedIn, "seed", "seeds"), joinInts(p.LockedInSeeds))
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f ± %s | %s | %.1f ± %s | %s | %s | %.1f | %.1f |\n",
			p.Policy, runs, p.ExpectedMean, spread(p.Runs, p.ExpectedStd), spread(p.Runs, p.ExpectedSE), p.RealizedMean, spread(p.Runs, p.RealizedStd), refined, locked, p.StepsPerSecond, p.CPUSeconds/float64(p.Runs))
	}
	fmt.Fprintf(&b, "\nLocked into one arm: one arm took at least %g%% of the decisions of a run's last %d steps (all of them in a shorter run).\n", 100*LockInShare, LockInWindow)
	writeShadowTable(&b, ps)
	head := "\nInterrupted runs:\n\n"
	for _, p := range s.Policies {
		for _, r := range p.InterruptedRuns {
			fmt.Fprintf(&b, "%s- %s seed %d at step %d of %d: expected regret %.1f, realized %.1f", head, p.Policy, r.Seed, r.Steps, s.Steps, r.Expected, r.Realized)
			head = ""
			if p.AtStep == 0 {
				b.WriteString(" (not in the table, which has the completed runs)")
			}
			b.WriteString("\n")
		}
	}
	for _, e := range s.Errors {
		fmt.Fprintf(&b, "\nError: %s\n", e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// stepRange is "step N" or "steps N to M".
func stepRange(lo, hi int) string {
	if lo == hi {
		return fmt.Sprintf("step %d", lo)
	}
	return fmt.Sprintf("steps %d to %d", lo, hi)
}

func joinInts(x []int) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ", ")
}

func sortPolicies(ps []PolicySummary) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && less(ps[j], ps[j-1]); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func less(a, b PolicySummary) bool {
	if (a.Runs == 0) != (b.Runs == 0) {
		return a.Runs > 0
	}
	return a.ExpectedMean < b.ExpectedMean
}

// palette: Okabe-Ito colours, distinguishable with colour-blindness.
var palette = []color.RGBA{
	{0, 114, 178, 255}, {213, 94, 0, 255}, {0, 158, 115, 255}, {204, 121, 167, 255},
	{230, 159, 0, 255}, {86, 180, 233, 255}, {0, 0, 0, 255}, {240, 228, 66, 255},
}

// regretPlot draws the mean cumulative expected regret of each policy
// over steps with a band of ± one standard deviation across seeds. When a
// policy's final mean is more than twice every other's (uniform play,
// typically), the y axis is fitted to the others and its legend entry
// gives its final value instead.
func regretPlot(cfg RunConfig, results []*RunResult, sum Summary) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: cumulative expected regret (mean ± 1 std over %s, preset %s)", sum.Env, seedsPlotted(sum), sum.Preset.Name)
	if sum.Interrupted {
		p.Title.Text += ", interrupted"
	}
	p.X.Label.Text = "step"
	p.Y.Label.Text = "cumulative expected regret"
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())

	type series struct {
		name       string
		mean, band plotter.XYs
		top        float64 // largest mean + std
		final      float64
		at         int // the step an interrupt stopped its runs at (summarized)
	}
	var all []series
	for _, spec := range cfg.Policies {
		var runs [][]RegretPoint
		summed, at, _ := summarized(cfg.Steps, results, spec.Name)
		for _, r := range summed {
			pts := r.Points
			if at > 0 {
				pts = pts[:slices.IndexFunc(pts, func(p RegretPoint) bool { return p.Step == at })+1]
			}
			runs = append(runs, pts)
		}
		if len(runs) == 0 {
			continue
		}
		n := len(runs[0])
		sr := series{name: spec.Name, mean: make(plotter.XYs, n), at: at}
		lo := make(plotter.XYs, n)
		for k := range n {
			vals := make([]float64, len(runs))
			for j, r := range runs {
				vals[j] = r[k].Expected
			}
			m, sd := meanStd(vals)
			x := float64(runs[0][k].Step)
			sr.mean[k] = plotter.XY{X: x, Y: m}
			sr.band = append(sr.band, plotter.XY{X: x, Y: m + sd})
			lo[k] = plotter.XY{X: x, Y: m - sd}
			sr.top = math.Max(sr.top, m+sd)
			sr.final = m
		}
		for k := n - 1; k >= 0; k-- {
			sr.band = append(sr.band, lo[k])
		}
		all = append(all, sr)
	}
	// Fit the y axis to the policies that are not far off the scale.
	offScale := map[int]bool{}
	for i, a := range all {
		far := len(all) > 1
		for j, b := range all {
			if i != j && a.final <= 2*b.final {
				far = false
			}
		}
		offScale[i] = far
	}
	var top float64
	for i, a := range all {
		if !offScale[i] {
			top = math.Max(top, a.top)
		}
	}
	for i, sr := range all {
		c := palette[i%len(palette)]
		poly, err := plotter.NewPolygon(sr.band)
		if err != nil {
			return nil, err
		}
		poly.Color = color.NRGBA{c.R, c.G, c.B, 40} // not premultiplied
		poly.LineStyle.Width = 0
		line, err := plotter.NewLine(sr.mean)
		if err != nil {
			return nil, err
		}
		line.Color = c
		line.Width = vg.Points(1.5)
		if i >= len(palette) {
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		label := sr.name
		if sr.at > 0 {
			label = fmt.Sprintf("%s (interrupted at step %d)", sr.name, sr.at)
		}
		if offScale[i] {
			label = fmt.Sprintf("%s (off scale: %.0f at the end)", sr.name, sr.final)
		} else {
			p.Add(poly)
		}
		p.Add(line)
		p.Legend.Add(label, line)
	}
	if top > 0 {
		p.Y.Min, p.Y.Max = 0, 1.05*top
	}
	// Round ticks, no decimals on counts (gonum's default gave the y
	// axis two labels, "0.00" and "2500.00").
	p.X.Tick.Marker, p.Y.Tick.Marker = roundTicks{integer: true}, roundTicks{}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p, nil
}

// roundTicks marks an axis with about five round ticks (internal/ticks:
// 1, 2 or 5 x 10^k apart, whole numbers on an integer axis, the fewest
// decimals the step needs, SI prefixes from 10,000) and four unlabelled
// minor ticks between two of them.
type roundTicks struct{ integer bool }

func (r roundTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	step := ticks.Step(lo, hi, 5, r.integer)
	label := ticks.Format(step, math.Max(math.Abs(lo), math.Abs(hi)))
	var out []plot.Tick
	for _, v := range ticks.Within(lo, hi, step) {
		out = append(out, plot.Tick{Value: v, Label: label(v)})
	}
	if minor := step / 5; !r.integer || minor >= 1 {
		for _, v := range ticks.Within(lo, hi, minor) {
			if r := math.Mod(math.Abs(v), step); r > minor/2 && step-r > minor/2 {
				out = append(out, plot.Tick{Value: v})
			}
		}
	}
	return out
}

// seedsPlotted says over how many seeds the plot's means are taken: the
// completed runs of each policy, which an interrupted simulation leaves
// short of the seeds asked for.
func seedsPlotted(sum Summary) string {
	lo, hi := -1, 0
	for _, p := range sum.Policies {
		if p.Runs == 0 {
			continue
		}
		if lo < 0 || p.Runs < lo {
			lo = p.Runs
		}
		hi = max(hi, p.Runs)
	}
	switch {
	case lo < 0:
		return "no completed run"
	case lo == hi && hi == 1:
		return "1 seed"
	case lo == hi:
		return fmt.Sprintf("%d seeds", hi)
	default:
		return fmt.Sprintf("%d to %d seeds per policy", lo, hi)
	}
}

// CheckOutputDir makes dir (and its parents) if missing and checks that
// a file can be written there, so that a typo in an output path fails in
// a second rather than after a long simulation.
func CheckOutputDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".check-")
	if err != nil {
		return err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return err
	}
	return os.Remove(name)
}

// Replot redraws regret.png and regret.svg in dir from the regret.csv and
// summary.json a simulation wrote there, without running it again.
func Replot(dir string) error {
	sum, results, err := ReadOutputs(dir)
	if err != nil {
		return err
	}
	p, err := regretPlot(plotConfig(sum), results, sum)
	if err != nil {
		return err
	}
	return savePlot(p, dir)
}

// plotConfig is the part of a RunConfig that the outputs need: the steps
// and the policies' names, in the summary's order.
func plotConfig(sum Summary) RunConfig {
	cfg := RunConfig{Steps: sum.Steps, Seeds: sum.Seeds}
	for _, p := range sum.Policies {
		cfg.Policies = append(cfg.Policies, PolicySpec{Name: p.Policy})
	}
	return cfg
}

// ReadOutputs reads back the summary.json and regret.csv a simulation
// wrote to dir: the summary, and one RunResult per completed run (policy
// and seed) with its regret points and final regrets, in the file's
// order. The runs carry no wall or CPU time, samples or arm shares;
// those are in the summary, per policy.
func ReadOutputs(dir string) (Summary, []*RunResult, error) {
	var sum Summary
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return sum, nil, err
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		return sum, nil, fmt.Errorf("%s: %w", filepath.Join(dir, "summary.json"), err)
	}
	f, err := os.Open(filepath.Join(dir, "regret.csv"))
	if err != nil {
		return sum, nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return sum, nil, fmt.Errorf("%s: %w", filepath.Join(dir, "regret.csv"), err)
	}
	byRun := map[string]*RunResult{}
	var order []*RunResult
	for i, row := range rows {
		if i == 0 {
			continue
		}
		if len(row) != 5 {
			return sum, nil, fmt.Errorf("%s line %d: %d fields, want 5", filepath.Join(dir, "regret.csv"), i+1, len(row))
		}
		step, err1 := strconv.Atoi(row[0])
		seed, err2 := strconv.Atoi(row[2])
		exp, err3 := strconv.ParseFloat(row[3], 64)
		real, err4 := strconv.ParseFloat(row[4], 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return sum, nil, fmt.Errorf("%s line %d: %w", filepath.Join(dir, "regret.csv"), i+1, err)
		}
		key := row[1] + "\x00" + row[2]
		r := byRun[key]
		if r == nil {
			r = &RunResult{Policy: row[1], Seed: seed}
			byRun[key] = r
			order = append(order, r)
		}
		r.Points = append(r.Points, RegretPoint{Step: step, Expected: exp, Realized: real})
		r.Steps, r.Expected, r.Realized = step, exp, real
	}
	// The candidate's figures are the summary's alone (regret.csv has
	// the policies' own).
	for _, p := range sum.Policies {
		if p.Shadow == nil {
			continue
		}
		for _, sr := range p.Shadow.Runs {
			if r := byRun[p.Policy+"\x00"+strconv.Itoa(sr.Seed)]; r != nil {
				r.ShadowDecisions, r.ShadowExpected = sr.Decisions, sr.Expected
			}
		}
	}
	return sum, order, nil
}

// savePlot writes the regret plot as dir/regret.png and dir/regret.svg.
func savePlot(p *plot.Plot, dir string) error {
	for _, ext := range []string{"png", "svg"} {
		if err := saveFigure(p, filepath.Join(dir, "regret."+ext)); err != nil {
			return err
		}
	}
	return nil
}

// saveFigure writes p at 8x5 inches to path, in the format its extension
// names (png, svg, pdf).
func saveFigure(p *plot.Plot, path string) error {
	if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("save plot: %w", err)
	}
	return nil
}
