package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/mergepatch"
	"github.com/refinery-bandits/refinery/internal/plural"
	"github.com/refinery-bandits/refinery/nn/kern"
	"github.com/refinery-bandits/refinery/simulators"
)

func init() {
	register(command{
		name:    "simulate",
		summary: "offline regret simulation (mushroom, wheel or a classification CSV)",
		run:     runSimulate,
	})
}

func presetNames() string {
	var names []string
	for n := range simulators.Presets() {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, "|")
}

func runSimulate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	def := bandit.DefaultConfig(bandit.RefinedTS) // the defaults the help names
	envSpec := fs.String("env", "mushroom", "environment: mushroom[:opts], wheel[:opts] or csv:PATH (docs/simulate.md describes each and its options)")
	policies := fs.String("policies", "refined-ts,mf-ts,eps-greedy", "comma-separated policies: "+strings.Join(simulators.PolicyNames, ", ")+"; eps-greedy expands to the preset's epsilons, eps-greedy:E takes one; mf-ts@M and refined-ts@M train with method M (elbo, ris, collapsed-mean, collapsed-mean-var, ngvi; several joined by +); laplace-ts:diagonal or :last-layer picks the structure; refined-ts:supply plays refined TS on the service's sample supply (a bank of "+strconv.Itoa(def.Refinement.BankSize)+" refined samples, each serving up to "+strconv.Itoa(def.Policy.MaxSampleUses)+" decisions) instead of the preset's fresh samples per decision")
	steps := fs.Int("steps", 1000, "steps per run")
	seeds := fs.Int("seeds", 1, "seeds per policy (seeds F..F+S-1)")
	firstSeed := fs.Int("first-seed", 1, "first seed F (to extend an earlier run with new seeds)")
	presetName := fs.String("preset", "fast", "schedule of the neural policies: "+presetNames())
	out := fs.String("out", "", "directory for regret.csv, summary.json, summary.md, regret.png, regret.svg (default: print the table only)")
	data := fs.String("data", "", "path of agaricus-lepiota.data or its directory (default: $REFINERY_DATA, ./data, ../shared/data/mushroom)")
	workers := fs.Int("workers", 0, "runs in parallel (default: all cores)")
	every := fs.Int("every", 0, "keep a regret point every N steps (default: steps/500)")
	quiet := fs.Bool("quiet", false, "no progress bar")
	banditConfig := fs.String("bandit-config", "", "play exactly this bandit configuration (the JSON body of POST /v1/bandits) instead of --policies and --preset; its arms and features must be the environment's")
	rewardDelay := fs.Int("reward-delay", 0, "rewards arrive this many decisions late (0: before the next decision)")
	trainEvery := fs.Int("train-every", 0, "retrain after this many rewards (default: the preset's)")
	shadow := fs.String("shadow", "", "a candidate policy (one of --policies' names) run beside every policy as its shadow: trained on that policy's log and asked at each of its decisions without acting; summary.md gives the expected regret of its choices there, paired with the policy's own (the preset and --set configure it too)")
	var estimator bandit.Estimator
	fs.TextVar(&estimator, "estimator", bandit.Estimator(""), "the trainer's estimator of the neural policies (training.estimator): local-reparam, weight-reparam or ris (default: the preset's, "+def.Training.Estimator.String()+")")
	var bound bandit.Bound
	fs.TextVar(&bound, "bound", bandit.Bound(""), "the trainer's objective of the mean-field policies (training.bound): elbo, collapsed-mean (Eq. 9 of Tomczak et al. 2021) or collapsed-mean-var (Eq. 10) (default: the preset's, "+def.Training.Bound.String()+")")
	var optimizer bandit.Optimizer
	fs.TextVar(&optimizer, "optimizer", bandit.Optimizer(""), "the trainer's optimizer of the mean-field policies (training.optimizer): adam or ngvi (natural-gradient VI, Khan 2018) (default: the preset's, "+def.Training.Optimizer.String()+")")
	var sets setFlags
	fs.Var(&sets, "set", "set one field of the preset's bandit configuration, as a JSON path and value: --set model.noise=per-arm --set training.sigma_lr=0.01 (repeatable; the value is JSON, or a string when it does not parse as JSON)")
	replot := fs.String("replot", "", "redraw DIR/regret.png and regret.svg from the regret.csv and summary.json in DIR, and exit")
	merge := fs.String("merge", "", "combine the outputs of earlier simulations in the comma-separated DIRs (same env, steps and preset; each run from one of them) into --out, as one simulation of all their runs, and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "usage: refinery simulate --env mushroom|wheel|csv:PATH --policies LIST --steps N --seeds S [--preset fast|paper] [--estimator local-reparam|weight-reparam|ris] [--bound elbo|collapsed-mean|collapsed-mean-var] [--optimizer adam|ngvi] [--out DIR] [--data PATH] [--bandit-config FILE] [--reward-delay N] [--train-every T] [--shadow POLICY] [--set PATH=VALUE]...")
			fmt.Fprintln(stdout, "       refinery simulate --merge DIR,DIR,... --out DIR")
			fmt.Fprintln(stdout, "       refinery simulate --replot DIR")
			fmt.Fprintln(stdout)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if *merge != "" {
		if *out == "" {
			return usageError{errors.New("--merge needs --out DIR")}
		}
		sum, results, err := simulators.Merge(strings.Split(*merge, ","))
		if err != nil {
			return err
		}
		sum.Command = "refinery simulate " + strings.Join(args, " ")
		if err := simulators.WriteSummaryMarkdown(stdout, sum); err != nil {
			return err
		}
		if err := simulators.WriteMerged(*out, sum, results); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "\nwrote %s/{regret.csv,summary.json,summary.md,regret.png,regret.svg}\n", *out)
		return err
	}
	if *replot != "" {
		if err := simulators.Replot(*replot); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "wrote %s/{regret.png,regret.svg}\n", *replot)
		return err
	}
	preset, ok := simulators.Presets()[*presetName]
	if !ok {
		return usageError{fmt.Errorf("unknown preset %q (want %s)", *presetName, presetNames())}
	}
	if estimator != "" {
		if *banditConfig != "" {
			return usageError{errors.New("--estimator: the --bandit-config file sets training.estimator")}
		}
		preset.Bandit.Training.Estimator = estimator
	}
	if bound != "" {
		if *banditConfig != "" {
			return usageError{errors.New("--bound: the --bandit-config file sets training.bound")}
		}
		preset.Bandit.Training.Bound = bound
	}
	if optimizer != "" {
		if *banditConfig != "" {
			return usageError{errors.New("--optimizer: the --bandit-config file sets training.optimizer")}
		}
		preset.Bandit.Training.Optimizer = optimizer
	}
	if len(sets) > 0 {
		if *banditConfig != "" {
			return usageError{errors.New("--set: the --bandit-config file sets the configuration")}
		}
		if err := sets.apply(&preset.Bandit); err != nil {
			return usageError{err}
		}
		preset.Set = sets.apply
	}
	var specs []simulators.PolicySpec
	var err error
	if *banditConfig != "" {
		bc, err := readBanditConfig(*banditConfig)
		if err != nil {
			return err
		}
		specs = []simulators.PolicySpec{{Name: bc.Name, Kind: string(bc.Policy.Kind), Config: bc}}
	} else if specs, err = simulators.ParsePolicies(*policies, preset); err != nil {
		return usageError{fmt.Errorf("--policies: %w", err)}
	}
	var cand *simulators.PolicySpec
	if *shadow != "" {
		if *banditConfig != "" {
			return usageError{errors.New("--shadow: the --bandit-config file sets shadow")}
		}
		cs, err := simulators.ParsePolicies(*shadow, preset)
		if err != nil {
			return usageError{fmt.Errorf("--shadow: %w", err)}
		}
		if len(cs) != 1 {
			return usageError{fmt.Errorf("--shadow %s: want one policy, not %d", *shadow, len(cs))}
		}
		cand = &cs[0]
	}
	switch {
	case *steps < 1:
		return usageError{fmt.Errorf("--steps %d: want at least 1", *steps)}
	case *seeds < 1:
		return usageError{fmt.Errorf("--seeds %d: want at least 1", *seeds)}
	case *firstSeed < 1:
		return usageError{fmt.Errorf("--first-seed %d: want at least 1", *firstSeed)}
	case *workers < 0:
		return usageError{fmt.Errorf("--workers %d: want at least 0", *workers)}
	case *every < 0:
		return usageError{fmt.Errorf("--every %d: want at least 0", *every)}
	case *rewardDelay < 0:
		return usageError{fmt.Errorf("--reward-delay %d: want at least 0", *rewardDelay)}
	case *trainEvery < 0:
		return usageError{fmt.Errorf("--train-every %d: want at least 0", *trainEvery)}
	}
	if *out != "" {
		// Before the run, not after it: a typo must not cost a benchmark.
		if err := simulators.CheckOutputDir(*out); err != nil {
			return fmt.Errorf("--out: %w", err)
		}
	}
	env, err := simulators.ParseEnv(*envSpec, *data)
	if err != nil {
		if errors.As(err, new(*simulators.EnvSpecError)) {
			return usageError{fmt.Errorf("--env: %w", err)}
		}
		return err
	}
	if c, ok := env.(*simulators.Classification); ok && !*quiet {
		fmt.Fprintln(stderr, c.Describe())
	}
	for _, sp := range specs {
		// A configuration that does not fit the environment fails here,
		// in one line, rather than in every run.
		if _, err := simulators.BanditConfig(sp, env, preset); err != nil {
			if *banditConfig != "" {
				return fmt.Errorf("--bandit-config %s: %w", *banditConfig, err)
			}
			return fmt.Errorf("policy %s: %w", sp.Name, err)
		}
	}
	if cand != nil {
		if _, err := simulators.BanditConfig(*cand, env, preset); err != nil {
			return fmt.Errorf("--shadow %s: %w", cand.Name, err)
		}
	}
	cfg := simulators.RunConfig{
		Env: env, Policies: specs, Steps: *steps, Seeds: *seeds, FirstSeed: *firstSeed,
		Preset: preset, Workers: *workers, Every: *every,
		TrainEvery: *trainEvery, RewardDelay: *rewardDelay, Shadow: cand,
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	fmt.Fprintf(stdout, "env %s (%s, %s); %s x %s x %s\n", env.Name(), plural.Count(env.NumFeatures(), "feature", "features"), plural.Count(env.NumArms(), "arm", "arms"),
		plural.Count(len(specs), "policy", "policies"), plural.Count(*seeds, "seed", "seeds"), plural.Count(*steps, "step", "steps"))
	retrain := preset.Retraining(*trainEvery)
	if *banditConfig != "" {
		// The file decides everything but the retraining schedule.
		fmt.Fprintf(stdout, "bandit configuration %s, retrained every %d rewards; its settings beside the service's defaults:\n", *banditConfig, retrain)
	} else {
		fmt.Fprintf(stdout, "preset %s, retrained every %d rewards; each policy's settings beside the service's defaults:\n", preset.Name, retrain)
	}
	// The settings every policy shares once, then each one's own.
	per := make([][]string, len(specs))
	count := map[string]int{}
	for i, sp := range specs {
		per[i] = playedSettings(sp, env, preset)
		for _, kv := range per[i] {
			count[kv]++
		}
	}
	var common []string
	if len(specs) > 1 {
		for kv, n := range count {
			if n == len(specs) {
				common = append(common, kv)
			}
		}
		sort.Strings(common)
		if len(common) > 0 {
			fmt.Fprintf(stdout, "  every policy: %s\n", strings.Join(common, " "))
		}
	}
	for i, sp := range specs {
		own := slices.DeleteFunc(per[i], func(kv string) bool { return slices.Contains(common, kv) })
		switch {
		case len(own) > 0:
			fmt.Fprintf(stdout, "  %s: %s\n", sp.Name, strings.Join(own, " "))
		case len(common) == 0:
			fmt.Fprintf(stdout, "  %s: the defaults\n", sp.Name)
		}
	}

	start := time.Now()
	results, runErr := simulators.Run(ctx, cfg)
	if results == nil {
		return runErr
	}
	sum := simulators.Summarize(cfg, results)
	sum.BanditConfig = *banditConfig
	sum.WallSeconds = time.Since(start).Seconds()
	sum.Command = "refinery simulate " + strings.Join(args, " ")
	sum.Version = fmt.Sprintf("refinery %s (kernels: %s)", version, kern.Current())
	if err := simulators.WriteSummaryMarkdown(stdout, sum); err != nil {
		return err
	}
	if *out != "" {
		if err := simulators.WriteOutputs(*out, cfg, results, sum); err != nil {
			return err
		}
		if runErr == nil {
			fmt.Fprintf(stdout, "\nwrote %s/{regret.csv,summary.json,summary.md,regret.png,regret.svg}\n", *out)
		}
	}
	if runErr != nil {
		at := "before its first step"
		switch lo, hi := sum.InterruptedSteps(); {
		case lo == hi && hi > 0:
			at = fmt.Sprintf("at step %d of %d", hi, *steps)
		case hi > 0:
			at = fmt.Sprintf("at steps %d to %d of %d", lo, hi, *steps)
		}
		if *out == "" {
			return interrupted{fmt.Sprintf("interrupted %s; no --out, so nothing written", at)}
		}
		return interrupted{fmt.Sprintf("interrupted %s; wrote partial results to %s", at, *out)}
	}
	if len(sum.Errors) > 0 {
		return fmt.Errorf("%d runs failed: %s", len(sum.Errors), sum.Errors[0])
	}
	return nil
}

// setFlags are the --set PATH=VALUE overrides of simulate, in order.
type setFlags []string

func (s *setFlags) String() string { return strings.Join(*s, ",") }

func (s *setFlags) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want PATH=VALUE, got %q", v)
	}
	*s = append(*s, v)
	return nil
}

// apply sets each PATH=VALUE in c, a preset's bandit configuration, by
// way of its JSON: PATH names nested object members with dots
// ("model.noise"), VALUE is JSON (a number, true, an object) or else a
// string. Each is two JSON merge patches (internal/mergepatch): one that
// removes the member at PATH, one that sets it to VALUE, so that an
// object VALUE replaces the member whole. The result is decoded
// strictly, so an unknown field or a value of the wrong type is an error
// naming it; validation comes later, with the policy's defaults filled
// in.
func (s setFlags) apply(c *bandit.Config) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	for _, kv := range s {
		path, val, _ := strings.Cut(kv, "=")
		var v any
		if err := json.Unmarshal([]byte(val), &v); err != nil {
			v = val
		}
		keys := strings.Split(path, ".")
		for _, leaf := range []any{nil, v} {
			patch, err := json.Marshal(leaf)
			if err != nil {
				return err
			}
			for i := len(keys) - 1; i >= 0; i-- {
				if patch, err = json.Marshal(map[string]json.RawMessage{keys[i]: patch}); err != nil {
					return err
				}
			}
			if raw, err = mergepatch.Apply(raw, patch); err != nil {
				return err
			}
		}
	}
	var out bandit.Config
	if err := bandit.DecodeStrict(raw, &out); err != nil {
		return fmt.Errorf("--set: %w", err)
	}
	*c = out
	return nil
}

// playedSettings returns the settings of the bandit configuration that
// spec plays on env (simulators.BanditConfig, defaults filled in) that
// differ from the service's defaults for its policy kind, as sorted
// PATH=VALUE pairs (VALUE in JSON, a string bare): what a reader needs of
// a preset, which the whole configuration, full of zeros that mean "the
// default", buried (issue 30, polish). training.min_interval is left
// out: a simulation retrains by steps (--train-every), never by time.
func playedSettings(spec simulators.PolicySpec, env simulators.Env, preset simulators.Preset) []string {
	played, err := simulators.BanditConfig(spec, env, preset)
	if err != nil {
		return []string{"(" + err.Error() + ")"} // said again, as an error, below
	}
	def := bandit.Config{Name: played.Name, Arms: played.Arms, Features: played.Features,
		Policy: bandit.PolicyConfig{Kind: played.Policy.Kind, Epsilon: played.Policy.Epsilon, Laplace: played.Policy.Laplace}}
	bandit.SetDefaults(&def)
	a, b := flatJSON(played), flatJSON(&def)
	var out []string
	for path, v := range a {
		if v != b[path] && path != "training.min_interval" && path != "name" && path != "arms" && path != "features" {
			if s, err := strconv.Unquote(v); err == nil && strings.HasPrefix(v, `"`) {
				v = s // a string reads better bare: model.noise=per-arm
			}
			out = append(out, path+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// flatJSON returns the members of v's JSON object by dotted path, each
// as its JSON; arrays are single values.
func flatJSON(v any) map[string]string {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	out := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			b, _ := json.Marshal(v)
			out[prefix+k] = string(b)
		}
	}
	walk("", m)
	return out
}
