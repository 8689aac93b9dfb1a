package simulators

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refinery-bandits/refinery/policy"
)

// RunConfig configures an offline regret simulation.
type RunConfig struct {
	// Env is the environment every run plays. Runs share it read-only.
	Env Env
	// Policies to compare.
	Policies []PolicySpec
	// Steps per run and Seeds per policy: seeds FirstSeed ..
	// FirstSeed+Seeds-1.
	Steps, Seeds int
	// FirstSeed is the first seed; zero means 1. Seeds are independent,
	// so a run of seeds 6..10 extends one of seeds 1..5.
	FirstSeed int
	// Preset configures the neural and linear policies.
	Preset Preset
	// Workers is the number of runs in flight; zero means GOMAXPROCS.
	Workers int
	// Every keeps a regret point every this many steps; zero means
	// max(1, Steps/500).
	Every int
	// Progress, if not nil, receives a progress line (steps/s, ETA)
	// about twice a second and a final newline.
	Progress io.Writer
}

func (c *RunConfig) validate() error {
	switch {
	case c.Env == nil:
		return errors.New("no environment")
	case len(c.Policies) == 0:
		return errors.New("no policies")
	case c.Steps < 1:
		return fmt.Errorf("steps %d, want >= 1", c.Steps)
	case c.Seeds < 1:
		return fmt.Errorf("seeds %d, want >= 1", c.Seeds)
	case c.FirstSeed < 0:
		return fmt.Errorf("first seed %d, want >= 0", c.FirstSeed)
	case c.Workers < 0:
		return fmt.Errorf("workers %d, want >= 0", c.Workers)
	}
	return nil
}

// RunResult is the outcome of one (policy, seed) run.
type RunResult struct {
	Policy string
	Seed   int
	// Steps completed; less than the configured steps when the run was
	// interrupted or failed.
	Steps  int
	Points []RegretPoint
	// Final cumulative regrets after Steps steps.
	Expected, Realized float64
	Wall               time.Duration
	// Err is the run's failure, or the context's error if it was
	// interrupted.
	Err error
}

// Complete reports whether the run finished all its steps.
func (r *RunResult) Complete(steps int) bool { return r.Err == nil && r.Steps == steps }

// Seeds: the environment's random stream of seed s is PCG(s, envStream),
// shared by every policy (common random numbers); each policy's own stream
// is PCG(s, fnv64(policy name)).
const envStream = 0x656e76 // "env"

func policyStream(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// NewPolicy builds the policy of spec for env with the preset's settings.
func NewPolicy(spec PolicySpec, env Env, p Preset, rng *rand.Rand) (policy.Policy, error) {
	d, k := env.NumFeatures(), env.NumArms()
	switch spec.Kind {
	case "uniform":
		return policy.NewUniform(k, d, rng)
	case "greedy":
		cfg := p.Neural
		cfg.Epsilon = 0
		return policy.NewEpsilonGreedy(d, k, cfg, rng)
	case "eps-greedy":
		cfg := p.Neural
		cfg.Epsilon = spec.Epsilon
		return policy.NewEpsilonGreedy(d, k, cfg, rng)
	case "mf-ts":
		return policy.NewMeanFieldTS(d, k, p.Neural, rng)
	case "refined-ts":
		return policy.NewRefinedTS(d, k, p.Neural, rng)
	case "linear-ts":
		cfg := p.Linear
		cfg.Arms, cfg.Features = k, d
		if cfg.ProbabilitySamples == 0 {
			cfg.ProbabilitySamples = -1 // not needed offline
		}
		return policy.NewLinear(cfg, rng)
	}
	return nil, fmt.Errorf("unknown policy kind %q", spec.Kind)
}

// cost orders jobs so that the most expensive start first.
var cost = map[string]int{"refined-ts": 0, "mf-ts": 1, "eps-greedy": 2, "greedy": 2, "linear-ts": 3, "uniform": 4}

// Run plays every (policy, seed) pair for cfg.Steps steps, Workers runs
// at a time, and returns one result per pair in policy-then-seed order.
// Each run is a deterministic function of its seed. When ctx is
// cancelled, runs in flight stop at their next step and runs not started
// are skipped; their results carry ctx's error, and Run returns the
// results together with that error.
func Run(ctx context.Context, cfg RunConfig) ([]*RunResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	workers := cfg.Workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	every := cfg.Every
	if every == 0 {
		every = max(1, cfg.Steps/500)
	}
	var results []*RunResult
	for _, p := range cfg.Policies {
		first := max(cfg.FirstSeed, 1)
		for s := first; s < first+cfg.Seeds; s++ {
			results = append(results, &RunResult{Policy: p.Name, Seed: s})
		}
	}
	specs := map[string]PolicySpec{}
	for _, p := range cfg.Policies {
		specs[p.Name] = p
	}
	order := make([]*RunResult, len(results))
	copy(order, results)
	sort.SliceStable(order, func(i, j int) bool {
		return cost[specs[order[i].Policy].Kind] < cost[specs[order[j].Policy].Kind]
	})

	var done, finished atomic.Int64
	total := int64(len(results) * cfg.Steps)
	stopProgress := startProgress(cfg.Progress, &done, &finished, total, len(results))

	jobs := make(chan *RunResult)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				runOne(ctx, r, specs[r.Policy], cfg, every, &done)
				finished.Add(1)
			}
		}()
	}
	for _, r := range order {
		if ctx.Err() != nil {
			r.Err = ctx.Err()
			continue
		}
		jobs <- r
	}
	close(jobs)
	wg.Wait()
	stopProgress()
	return results, ctx.Err()
}

func runOne(ctx context.Context, r *RunResult, spec PolicySpec, cfg RunConfig, every int, done *atomic.Int64) {
	start := time.Now()
	defer func() { r.Wall = time.Since(start) }()
	defer func() {
		// A panic is a bug, but one run's bug must not take the other
		// runs' results down with it.
		if p := recover(); p != nil {
			r.Err = fmt.Errorf("%s seed %d: panic: %v", spec.Name, r.Seed, p)
		}
	}()
	envRNG := rand.New(rand.NewPCG(uint64(r.Seed), envStream))
	polRNG := rand.New(rand.NewPCG(uint64(r.Seed), policyStream(spec.Name)))
	pol, err := NewPolicy(spec, cfg.Env, cfg.Preset, polRNG)
	if err != nil {
		r.Err = err
		return
	}
	reg := NewRegret(every)
	defer func() {
		r.Steps = reg.Steps()
		r.Points = reg.Points()
		r.Expected, r.Realized = reg.Cumulative()
	}()
	for range cfg.Steps {
		if err := ctx.Err(); err != nil {
			r.Err = err
			return
		}
		st := cfg.Env.Next(envRNG)
		d, err := pol.Decide(ctx, st.X, nil)
		if err != nil {
			r.Err = fmt.Errorf("%s seed %d step %d: decide: %w", spec.Name, r.Seed, reg.Steps()+1, err)
			return
		}
		reg.Record(st, d.Arm)
		if err := pol.Observe(ctx, st.X, d.Arm, st.Realized[d.Arm]); err != nil {
			r.Err = fmt.Errorf("%s seed %d step %d: observe: %w", spec.Name, r.Seed, reg.Steps(), err)
			return
		}
		done.Add(1)
	}
}

// startProgress prints a progress line to w about twice a second until
// the returned function is called.
func startProgress(w io.Writer, done, finished *atomic.Int64, total int64, runs int) func() {
	if w == nil {
		return func() {}
	}
	start := time.Now()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	line := func() {
		d := done.Load()
		el := time.Since(start).Seconds()
		rate := float64(d) / max(el, 1e-9)
		eta := "?"
		if rate > 0 {
			eta = (time.Duration(float64(total-d)/rate) * time.Second).Round(time.Second).String()
		}
		const width = 30
		filled := int(width * d / max(total, 1))
		bar := make([]byte, width)
		for i := range bar {
			switch {
			case i < filled:
				bar[i] = '='
			case i == filled:
				bar[i] = '>'
			default:
				bar[i] = ' '
			}
		}
		fmt.Fprintf(w, "\r[%s] %3.0f%% %d/%d steps  %.0f steps/s  ETA %s  runs %d/%d ",
			bar, 100*float64(d)/float64(max(total, 1)), d, total, rate, eta, finished.Load(), runs)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				line()
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
		line()
		fmt.Fprintln(w)
	}
}
