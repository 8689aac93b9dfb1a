package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/ope"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// opeBenchModel is the logging bandit's model and the candidates' (they
// inherit it, as refinery evaluate's kind candidates do): the fast
// preset's network, training and refinement (simulators.Presets).
var opeBenchModel = map[string]any{
	"model":      map[string]any{"hidden": []int{100, 100}, "prior_variance": 1},
	"training":   map[string]any{"iterations": 100, "iterations_per_reward": 10, "stop_tolerance": 0, "min_interval": "0s"},
	"refinement": map[string]any{"fractions": []float64{0.7, 0.3}, "iterations": 200},
}

// opeBenchMarker starts the hand-written part of bench/ope.md, which a
// new run keeps.
const opeBenchMarker = "<!-- written by hand below: kept by make bench-ope -->"

// opeBenchCandidates are the candidates of make bench-ope.
const opeBenchCandidates = "logging,uniform,greedy,linear-ts,refined-ts"

// TestOPEBench is make bench-ope (bench/ope.md): on the mushroom and
// the wheel bandits, for each logging policy of OPE_LOGGING (default
// "eps-greedy,linear-ts": eps-greedy with epsilon 0.1, linear TS with
// its computed propensities, issue 30's failing case), OPE_REPS times
// (default 5) with independent seeds, it logs OPE_DECISIONS (default
// 20,000) decisions through serve over loopback HTTP into PostgreSQL
// (api/client, 4 clients), estimates the candidates from the log exactly as refinery
// evaluate does (ope.ReadStore, simulators.Evaluate), and measures each
// frozen candidate's true value: the mean of Σ_a π(a|x) E[r|x,a] over
// every one of the mushroom bandit's 8,124 equally likely contexts
// (exact), and over OPE_TRUTH (default 100,000) fresh draws of the
// wheel, the candidate's probabilities from the same agent that the
// estimates used. It writes the table (estimate, interval, truth,
// coverage over the repetitions) to OPE_BENCH_OUT and a plot of the
// first repetition per environment beside it. Skipped unless
// OPE_BENCH_OUT is set; needs DATABASE_URL and the mushroom data
// (OPE_DATA, default ../../data).
func TestOPEBench(t *testing.T) {
	out := os.Getenv("OPE_BENCH_OUT")
	if out == "" {
		t.Skip("OPE_BENCH_OUT not set (make bench-ope)")
	}
	reps, decisions, truthN := envInt(t, "OPE_REPS", 5), envInt(t, "OPE_DECISIONS", 20000), envInt(t, "OPE_TRUTH", 100000)
	data := os.Getenv("OPE_DATA")
	if data == "" {
		data = "../../data"
	}
	// The commit measured, read before the run: the tree may change
	// while it runs.
	commit := measuredCommit()
	url := storetest.FreshSchemaURL(t)
	// serve as startServe runs it, with the dashboard's sampler slowed to
	// once an hour: it counts and lists every bandit's decisions each
	// second, and 40 bandits of 20,000 decisions made its queries time
	// out and slowed the logging (it is not what is measured).
	m := NewMain()
	m.Addr, m.DatabaseURL, m.Seed, m.DashboardEvery = "127.0.0.1:0", url, 7, time.Hour
	m.Logger = testLogger(t, slog.LevelWarn)
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	defer m.Close()
	waitReady(t, m.URL())
	cl, err := apiclient.New(m.URL(), &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	loggers := strings.Split(os.Getenv("OPE_LOGGING"), ",")
	if os.Getenv("OPE_LOGGING") == "" {
		loggers = []string{"eps-greedy", "linear-ts"}
	}
	for _, lp := range loggers {
		if _, ok := opeBenchLoggers[lp]; !ok {
			t.Fatalf("OPE_LOGGING: unknown logging policy %q (want eps-greedy, linear-ts)", lp)
		}
	}
	start := time.Now()
	var results []opeBenchResult
	for _, envName := range []string{"mushroom", "wheel"} {
		env, err := newSimEnv(envName, data)
		if err != nil {
			t.Fatal(err)
		}
		for _, lp := range loggers {
			for rep := 1; rep <= reps; rep++ {
				r := opeBenchRun(t, ctx, cl, st, env, lp, rep, decisions, truthN)
				results = append(results, r)
				if rep == 1 {
					png := strings.TrimSuffix(out, filepath.Ext(out)) + "-" + envName + "-" + lp + ".png"
					title := fmt.Sprintf("%s, %s log of %d, seed 1: estimates (95%% intervals) and truth", envName, lp, decisions)
					if err := simulators.SaveOPEPlot(png, title, r.report, r.truth); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	var csv strings.Builder
	csv.WriteString("env,logging,rep,candidate,estimator,value,lo,hi,truth,truth_se,value_on_log_contexts,ess,max_weight,max_weight_share,unsupported_mass,warnings\n")
	for _, r := range results {
		for _, c := range r.report.Candidates {
			un := math.NaN()
			if c.UnsupportedMass != nil {
				un = *c.UnsupportedMass
			}
			for _, e := range c.Estimates {
				fmt.Fprintf(&csv, "%s,%s,%d,%s,%s,%g,%g,%g,%g,%g,%g,%g,%g,%g,%g,%d\n", r.env, r.logging, r.rep, c.Name, e.Estimator, e.Value, e.Lo, e.Hi,
					r.truth[c.Name], r.truthSE[c.Name], r.onLog[c.Name], c.ESS, c.MaxWeight, c.MaxWeightShare, un, len(c.Warnings))
			}
		}
	}
	if err := os.WriteFile(strings.TrimSuffix(out, filepath.Ext(out))+"-runs.csv", []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	md := opeBenchMarkdown(results, loggers, commit, reps, decisions, truthN, time.Since(start))
	// The reading of the numbers is written by hand below a marker; a
	// new run keeps it (it says which run it read).
	if old, err := os.ReadFile(out); err == nil {
		if i := strings.Index(string(old), opeBenchMarker); i >= 0 {
			md += "\n" + string(old[i:])
		}
	}
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s in %s", out, time.Since(start).Round(time.Second))
}

// measuredCommit is the short hash of HEAD, "(dirty)" when the tree
// differs from it: the commit a benchmark measures.
func measuredCommit() string {
	head, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	commit := strings.TrimSpace(string(head))
	if exec.Command("git", "diff", "--quiet", "HEAD").Run() != nil {
		commit += " (dirty)"
	}
	return commit
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return v
}

// opeBenchLoggers are the logging policies of OPE_LOGGING.
var opeBenchLoggers = map[string]map[string]any{
	"eps-greedy": {"kind": "eps-greedy", "epsilon": 0.1},
	"linear-ts":  {"kind": "linear-ts"},
}

// opeBenchResult is one repetition on one environment and logging
// policy.
type opeBenchResult struct {
	env     string
	logging string
	rep     int
	report  *simulators.OPEReport
	truth   map[string]float64 // candidate -> true value
	truthSE map[string]float64
	// onLog is each candidate's true value on the evaluation rows'
	// contexts (the oracle's expected rewards, kept while logging): the
	// estimand without the contexts' sampling error.
	onLog                                 map[string]float64
	logSeconds, evalSeconds, truthSeconds float64
}

// opeBenchRun logs decisions of a fresh bandit of the logging policy
// through the service, evaluates the candidates from the log and
// measures their truth.
func opeBenchRun(t *testing.T, ctx context.Context, cl *apiclient.Client, st *store.Postgres, env *simEnv, logging string, rep, decisions, truthN int) opeBenchResult {
	name := fmt.Sprintf("%s-%s-%d", env.name, logging, rep)
	cfg := map[string]any{"name": name, "arms": env.env.ArmNames(), "features": env.features,
		"policy": opeBenchLoggers[logging]}
	for k, v := range opeBenchModel {
		cfg[k] = v
	}
	if _, err := cl.CreateBandit(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	res := opeBenchResult{env: env.name, logging: logging, rep: rep, truth: map[string]float64{}, truthSE: map[string]float64{}, onLog: map[string]float64{}}
	t0 := time.Now()
	const clients = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	expectedOf := map[string][]float64{}
	errs := make(chan error, clients)
	arms := env.env.ArmNames()
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(rep), uint64(c)))
			for i := c; i < decisions; i += clients {
				x, expected, realized, err := env.next(rng)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				expectedOf["e"+strconv.Itoa(i)] = expected
				mu.Unlock()
				d, err := cl.Decide(ctx, name, apiclient.DecisionRequest{EventID: "e" + strconv.Itoa(i), Context: x})
				if err != nil {
					errs <- err
					return
				}
				if err := cl.Reward(ctx, name, d.EventID, realized[slices.Index(arms, d.Arm)]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res.logSeconds = time.Since(t0).Seconds()

	t0 = time.Now()
	b, err := st.GetBandit(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	base, err := bandit.ParseConfig(b.Config)
	if err != nil {
		t.Fatal(err)
	}
	cands, err := ope.Candidates(base, opeBenchCandidates, nil)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := ope.ReadStore(ctx, st, base, name, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Rows) != decisions {
		t.Fatalf("%d rewarded decisions in the log, want %d", len(lg.Rows), decisions)
	}
	enc := bandit.NewEncoder(base.Features)
	res.report, err = simulators.Evaluate(ctx, simulators.OPEConfig{
		Rows: lg.Rows, Arms: len(base.Arms), Dim: enc.Dim(), Candidates: cands,
		TrainFraction: 0.5, TrainEvery: 100, Level: 0.95, Seed: uint64(rep), Keep: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	res.evalSeconds = time.Since(t0).Seconds()

	// The truth: each frozen candidate on fresh draws, common to all
	// candidates of the repetition.
	t0 = time.Now()
	for i := range res.report.Candidates {
		c := &res.report.Candidates[i]
		if c.Fitted == nil {
			continue
		}
		if c.Fitted.Agent() == nil {
			c.Fitted, c.EvalRows = nil, nil
			continue
		}
		rng := rand.New(rand.NewPCG(uint64(rep), 1<<40))
		var sum, sum2 float64
		draws := truthN
		// The mushroom bandit draws one of its mushrooms uniformly: its
		// truth is the mean over all of them, without sampling error.
		all, exact := env.env.(*simulators.Mushroom)
		if exact {
			draws = all.Len()
		}
		for k := range draws {
			var js json.RawMessage
			var expected []float64
			var err error
			if exact {
				var x []float64
				x, expected = all.At(k)
				js, err = env.enc.Decode(x)
			} else {
				js, expected, _, err = env.next(rng)
			}
			if err != nil {
				t.Fatal(err)
			}
			x, err := enc.Encode(js)
			if err != nil {
				t.Fatal(err)
			}
			p, _, err := c.Fitted.Agent().Probabilities(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			var v float64
			for a := range p {
				v += p[a] * expected[a]
			}
			sum += v
			sum2 += v * v
		}
		var onLog float64
		for i, row := range c.EvalRows {
			ex := expectedOf[lg.Rows[res.report.TrainRows+i].EventID]
			for a := range row.Pi {
				onLog += row.Pi[a] * ex[a] / float64(len(c.EvalRows))
			}
		}
		res.onLog[c.Name] = onLog
		mean := sum / float64(draws)
		res.truth[c.Name] = mean
		if !exact { // the contexts' sampling error; none when all are enumerated
			res.truthSE[c.Name] = math.Sqrt(max(sum2/float64(draws)-mean*mean, 0) / float64(draws))
		}
		// Release the candidate: the repetitions' agents would add up.
		c.Fitted.Close()
		c.Fitted, c.EvalRows = nil, nil
	}
	res.truthSeconds = time.Since(t0).Seconds()
	t.Logf("%s, %s log, rep %d: logged in %.0fs, evaluated in %.0fs, truth in %.0fs", env.name, logging, rep, res.logSeconds, res.evalSeconds, res.truthSeconds)
	return res
}

// opeBenchMarkdown renders the results.
func opeBenchMarkdown(results []opeBenchResult, loggers []string, commit string, reps, decisions, truthN int, wall time.Duration) string {
	var b strings.Builder
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "<!-- generated by make bench-ope (TestOPEBench in cmd/refinery) at commit %s; load at the end %s; wall %s -->\n\n",
		commit, strings.Join(strings.Fields(string(load))[:3], " "), wall.Round(time.Second))
	fmt.Fprintf(&b, "Per environment and logging policy (%s; eps-greedy has epsilon 0.1, linear-ts logs its computed propensities): %d repetitions (seeds 1..%d), each a log of %d decisions through serve, candidates fit on the oldest half, estimated on the newest %d; the truth of each frozen candidate is its mean expected reward over all 8,124 mushrooms (exact: the bandit draws them uniformly) and over %d fresh draws of the wheel (± its standard error). clipped-ips caps weights at %g, switch uses ips where pi/mu <= %g (Wang et al. 2017); \"warned\" counts the repetitions whose diagnostics warned (ESS under %.0f%% of the rows, the largest weight over %.0f%% of their sum, or over %.0f%% of pi on arms mu could not choose).\n\n",
		strings.Join(loggers, ", "), reps, reps, decisions, decisions/2, truthN, float64(simulators.DefaultClip), float64(simulators.DefaultSwitchTau),
		100*simulators.MinESSFraction, 100*simulators.MaxWeightShare, 100*simulators.MaxUnsupportedMass)
	for _, group := range opeBenchGroups(results) {
		rs := group.rs
		env := group.env
		fmt.Fprintf(&b, "### %s, %s log\n\n", env, group.logging)
		fmt.Fprintf(&b, "| candidate | estimator | mean estimate | mean 95%% interval | mean truth (± SE) | on the evaluation contexts | mean error | RMSE | coverage | mean ESS | warned |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for ci, c := range rs[0].report.Candidates {
			for ei, e := range c.Estimates {
				var est, lo, hi, tr, trse, onLog, errSum, sq, ess float64
				covered, withTruth := 0, 0
				for _, r := range rs {
					ce := r.report.Candidates[ci]
					x := ce.Estimates[ei]
					est += x.Value / float64(len(rs))
					lo += x.Lo / float64(len(rs))
					hi += x.Hi / float64(len(rs))
					ess += ce.ESS / float64(len(rs))
					truth, ok := r.truth[ce.Name]
					if !ok {
						truth, ok = r.report.LoggedMean, c.Name == "logging"
						if !ok {
							continue
						}
					}
					withTruth++
					tr += truth
					trse += r.truthSE[ce.Name]
					onLog += r.onLog[ce.Name]
					errSum += x.Value - truth
					sq += (x.Value - truth) * (x.Value - truth)
					if x.Lo <= truth && truth <= x.Hi {
						covered++
					}
				}
				truthCell, onLogCell, errCell, rmse, cov := "", "", "", "", ""
				if withTruth > 0 {
					n := float64(withTruth)
					truthCell = fmt.Sprintf("%.4g ± %.2g", tr/n, trse/n)
					if trse == 0 {
						truthCell = fmt.Sprintf("%.4g (exact)", tr/n)
					}
					if c.Name == "logging" {
						truthCell = fmt.Sprintf("%.4g (logged mean)", tr/n)
					}
					if c.Name != "logging" {
						onLogCell = fmt.Sprintf("%.4g", onLog/n)
					}
					errCell = fmt.Sprintf("%+.3g", errSum/n)
					rmse = fmt.Sprintf("%.3g", math.Sqrt(sq/n))
					cov = fmt.Sprintf("%d/%d", covered, withTruth)
				}
				name, warned := "", ""
				if ei == 0 {
					name = c.Name
					n := 0
					for _, r := range rs {
						if len(r.report.Candidates[ci].Warnings) > 0 {
							n++
						}
					}
					warned = fmt.Sprintf("%d/%d", n, len(rs))
				}
				fmt.Fprintf(&b, "| %s | %s | %.4g | [%.4g, %.4g] | %s | %s | %s | %s | %s | %.0f | %s |\n", name, e.Estimator, est, lo, hi, truthCell, onLogCell, errCell, rmse, cov, ess, warned)
			}
		}
		// Coverage pooled over the candidates other than logging.
		fmt.Fprintf(&b, "\nCoverage pooled over uniform, greedy, linear TS and refined TS:")
		for ei, e := range rs[0].report.Candidates[0].Estimates {
			covered, n := 0, 0
			for _, r := range rs {
				for _, c := range r.report.Candidates {
					truth, ok := r.truth[c.Name]
					if !ok || ei >= len(c.Estimates) {
						continue
					}
					n++
					if x := c.Estimates[ei]; x.Lo <= truth && truth <= x.Hi {
						covered++
					}
				}
			}
			fmt.Fprintf(&b, " %s %d/%d (%.0f%%);", e.Estimator, covered, n, 100*float64(covered)/float64(max(n, 1)))
		}
		fmt.Fprintf(&b, "\n\nThe candidates' probabilities (seed 1): ")
		for i, c := range rs[0].report.Candidates {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s from %s", c.Name, c.PiEstimator)
		}
		b.WriteString(".\n")
		var logS, evalS, truthS float64
		for _, r := range rs {
			logS += r.logSeconds
			evalS += r.evalSeconds
			truthS += r.truthSeconds
		}
		fmt.Fprintf(&b, "\nPer repetition (mean): logging %.0f s, fitting and estimating %.0f s, truth %.0f s (wall).\n\n", logS/float64(len(rs)), evalS/float64(len(rs)), truthS/float64(len(rs)))
	}
	return b.String()
}

// opeBenchGroup is the repetitions of one environment and logging policy.
type opeBenchGroup struct {
	env, logging string
	rs           []opeBenchResult
}

// opeBenchGroups groups the results by environment and logging policy,
// in the order they ran.
func opeBenchGroups(results []opeBenchResult) []opeBenchGroup {
	var out []opeBenchGroup
	for _, r := range results {
		if n := len(out); n > 0 && out[n-1].env == r.env && out[n-1].logging == r.logging {
			out[n-1].rs = append(out[n-1].rs, r)
			continue
		}
		out = append(out, opeBenchGroup{env: r.env, logging: r.logging, rs: []opeBenchResult{r}})
	}
	return out
}
