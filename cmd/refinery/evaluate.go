package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/finitejson"
	"github.com/refinery-bandits/refinery/internal/ope"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
)

func init() {
	register(command{name: "evaluate", summary: "estimate candidate policies' value from a decision log (IPS, SNIPS, doubly robust)", run: runEvaluate})
}

const evaluateUsage = `usage: refinery evaluate (--bandit NAME [--database-url URL] | --log FILE --bandit-config FILE)
                         [--from TIME] [--to TIME] [--candidates LIST] [--candidate NAME=JSON ...]
                         [--train-fraction F] [--train-every T] [--level L] [--seed S]
                         [--clip C] [--switch-tau TAU] [--json FILE] [--plot FILE.png]

Off-policy evaluation: estimates the value (mean reward per decision) of
candidate policies from a bandit's decision log, without running them.

The log: the bandit's decisions in [--from, --to) (TIME as in refinery
export) from PostgreSQL (--bandit, --database-url or $DATABASE_URL; the
bandit's stored configuration gives its arms and features), or a file that
refinery export wrote (--log, DSJSON or OBP CSV, told apart by its first
byte) with the bandit's configuration (--bandit-config: the JSON of POST
/v1/bandits or the answer of GET /v1/bandits/NAME). Decisions without a
reward are skipped and counted. A logged propensity of 0 (or missing) for
the chosen arm is an error: its importance weight is undefined.

Candidates (--candidates, comma-separated): logging (the logged policy
itself: its IPS and SNIPS estimates equal the mean logged reward, a sanity
check), any policy kind (uniform, greedy, eps-greedy or eps-greedy:E,
linear-ts, mf-ts, refined-ts, laplace-ts or laplace-ts:last-layer,
flow-ts, neural-linear; simulate's KIND:ARG grammar) with the
logged bandit's model, training and refinement settings and the kind's
policy defaults, and --candidate NAME=JSON (repeatable): a partial bandit
configuration merged over the logged bandit's, its "policy" replacing the
logged one whole, e.g.
  --candidate 'rts1={"policy":{"kind":"refined-ts","samples":1},"refinement":{"iterations":100}}'

How a candidate is fit: the oldest --train-fraction of the rewarded
decisions (default 0.5) are the training rows, the rest the evaluation
rows. Each learning candidate is a step-mode agent of the service's own
code (as refinery simulate runs): every training row is stored as a
decision of its logged arm and rewarded, the agent retrains every
--train-every rows (default 100) and once at the end, and is then frozen.
Its probabilities pi(a|x) on each evaluation row come from the same
decision code and propensity estimator the service uses (exact for
uniform, greedy and eps-greedy; computed by numerical integration for
linear-ts and neural-linear; Monte Carlo for the other Thompson-sampling
kinds; floored at 1e-4 but for the first three). A refined-ts candidate refines one bank of
refinement.bank_size samples and keeps it (policy.max_sample_uses raised
to 1,000,000): one frozen pool of refined samples serves every context, as
the service's pool does, and its probabilities are exact given the pool.

Estimators (Dudik, Langford and Li 2011; Wang, Agarwal and Dudik 2017 for
switch), over the evaluation rows, with w = pi(a|x) / mu(a|x) and mu the
logged propensity:
  ips          mean of w r
  clipped-ips  mean of min(w, C) r, C = --clip (default 100): bounded
               variance, biased toward 0 where weights exceed C
  snips        sum of w r / sum of w
  dr           doubly robust: mean of [sum_a pi(a|x) q(x,a) + w (r - q(x,a_logged))]
  dm           direct method: mean of sum_a pi(a|x) q(x,a)
  switch       ips for the arms whose weight pi/mu is at most TAU =
               --switch-tau (default 100), dm for the others (and for arms
               the logging policy could not choose, mu = 0)
q is a Bayesian linear regression per arm (linear-ts's model, its
posterior mean) fit to the training rows. Intervals are normal (CLT) on the
per-row terms at --level (default 0.95; SNIPS by the delta method); DM's
covers the sampling of contexts only, not the model's bias. DR, DM and
switch of the logging candidate, and switch of every candidate, need every
arm's logged propensity, which an OBP CSV does not keep. An estimate that is
undefined (SNIPS when every weight is 0) is printed as NaN and written to
--json as null with a "reason".

Diagnostics, per candidate, and a WARNING line (and "warnings" in --json)
when one is out of range:
  ESS          (sum w)^2 / sum w^2, how many evaluation rows the weighted
               estimates effectively rest on: warned under 10% of the rows
  max w        the largest weight, and its share of the sum of the weights:
               warned over 5% (one row moves the estimate)
  mean w       the mean weight, whose expectation is 1 when the candidate
               plays only where the logging policy could and mu is right:
               warned when off by more than 0.1 and 3 standard errors (a
               near-deterministic logger, e.g. a learnt linear-ts at
               0.9999, never shows the rows where the candidate differs,
               and ESS and max w look fine)
  unsupported  the candidate's mean probability on arms whose logged
               propensity is 0 (excluded when logged, or added later by
               add_arms, which is shown apart): warned over 1%; IPS, SNIPS
               and DR cannot see the value there, DM and switch value it by
               the reward model only. Unknown (and warned) for an OBP CSV.

The logged propensities mu are the service's: exact for uniform, greedy
and eps-greedy (1 - eps + eps/m for the greedy arm, eps/m for the others),
so IPS and DR are unbiased and SNIPS consistent; estimated for the
Thompson-sampling kinds (Monte Carlo over policy.propensity_samples groups
of policy.samples posterior draws, or exact over every subset of the
refined samples at hand; computed by numerical integration for linear-ts
and neural-linear; then floored at 1e-4). An estimated mu carries
its error into 1/mu: E[1/mu-hat] >= 1/mu, so weights are biased upward
where mu is small, the floor caps every weight at 10,000 at the price of
moving a propensity by up to m x 1e-4, and a few huge weights show as a
small ESS and a large max w. The table's footer says which case the log is.

Output: a table on stdout, --json FILE (the same as JSON), --plot FILE.png
(estimates with intervals per candidate and estimator).

flags:
  --database-url URL  PostgreSQL URL (default $DATABASE_URL)
`

// evalFlags are refinery evaluate's flags.
type evalFlags struct {
	databaseURL, name, logFile, configFile string
	from, to                               time.Time
	candidates                             string
	extra                                  []string
	trainFraction                          float64
	trainEvery                             int
	level                                  float64
	seed                                   uint64
	clip, switchTau                        float64
	jsonOut, plotOut                       string
}

func runEvaluate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("evaluate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f evalFlags
	databaseURLFlag(fs, &f.databaseURL, "")
	fs.StringVar(&f.name, "bandit", "", "")
	fs.StringVar(&f.logFile, "log", "", "")
	fs.StringVar(&f.configFile, "bandit-config", "", "")
	fromS := fs.String("from", "", "")
	toS := fs.String("to", "", "")
	fs.StringVar(&f.candidates, "candidates", "logging,uniform,greedy,linear-ts", "")
	fs.Func("candidate", "", func(s string) error { f.extra = append(f.extra, s); return nil })
	fs.Float64Var(&f.trainFraction, "train-fraction", 0.5, "")
	fs.IntVar(&f.trainEvery, "train-every", 100, "")
	fs.Float64Var(&f.level, "level", 0.95, "")
	fs.Uint64Var(&f.seed, "seed", 1, "")
	fs.Float64Var(&f.clip, "clip", simulators.DefaultClip, "")
	fs.Float64Var(&f.switchTau, "switch-tau", simulators.DefaultSwitchTau, "")
	fs.StringVar(&f.jsonOut, "json", "", "")
	fs.StringVar(&f.plotOut, "plot", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, evaluateUsage)
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	var err error
	if f.from, err = parseTime("--from", *fromS); err != nil {
		return err
	}
	if f.to, err = parseTime("--to", *toS); err != nil {
		return err
	}
	switch {
	case f.logFile != "" && f.configFile == "":
		return usageError{errors.New("--log needs --bandit-config: the logged bandit's configuration (its arms and features)")}
	case f.logFile == "" && f.configFile != "":
		return usageError{errors.New("--bandit-config goes with --log; from the database the bandit's stored configuration is used")}
	case f.logFile == "" && f.name == "":
		return usageError{errors.New("--bandit: which bandit's decisions to evaluate (or --log FILE)")}
	case f.logFile == "" && f.databaseURL == "":
		return usageError{errors.New("no database: pass --database-url or set DATABASE_URL (or --log FILE)")}
	case !f.from.IsZero() && !f.to.IsZero() && !f.from.Before(f.to):
		return usageError{fmt.Errorf("--from %s is not before --to %s", *fromS, *toS)}
	case !(f.trainFraction > 0 && f.trainFraction < 1):
		return usageError{fmt.Errorf("--train-fraction %g: want a number in (0, 1)", f.trainFraction)}
	case f.trainEvery < 1:
		return usageError{fmt.Errorf("--train-every %d: want at least 1", f.trainEvery)}
	case !(f.level > 0 && f.level < 1):
		return usageError{fmt.Errorf("--level %g: want a number in (0, 1), e.g. 0.95", f.level)}
	case !(f.clip > 0):
		return usageError{fmt.Errorf("--clip %g: want a weight cap > 0, e.g. 100", f.clip)}
	case !(f.switchTau > 0):
		return usageError{fmt.Errorf("--switch-tau %g: want a weight threshold > 0, e.g. 100", f.switchTau)}
	}
	if f.plotOut != "" && !strings.HasSuffix(f.plotOut, ".png") && !strings.HasSuffix(f.plotOut, ".svg") {
		return usageError{fmt.Errorf("--plot %q: want a .png or .svg file", f.plotOut)}
	}
	// Read the bandit's configuration first: candidate errors are
	// usage errors and should not wait for the log.
	var base *bandit.Config
	var lg *ope.Log
	if f.logFile != "" {
		var err error
		if base, err = readBanditConfig(f.configFile); err != nil {
			return err
		}
	}
	var st *store.Postgres
	if f.logFile == "" {
		if st, err = store.OpenPostgres(ctx, f.databaseURL, store.Config{}); err != nil {
			return err
		}
		defer st.Close()
		b, err := st.GetBandit(ctx, f.name)
		if errors.Is(err, bandit.ErrNotFound) {
			return fmt.Errorf("--bandit: no bandit named %q in the database", f.name)
		} else if err != nil {
			return err
		}
		if base, err = bandit.ParseConfig(b.Config); err != nil {
			return fmt.Errorf("bandit %s: its stored configuration: %w", f.name, err)
		}
	}
	cands, err := ope.Candidates(base, f.candidates, f.extra)
	if err != nil {
		return usageError{err}
	}
	if st != nil {
		lg, err = ope.ReadStore(ctx, st, base, f.name, f.from, f.to)
	} else {
		lg, err = ope.ReadFile(f.logFile, base, f.from, f.to)
	}
	if err != nil {
		return err
	}
	if len(lg.Rows) == 0 {
		return fmt.Errorf("%s: no rewarded decisions to evaluate on (%d without a reward skipped)", lg.Source, lg.Skipped)
	}
	rep, err := simulators.Evaluate(ctx, simulators.OPEConfig{
		Rows: lg.Rows, Arms: len(base.Arms), Dim: bandit.NewEncoder(bandit.ContextFeatures(base)).Dim(),
		Candidates: cands, TrainFraction: f.trainFraction, TrainEvery: f.trainEvery,
		Level: f.level, Seed: f.seed, Clip: f.clip, SwitchTau: f.switchTau,
	})
	if err != nil {
		return err
	}
	if len(lg.Policies) == 0 {
		// A file does not name the policy that took its decisions; the
		// logged bandit's configuration does.
		lg.Policies, lg.FromConfig = map[string]int{string(base.Policy.Kind): len(lg.Rows)}, true
	}
	out := evalOutput{Source: lg.Source, Bandit: base.Name, LoggedPolicy: lg.Policies, PolicyFromConfig: lg.FromConfig, Skipped: lg.Skipped,
		Propensities: ope.PropensityNote(lg.Policies, base), OPEReport: rep}
	if err := writeEvalTable(stdout, &out); err != nil {
		return err
	}
	if f.jsonOut != "" {
		b, err := finitejson.MarshalIndent(&out, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if f.plotOut != "" {
		title := fmt.Sprintf("%s: off-policy estimates on %d decisions (%.0f%% intervals)", base.Name, rep.EvalRows, 100*f.level)
		if err := simulators.SaveOPEPlot(f.plotOut, title, rep, nil); err != nil {
			return err
		}
	}
	return nil
}

// evalOutput is what refinery evaluate reports.
type evalOutput struct {
	Source string `json:"source"`
	Bandit string `json:"bandit"`
	// LoggedPolicy counts the evaluation log's decisions by the policy
	// kind that took them (empty for an OBP CSV).
	LoggedPolicy map[string]int `json:"logged_policy,omitempty"`
	// PolicyFromConfig: the log does not name its policy (DSJSON, OBP
	// CSV); LoggedPolicy is the --bandit-config's.
	PolicyFromConfig bool   `json:"policy_from_config,omitempty"`
	Skipped          int    `json:"skipped_without_reward"`
	Propensities     string `json:"propensities"`
	*simulators.OPEReport
}

// writeEvalTable prints the report as a table with a footer.
func writeEvalTable(w io.Writer, o *evalOutput) error {
	r := o.OPEReport
	var kinds []string
	for k, n := range o.LoggedPolicy {
		kinds = append(kinds, fmt.Sprintf("%s x %d", k, n))
	}
	slices.Sort(kinds)
	by := strings.Join(kinds, ", ")
	if o.PolicyFromConfig {
		by += " (the --bandit-config's policy: the file does not name it)"
	}
	fmt.Fprintf(w, "%s: %d rewarded decisions (%d without a reward skipped), logged by %s\n", o.Source, r.Rows, o.Skipped, by)
	fmt.Fprintf(w, "candidates fit on the oldest %d, estimated on the newest %d (mean logged reward there %.4g, smallest logged propensity %.3g)\n\n",
		r.TrainRows, r.EvalRows, r.LoggedMean, r.MinPropensity)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "candidate\testimator\tvalue\t%.0f%% interval\tESS\tmax w (share)\tmean w\tunsupported\t\n", 100*r.Level)
	for _, c := range r.Candidates {
		for i, e := range c.Estimates {
			ess, mw, mean, un := "", "", "", ""
			if i == 0 {
				ess, mw = fmt.Sprintf("%.0f", c.ESS), fmt.Sprintf("%.3g (%.1f%%)", c.MaxWeight, 100*c.MaxWeightShare)
				mean = fmt.Sprintf("%.3g", c.MeanWeight)
				un = "?"
				if c.UnsupportedMass != nil {
					un = fmt.Sprintf("%.1f%%", 100**c.UnsupportedMass)
					if *c.NewArmMass > 0 {
						un += fmt.Sprintf(" (new arms %.1f%%)", 100**c.NewArmMass)
					}
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.4g\t[%.4g, %.4g]\t%s\t%s\t%s\t%s\t\n", c.Name, e.Estimator, e.Value, e.Lo, e.Hi, ess, mw, mean, un)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, c := range r.Candidates {
		for _, warn := range c.Warnings {
			fmt.Fprintf(w, "WARNING %s: %s\n", c.Name, warn)
		}
		for _, e := range c.Estimates {
			if e.Reason != "" {
				fmt.Fprintf(w, "%s %s undefined: %s\n", c.Name, e.Estimator, e.Reason)
			}
		}
	}
	fmt.Fprintf(w, "clipped-ips caps weights at %g; switch uses ips where pi/mu <= %g and dm elsewhere (Wang et al. 2017); warnings when ESS < %.0f%% of the rows, the largest weight > %.0f%% of their sum, the mean weight off 1 by > %g (and 3 s.e.), or > %.0f%% of pi on arms mu could not choose\n",
		r.Clip, r.SwitchTau, 100*simulators.MinESSFraction, 100*simulators.MaxWeightShare, simulators.MaxMeanWeightGap, 100*simulators.MaxUnsupportedMass)
	fmt.Fprintf(w, "intervals: normal (CLT) on the per-row terms, SNIPS by the delta method; dm's covers the contexts' sampling only, not the reward model's bias\n")
	fmt.Fprintf(w, "reward model (dm, dr): Bayesian linear regression per arm (linear-ts's model), posterior mean, fit to the training rows\n")
	for _, c := range r.Candidates {
		fmt.Fprintf(w, "%s: pi from %s", c.Name, c.PiEstimator)
		if c.Note != "" {
			fmt.Fprintf(w, "; %s", c.Note)
		}
		fmt.Fprintln(w)
	}
	_, err := fmt.Fprintln(w, o.Propensities)
	return err
}

// readBanditConfig reads the --bandit-config of simulate and evaluate: the
// JSON body of POST /v1/bandits, or the answer of GET /v1/bandits/NAME
// (withoutStatus), at most api.MaxConfigBytes and a margin.
func readBanditConfig(path string) (*bandit.Config, error) {
	b, err := readBounded(path, api.MaxConfigBytes+64<<10)
	if err != nil {
		return nil, fmt.Errorf("--bandit-config: %w", err)
	}
	c, err := bandit.ParseConfig(withoutStatus(b))
	if err != nil {
		return nil, fmt.Errorf("--bandit-config %s: %w", path, err)
	}
	return c, nil
}

// readBounded reads the file at path, at most max bytes of it (a
// configuration with its status beside it).
func readBounded(path string, max int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	b, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err == nil && int64(len(b)) > max {
		err = fmt.Errorf("%s: larger than %d bytes", path, max)
	}
	return b, err
}

// withoutStatus drops the members GET /v1/bandits/NAME adds to the
// configuration (created_at, status), so that its answer can serve as
// --bandit-config; anything else is left for ParseConfig to judge.
func withoutStatus(b []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	_, c := m["created_at"]
	_, s := m["status"]
	if !c && !s {
		return b
	}
	delete(m, "created_at")
	delete(m, "status")
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	return out
}
