package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/refinery-bandits/refinery/api"
	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
)

// DefaultSimRate is the default rate of serve --simulate: decisions per
// second per bandit.
const DefaultSimRate = 20

// simPolicies are the bandits serve --simulate creates on the same
// stream, so that the dashboard shows their regret side by side.
var simPolicies = []string{"refined-ts", "eps-greedy"}

// simModel sets the model of the simulated bandits: cheaper than the
// defaults (hidden [100, 100], 500 training and 500 refinement
// iterations) so that a 2-core laptop keeps up with 20 decisions/s per
// bandit: two hidden layers of 32, 100 ELBO iterations per retraining
// at most once a second, refined samples of 40 iterations per
// conditional optimization.
func simModel(c *bandit.Config) {
	c.Model.Hidden = []int{32, 32}
	c.Training.Iterations = 100
	minInterval := bandit.Duration(time.Second)
	c.Training.MinInterval = &minInterval
	c.Refinement.Iterations = 40
}

// simEnv is an environment of package simulators with the schema serve
// --simulate gives its bandits: the schema's encoder decodes each step's
// context into the JSON object a client sends.
type simEnv struct {
	name     string // in the bandits' names
	env      simulators.Env
	features []bandit.Feature
	enc      *bandit.Encoder
}

// newSimEnv returns the environment serve --simulate names: the UCI
// mushroom bandit (one-hot) with its attributes as categorical features,
// or the wheel bandit with features x1 and x2.
func newSimEnv(name, data string) (*simEnv, error) {
	var env simulators.Env
	var features []bandit.Feature
	switch name {
	case "mushroom":
		p, err := simulators.ResolveMushroom(data)
		if err != nil {
			return nil, err
		}
		d, err := simulators.LoadMushroom(p)
		if err != nil {
			return nil, err
		}
		if env, err = simulators.NewMushroom(d, simulators.MushroomOneHot, simulators.DefaultMushroomRewards()); err != nil {
			return nil, err
		}
		features = mushroomFeatures(d)
	case "wheel":
		var err error
		if env, err = simulators.ParseEnv("wheel", ""); err != nil {
			return nil, err
		}
		features = []bandit.Feature{{Name: "x1", Type: bandit.Numeric}, {Name: "x2", Type: bandit.Numeric}}
	default:
		return nil, fmt.Errorf("--simulate %q: want mushroom or wheel", name)
	}
	enc := bandit.NewEncoder(features)
	if enc.Dim() != env.NumFeatures() {
		return nil, fmt.Errorf("%s: %d inputs, its schema encodes %d", name, env.NumFeatures(), enc.Dim())
	}
	return &simEnv{name: name, env: env, features: features, enc: enc}, nil
}

// next draws a context as a client sends it, every arm's expected reward
// and every arm's realized reward.
func (e *simEnv) next(rng *rand.Rand) (ctx json.RawMessage, expected, realized []float64, err error) {
	st := e.env.Next(rng)
	if ctx, err = e.enc.Decode(st.X); err != nil {
		return nil, nil, nil, err
	}
	return ctx, st.Expected, st.Realized, nil
}

// parseRate reads --rate: decisions per second per bandit, "20" or
// "20/s".
func parseRate(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(s), "/s"), 64)
	if err != nil || !(v > 0) || v > 10000 {
		return 0, fmt.Errorf("--rate %q: want decisions per second per bandit in (0, 10000], e.g. 20 or 20/s", s)
	}
	return v, nil
}

// simDriver drives the service over its own HTTP API, as a client
// would: it creates one bandit per simPolicies entry and sends each the
// same stream of contexts (the same seed: common random numbers) at
// rate decisions per second, rewarding every decision at once with the
// realized reward of the chosen arm. As it knows the oracle, it keeps
// each bandit's cumulative expected regret: it is the dashboard's
// api.RegretSource.
type simDriver struct {
	env  *simEnv
	rate float64
	seed uint64
	log  *slog.Logger
	hc   *http.Client
	// key is the API key the driver sends when the service requires
	// keys ("": none).
	key string

	mu     sync.Mutex
	regret map[string]*simTally

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type simTally struct {
	cumulative float64
	steps      int64
}

var _ api.RegretSource = (*simDriver)(nil)

func newSimDriver(env *simEnv, rate float64, seed uint64, log *slog.Logger) *simDriver {
	return &simDriver{env: env, rate: rate, seed: seed, log: log, regret: map[string]*simTally{},
		hc: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}}
}

// Regret implements api.RegretSource.
func (s *simDriver) Regret(bandit string) (float64, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.regret[bandit]
	if !ok {
		return 0, 0, false
	}
	return t.cumulative, t.steps, true
}

// bandits returns the names of the bandits the driver creates.
func (s *simDriver) bandits() []string {
	out := make([]string, len(simPolicies))
	for i, p := range simPolicies {
		out[i] = s.env.name + "-" + p
	}
	return out
}

// start creates the bandits on the service at base and drives them
// until stop.
func (s *simDriver) start(base string) {
	cl, err := apiclient.New(base, s.hc)
	if err != nil {
		s.log.Error("simulator: cannot start", "err", err)
		return
	}
	cl = cl.WithAPIKey(s.key)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	seed := s.seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	for i, name := range s.bandits() {
		s.mu.Lock()
		s.regret[name] = &simTally{}
		s.mu.Unlock()
		s.wg.Go(func() {
			if err := s.create(ctx, cl, name, simPolicies[i]); err != nil {
				if ctx.Err() == nil {
					s.log.Error("simulator: cannot create the bandit", "bandit", name, "err", err)
				}
				return
			}
			s.drive(ctx, cl, name, rand.New(rand.NewPCG(seed, 1)))
		})
	}
	s.log.Info("simulator started", "env", s.env.name, "bandits", strings.Join(s.bandits(), ","), "rate_per_bandit", s.rate)
}

// stop stops the traffic and waits for the requests in flight.
func (s *simDriver) stop() {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
}

// create makes the bandit, retrying while the service loads; a bandit
// of that name left by an earlier run (PostgreSQL) is driven as it is.
func (s *simDriver) create(ctx context.Context, cl *apiclient.Client, name, policy string) error {
	cfg := bandit.Config{Name: name, Arms: slices.Clone(s.env.env.ArmNames()), Features: s.env.features, Policy: bandit.PolicyConfig{Kind: bandit.PolicyKind(policy)}}
	simModel(&cfg)
	for {
		_, err := cl.CreateBandit(ctx, cfg)
		switch code := apiclient.StatusCode(err); {
		case err == nil:
			return nil
		case code == http.StatusConflict:
			s.log.Info("simulator: the bandit exists already; driving it as it is", "bandit", name)
			return nil
		case code != 0 && code != http.StatusServiceUnavailable:
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// drive sends decisions and rewards at s.rate until ctx is done.
func (s *simDriver) drive(ctx context.Context, cl *apiclient.Client, name string, rng *rand.Rand) {
	t := time.NewTicker(time.Duration(float64(time.Second) / s.rate))
	defer t.Stop()
	arms := s.env.env.ArmNames()
	var failures int
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c, expected, realized, err := s.env.next(rng)
		if err == nil {
			err = s.step(ctx, cl, name, arms, c, expected, realized)
		}
		if err != nil && ctx.Err() == nil {
			if failures++; failures == 1 || failures%100 == 0 {
				s.log.Warn("simulator: step failed", "bandit", name, "failures", failures, "err", err)
			}
		}
	}
}

func (s *simDriver) step(ctx context.Context, cl *apiclient.Client, name string, arms []string, c json.RawMessage, expected, realized []float64) error {
	d, err := cl.Decide(ctx, name, apiclient.DecisionRequest{Context: c})
	if err != nil {
		return err
	}
	arm := slices.Index(arms, d.Arm)
	if arm < 0 {
		return fmt.Errorf("decision: unknown arm %q", d.Arm)
	}
	best := expected[0]
	for _, e := range expected {
		best = max(best, e)
	}
	s.mu.Lock()
	t := s.regret[name]
	t.cumulative += best - expected[arm]
	t.steps++
	s.mu.Unlock()
	return cl.Reward(ctx, name, d.EventID, realized[arm])
}
