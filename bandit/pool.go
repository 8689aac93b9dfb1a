package bandit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/internal/cpustat"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// refinePool is the set of refinement workers shared by every bandit
// that uses refined Thompson sampling. Each worker repeatedly picks the
// next bandit, round-robin, whose bank has room and whose posterior has
// data, refines one sample from its latest posterior and banks it. So
// the workers are shared fairly: a bandit with a deep demand cannot
// starve the others, each gets one sample per turn.
type refinePool struct {
	log *slog.Logger
	obs Observer
	// cpu is the CPU time of every agent's training and of the
	// workers' refinement (CPU).
	cpu CPU

	// slots bounds the background work running at once, every agent's
	// training and the workers' refinement together: one token per core
	// it may use (ServiceConfig.BackgroundCores). quit is closed by
	// close.
	slots chan struct{}
	quit  chan struct{}

	mu      sync.Mutex
	cond    *sync.Cond
	agents  []*Agent
	next    int
	closed  bool
	workers sync.WaitGroup
}

func newRefinePool(workers, cores int, seed uint64, log *slog.Logger, obs Observer) *refinePool {
	p := &refinePool{log: log, obs: obs, slots: make(chan struct{}, max(cores, 1)), quit: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	for i := range workers {
		rng := rand.New(rand.NewPCG(seed, uint64(i)+1))
		p.workers.Go(func() { p.work(rng) })
	}
	return p
}

// add makes the pool refill a's bank.
func (p *refinePool) add(a *Agent) {
	p.mu.Lock()
	p.agents = append(p.agents, a)
	p.mu.Unlock()
	p.kick()
}

// kick wakes idle workers: some bank may have room or a new posterior.
func (p *refinePool) kick() {
	p.mu.Lock()
	p.cond.Broadcast()
	p.mu.Unlock()
}

// close stops the workers after their current sample and waits for
// them.
func (p *refinePool) close() {
	p.mu.Lock()
	if !p.closed {
		close(p.quit)
	}
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.workers.Wait()
}

// acquire blocks until some agent wants a sample and reserves room in
// its bank; it returns nil when the pool is closed.
func (p *refinePool) acquire() (*Agent, *model) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		if p.closed {
			return nil, nil
		}
		// A closed bandit leaves the pool (and each worker drops its
		// refiner, refineSafely).
		p.agents = slices.DeleteFunc(p.agents, func(a *Agent) bool { return a.stopped.Load() })
		for range p.agents {
			a := p.agents[p.next%len(p.agents)]
			p.next = (p.next + 1) % len(p.agents)
			m := a.model.Load()
			if a.stopped.Load() || m.lik == nil || m.rows == 0 {
				continue
			}
			if a.bank.reserve() {
				return a, m
			}
		}
		p.cond.Wait()
	}
}

// background takes a core for background work (a retraining, a refined
// sample), waiting while every one is taken, and returns the function
// that gives it back; ok is false, and nothing is taken, once stop or
// the pool is closed. A request that finds the process's cores all
// busy with goroutines that run for hundreds of milliseconds waits for
// Go's scheduler to preempt one of them (every 10 ms) and for the
// network poller to be reached: that was the tail of refined-ts
// decisions at 64 clients, against eps-greedy's, whose trainer is mostly
// idle (bench/service.md). Bounding background work to
// the cores less one keeps one for the request path at all times.
func (p *refinePool) background(stop <-chan struct{}) (release func(), ok bool) {
	select {
	case p.slots <- struct{}{}:
		return func() { <-p.slots }, true
	case <-stop:
	case <-p.quit:
	}
	return nil, false
}

// workerRefiner is one worker's refiner for one bandit.
type workerRefiner struct {
	ref *posterior.Refiner
	lik *nn.Likelihood
}

func (p *refinePool) work(rng *rand.Rand) {
	refiners := map[*Agent]*workerRefiner{}
	for {
		a, m := p.acquire()
		if a == nil {
			return
		}
		var w *nn.Weights
		err := context.Canceled
		if release, ok := p.background(a.done); ok {
			w, err = p.refineSafely(a, m, refiners, rng)
			release()
		}
		kept := false
		if err == nil {
			kept = a.bank.put(m.version, w, m.std)
		} else {
			a.bank.put(m.version, nil, m.std)
			if !errors.Is(err, context.Canceled) {
				p.log.Warn("refinement failed", "bandit", a.name, "version", m.version, "err", err)
				time.Sleep(100 * time.Millisecond) // do not spin on a persistent failure
			}
		}
		if !kept {
			// The reservation is free again: another worker may use it.
			p.kick()
		}
	}
}

// refineSafely is refine with a panic turned into an error, so that a
// fault in one bandit's refinement never takes the process down; the
// worker's refiner for that bandit is dropped and rebuilt next time.
func (p *refinePool) refineSafely(a *Agent, m *model, refiners map[*Agent]*workerRefiner, rng *rand.Rand) (w *nn.Weights, err error) {
	defer func() {
		if v := recover(); v != nil {
			delete(refiners, a)
			w, err = nil, fmt.Errorf("refinement panic: %v\n%s", v, debug.Stack())
		}
	}()
	// A bandit's refiner goes with it (its buffers are the network's
	// size).
	for b := range refiners {
		if b.stopped.Load() {
			delete(refiners, b)
		}
	}
	return p.refine(a, m, refiners, rng)
}

// refine draws one refined sample from m, ready for the fast engine.
// The refinement is abandoned (context.Canceled) when a newer posterior
// makes its result stale.
func (p *refinePool) refine(a *Agent, m *model, refiners map[*Agent]*workerRefiner, rng *rand.Rand) (*nn.Weights, error) {
	wr := refiners[a]
	if wr == nil || wr.lik.NumHyper() != m.lik.NumHyper() { // new, or another likelihood family

		ref, err := posterior.NewRefiner(m.lik, a.refineCfg)
		if err != nil {
			return nil, err
		}
		wr = &workerRefiner{ref: ref, lik: m.lik}
		refiners[a] = wr
	} else if wr.lik != m.lik {
		wr.ref.SetLikelihood(m.lik)
		wr.lik = m.lik
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var superseded <-chan struct{} // nil: never
	if *a.current.Load().Policy.MaxVersionsBehind == 0 {
		superseded = m.superseded
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-superseded:
			cancel()
		case <-a.done:
			cancel()
		case <-stop:
		}
	}()
	var w *nn.Weights
	var st posterior.RefineStats
	var err error
	p.cpu.add(&p.cpu.refinement, cpustat.Measure(func() {
		var v []float64
		if v, st, err = wr.ref.Refine(ctx, nil, a.refineFrom(m), rng); err == nil {
			w = a.arch.PrepareWeights(v)
		}
	}))
	if err != nil {
		return nil, err
	}
	a.obs.Refined(a.name, st.Duration) // the service's observer, NopObserver for a candidate
	return w, nil
}

// refineFrom returns the posterior refinement starts from: m.q with the
// prior of the model the trainer fitted it to. Under the ELBO that is
// q's own prior. A collapsed bound (Tomczak et al. 2021, Eqs. 9 and 10)
// learns the prior's means (and, Eq. 10, its variances) given q in
// closed form; at the bound's optimum q is the ELBO's optimum under that
// learned prior, an empirical-Bayes prior, so refinement targets the
// posterior under it: PriorMean and PriorVar are the learned prior's
// (posterior.Trainer.CollapsedPrior), and posterior.Refine starts the
// auxiliary variables' sum at its mean.
func (a *Agent) refineFrom(m *model) *posterior.MeanField {
	if a.tcfg.Bound == posterior.BoundELBO {
		return m.q
	}
	m.refOnce.Do(func() {
		q := m.q.Clone()
		q.PriorMean = make([]float64, q.Len())
		posterior.LearnedPrior(a.tcfg, q, q.PriorMean, q.PriorVar)
		m.refQ = q
	})
	return m.refQ
}

// refineLikelihood is the likelihood refinement uses: the trainer's lik
// under local reparameterization, otherwise the same data and options
// with nn.LocalReparam. Refinement's objective, ELBO_aux (Havasi et al.
// 2021, Eq. 13), is an ELBO, which the RIS trainer's moment-propagation
// objective is not; training.estimator chooses the trainer's estimator
// only.
func refineLikelihood(lik *nn.Likelihood) *nn.Likelihood {
	opt := lik.Options()
	if opt.Estimator == nn.LocalReparam {
		return lik
	}
	opt.Estimator = nn.LocalReparam
	return nn.NewLikelihood(lik.Arch(), lik.Data(), opt)
}
