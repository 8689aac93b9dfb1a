package simulators

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/term"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/cpustat"
	"github.com/refinery-bandits/refinery/store"
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
	// Preset configures the simulated bandits (see BanditConfig).
	Preset Preset
	// TrainEvery, when positive, overrides the preset's: the agents
	// retrain after this many rewards.
	TrainEvery int
	// RewardDelay is how many decisions late rewards arrive: the reward
	// of decision t is sent after decision t+RewardDelay (0: before the
	// next decision, the paper's protocol). Rewards still pending at the
	// end of a run are never sent.
	RewardDelay int
	// KeepDecisions keeps every decision of every run in
	// RunResult.Decisions.
	KeepDecisions bool
	// Workers is the number of runs in flight; zero means GOMAXPROCS.
	Workers int
	// Every keeps a regret point every this many steps; zero means
	// max(1, Steps/500).
	Every int
	// Progress, if not nil, receives a progress line (steps/s, ETA)
	// about twice a second and a final newline.
	Progress io.Writer
	// Shadow, if not nil, is a candidate every bandit runs beside its
	// policy (bandit.Config.Shadow, apprentice mode): trained on the
	// policy's log and asked at each of its decisions without acting on
	// the answer. RunResult.ShadowExpected is the expected regret of its
	// choices there, which the environment knows exactly: how the
	// candidate's model decides on the rows another policy collected.
	// A --bandit-config file's own shadow is recorded the same way.
	Shadow *PolicySpec
	// AtEnd, if not nil, is called with each run's result (its regret
	// figures filled in) and bandit after its last step (not after a run
	// that failed or was interrupted), before the bandit is closed: to ask the trained bandit questions the regret
	// does not answer (bench/model-or-rows/probe asks it about every
	// mushroom). Its error fails the run. Runs call it concurrently
	// when Workers > 1.
	AtEnd func(ctx context.Context, r *RunResult, agent *bandit.Agent) error
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
	case c.TrainEvery < 0:
		return fmt.Errorf("train every %d, want >= 0", c.TrainEvery)
	case c.RewardDelay < 0:
		return fmt.Errorf("reward delay %d, want >= 0", c.RewardDelay)
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
	// CPU is the CPU time of the run's goroutine (cpustat.Measure; in
	// step mode training and refinement run on it); zero where thread
	// CPU time cannot be read.
	CPU time.Duration
	// Samples counts the decisions by what they acted on.
	Samples SampleCounts
	// TopArmShare is the share of the decisions of the last
	// LockInWindow steps (all steps in a shorter run) that went to the
	// arm chosen most often then, and TopArm that arm; LockedIn reports
	// whether the run locked into it (TopArmShare >= LockInShare).
	TopArm      int
	TopArmShare float64
	// ShadowDecisions counts the decisions at which the bandit's
	// candidate (RunConfig.Shadow) gave a choice, and ShadowExpected is
	// the cumulative expected regret of those choices: the candidate's
	// counterfactual regret on this run's contexts, never acted on.
	ShadowDecisions int
	ShadowExpected  float64
	// Decisions, with RunConfig.KeepDecisions, are the run's decisions in
	// order.
	Decisions []*bandit.Decision
	// Err is the run's failure, or the context's error if it was
	// interrupted.
	Err error
}

// SampleCounts counts decisions by the kind of sample they acted on.
type SampleCounts map[bandit.SampleKind]int

func (c *SampleCounts) add(k bandit.SampleKind) {
	if *c == nil {
		*c = SampleCounts{}
	}
	(*c)[k]++
}

// Complete reports whether the run finished all its steps.
func (r *RunResult) Complete(steps int) bool { return r.Err == nil && r.Steps == steps }

// A run "locks into one arm" when, over its last LockInWindow steps (all
// of them in a shorter run), one arm took at least LockInShare of the
// decisions: mean-field Thompson sampling whose posterior collapsed
// always passes on the mushroom bandit (bench/mushroom/README.md), where
// the optimal policy eats about half the time.
const (
	LockInWindow = 2000
	LockInShare  = 0.99
)

// LockedIn reports whether the run locked into one arm (LockInWindow).
func (r *RunResult) LockedIn() bool { return r.TopArmShare >= LockInShare }

// armCounter counts the arms chosen over a run's last window steps.
type armCounter struct {
	from   int // first step counted, 0-based
	counts []int
}

func newArmCounter(steps, arms int) armCounter {
	return armCounter{from: max(steps-LockInWindow, 0), counts: make([]int, arms)}
}

func (c *armCounter) record(step, arm int) {
	if step >= c.from && arm >= 0 && arm < len(c.counts) {
		c.counts[arm]++
	}
}

// top returns the arm chosen most often in the window and its share.
func (c *armCounter) top() (arm int, share float64) {
	var n, best int
	for a, k := range c.counts {
		n += k
		if k > best {
			arm, best = a, k
		}
	}
	if n == 0 {
		return 0, 0
	}
	return arm, float64(best) / float64(n)
}

// Seeds: the environment's random stream of seed s is PCG(s, envStream),
// shared by every policy (common random numbers); each policy's own stream
// is PCG(s, fnv64(policy name)).
const envStream = 0x656e76 // "env"

func policyStream(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// cost orders jobs so that the most expensive start first
// (bandit.Capabilities.Cost).
func cost(kind string) int { return bandit.KindCapabilities(bandit.PolicyKind(kind)).Cost }

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
		return cost(specs[order[i].Policy].Kind) < cost(specs[order[j].Policy].Kind)
	})

	prog := newProgress(results, cfg.Steps, workers)
	stopProgress := prog.show(cfg.Progress)

	jobs := make(chan *RunResult)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				prog.begin(r)
				r.CPU = cpustat.Measure(func() { runOne(ctx, r, specs[r.Policy], cfg, every, prog.done[r.Policy]) })
				prog.end(r)
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

// ServiceSeed is the seed of the bandit service that plays policy name
// on seed s (bandit.ServiceConfig.Seed): the same (seed, policy) pair
// gives the same decisions through Run and through a service of this
// seed in step mode, over its Go or HTTP API. A policy's training methods
// ("mf-ts@ngvi") do not enter it: every method of a policy starts from
// the same initial weights and random streams on a seed (common random
// numbers), and "mf-ts@elbo" decides exactly as "mf-ts" under the
// default preset.
func ServiceSeed(seed int, name string) uint64 {
	name, _, _ = strings.Cut(name, "@")
	return uint64(seed)<<32 ^ policyStream(name) | 1
}

// seedName is the name ServiceSeed derives spec's agent seed from:
// refined-ts-supply plays refined-ts's seed, so that the two differ on a
// seed only by the sample supply.
func (spec PolicySpec) seedName() string {
	if spec.Supply {
		return spec.Kind
	}
	return spec.Name
}

// attachShadow makes the policy of spec, as the preset configures it,
// the candidate of bc (bandit.Config.Shadow).
func attachShadow(bc *bandit.Config, spec PolicySpec, env Env, p Preset) error {
	sc, err := banditConfig(spec, env, p)
	if err != nil {
		return fmt.Errorf("shadow %s: %w", spec.Name, err)
	}
	bc.Shadow = bandit.ShadowOf(sc, time.Time{})
	return nil
}

// StepInterval is how far a simulation moves the agents' clock per
// decision (bandit.StepConfig.Clock): a service taking 100 decisions a
// second.
const StepInterval = 10 * time.Millisecond

func runOne(ctx context.Context, r *RunResult, spec PolicySpec, cfg RunConfig, every int, done *atomic.Int64) {
	start := time.Now()
	defer func() { r.Wall = time.Since(start) }()
	defer func() {
		// A panic is a bug, but one run's bug must not take the other
		// runs' results down with it.
		if p := recover(); p != nil {
			r.Err = fmt.Errorf("%s seed %d: panic: %v", spec.Name, r.Seed, p)
		}
		// Whatever failed after an interrupt failed because of it: the
		// run was interrupted, not broken.
		if r.Err != nil && ctx.Err() != nil {
			r.Err = ctx.Err()
		}
	}()
	// Create fills in the defaults and validates, once.
	bc, err := banditConfig(spec, cfg.Env, cfg.Preset)
	if err != nil {
		r.Err = err
		return
	}
	if cfg.Shadow != nil {
		if err := attachShadow(bc, *cfg.Shadow, cfg.Env, cfg.Preset); err != nil {
			r.Err = err
			return
		}
	}
	clock := bandit.NewManualClock(time.Unix(0, 0).UTC())
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{
		Seed: ServiceSeed(r.Seed, spec.seedName()),
		Step: &bandit.StepConfig{Clock: clock, TrainEvery: cfg.Preset.Retraining(cfg.TrainEvery)},
	})
	defer svc.Close(context.WithoutCancel(ctx))
	if err := svc.Load(ctx); err != nil {
		r.Err = err
		return
	}
	agent, err := svc.Create(ctx, bc)
	if err != nil {
		r.Err = fmt.Errorf("%s seed %d: create the bandit: %w", spec.Name, r.Seed, err)
		return
	}
	enc := bandit.NewEncoder(bc.Features)
	envRNG := rand.New(rand.NewPCG(uint64(r.Seed), envStream))
	reg := NewRegret(every)
	arms := newArmCounter(cfg.Steps, len(bc.Arms))
	record := func() { // r's figures from reg and arms
		r.Steps = reg.Steps()
		r.Points = reg.Points()
		r.Expected, r.Realized = reg.Cumulative()
		r.TopArm, r.TopArmShare = arms.top()
	}
	defer record()
	type pending struct {
		id     string
		reward float64
	}
	var queue []pending // rewards not yet sent, oldest first
	for i := range cfg.Steps {
		if err := ctx.Err(); err != nil {
			r.Err = err
			return
		}
		st := cfg.Env.Next(envRNG)
		raw, err := enc.Decode(st.X)
		if err != nil {
			r.Err = fmt.Errorf("%s seed %d step %d: %w", spec.Name, r.Seed, i+1, err)
			return
		}
		id := "e" + strconv.Itoa(i+1)
		out, err := agent.Decide(ctx, bandit.DecideRequest{EventID: id, Context: raw})
		if err != nil {
			r.Err = fmt.Errorf("%s seed %d step %d: decide: %w", spec.Name, r.Seed, i+1, err)
			return
		}
		arm := out.Decision.Arm
		reg.Record(st, arm)
		if out.Decision.ShadowPropensities != nil {
			e, _ := st.Regret(out.Decision.ShadowArm)
			r.ShadowExpected += e
			r.ShadowDecisions++
		}
		arms.record(i, arm)
		r.Samples.add(out.Decision.Sample)
		if cfg.KeepDecisions {
			r.Decisions = append(r.Decisions, out.Decision)
		}
		queue = append(queue, pending{id, st.Realized[arm]})
		// Rewards arrive RewardDelay decisions late.
		for len(queue) > cfg.RewardDelay {
			if err := agent.Reward(ctx, queue[0].id, queue[0].reward); err != nil {
				r.Err = fmt.Errorf("%s seed %d step %d: reward: %w", spec.Name, r.Seed, i+1, err)
				return
			}
			queue = queue[1:]
		}
		clock.Advance(StepInterval)
		done.Add(1)
	}
	if cfg.AtEnd != nil {
		record()
		if err := cfg.AtEnd(ctx, r, agent); err != nil {
			r.Err = fmt.Errorf("%s seed %d: at the end: %w", spec.Name, r.Seed, err)
		}
	}
}

// progress counts the steps of a Run per policy and the wall time its
// runs have spent, so that the ETA weighs the steps left of each policy
// by what one of its steps has cost so far: a refined-ts step costs tens
// of times an eps-greedy step, and the costly runs go first, so a single
// steps/s figure would promise the end hours early or late.
type progress struct {
	start   time.Time
	workers int
	total   int64 // steps of every run
	runs    int
	perRun  int64 // steps of one run
	done    map[string]*atomic.Int64

	mu       sync.Mutex
	finished int
	runsOf   map[string]int           // runs per policy
	busy     map[string]time.Duration // wall time of the policy's finished runs
	inFlight map[*RunResult]time.Time // start of each run in flight
}

func newProgress(results []*RunResult, steps, workers int) *progress {
	p := &progress{
		start: time.Now(), workers: workers, runs: len(results),
		total: int64(len(results) * steps), perRun: int64(steps),
		done: map[string]*atomic.Int64{}, runsOf: map[string]int{},
		busy: map[string]time.Duration{}, inFlight: map[*RunResult]time.Time{},
	}
	for _, r := range results {
		if p.done[r.Policy] == nil {
			p.done[r.Policy] = new(atomic.Int64)
		}
		p.runsOf[r.Policy]++
	}
	return p
}

func (p *progress) begin(r *RunResult) {
	p.mu.Lock()
	p.inFlight[r] = time.Now()
	p.mu.Unlock()
}

func (p *progress) end(r *RunResult) {
	p.mu.Lock()
	p.busy[r.Policy] += time.Since(p.inFlight[r])
	delete(p.inFlight, r)
	p.finished++
	p.mu.Unlock()
}

// line is the progress line: bar, steps, the overall rate, and the ETA:
// the steps left of each policy times the wall time per step its runs
// have taken so far (for a policy not started yet, the cheapest rate
// seen, since the costliest policies start first), shared among the
// workers that still have runs to take.
func (p *progress) line() string {
	now := time.Now()
	p.mu.Lock()
	busy := make(map[string]time.Duration, len(p.busy))
	for k, v := range p.busy {
		busy[k] = v
	}
	for r, t := range p.inFlight {
		busy[r.Policy] += now.Sub(t)
	}
	finished := p.finished
	p.mu.Unlock()

	var d int64
	perStep := map[string]float64{}
	cheapest := math.Inf(1)
	for name, c := range p.done {
		n := c.Load()
		d += n
		if n > 0 {
			perStep[name] = busy[name].Seconds() / float64(n)
			cheapest = min(cheapest, perStep[name])
		}
	}
	eta := "?"
	if !math.IsInf(cheapest, 1) {
		var work float64 // seconds of one worker
		for name, c := range p.done {
			s, ok := perStep[name]
			if !ok {
				s = cheapest
			}
			work += float64(int64(p.runsOf[name])*p.perRun-c.Load()) * s
		}
		par := max(1, min(p.workers, p.runs-finished))
		eta = time.Duration(work / float64(par) * float64(time.Second)).Round(time.Second).String()
	}
	rate := float64(d) / max(now.Sub(p.start).Seconds(), 1e-9)
	const width = 30
	filled := int(width * d / max(p.total, 1))
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
	return fmt.Sprintf("[%s] %3.0f%% %d/%d steps  %.0f steps/s  ETA %s  runs %d/%d",
		bar, 100*float64(d)/float64(max(p.total, 1)), d, p.total, rate, eta, finished, p.runs)
}

// show prints p's line to w until the returned function is called,
// which prints it a last time. On a terminal the line redraws itself in
// place about twice a second; anywhere else (a log file, a pipe) it is
// written as a plain line every LogInterval, so a log holds one line a
// minute, not a carriage-return frame every half second.
func (p *progress) show(w io.Writer) func() {
	if w == nil {
		return func() {}
	}
	tty := isTerminal(w)
	every, prefix, suffix := LogInterval, "", "\n"
	if tty {
		every, prefix, suffix = 500*time.Millisecond, "\r", ""
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fmt.Fprint(w, prefix+p.line()+suffix)
			}
		}
	}()
	return func() {
		close(quit)
		wg.Wait()
		fmt.Fprint(w, prefix+p.line()+"\n")
	}
}

// LogInterval is how often a Run's progress goes to a writer that is not
// a terminal.
var LogInterval = time.Minute

// isTerminal reports whether w is a terminal (golang.org/x/term, which
// asks the operating system for the file's terminal attributes, rather
// than guessing from TERM or a file mode).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
