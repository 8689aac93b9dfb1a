package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// testLogger routes slog to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// smallConfig is a two-arm bandit on one categorical and one numeric
// feature with a small network, cheap to train and refine.
func smallConfig(kind bandit.PolicyKind) *bandit.Config {
	return &bandit.Config{
		Name: "toy",
		Arms: []string{"a", "b"},
		Features: []bandit.Feature{
			{Name: "color", Type: bandit.Categorical, Values: []string{"red", "blue"}},
			{Name: "size", Type: bandit.Numeric},
		},
		Policy:     bandit.PolicyConfig{Kind: kind},
		Model:      bandit.ModelConfig{Hidden: []int{8}},
		Training:   bandit.TrainingConfig{Iterations: 50, IterationsPerReward: 50, CPUShare: 1, SnapshotEvery: 1, MinInterval: new(bandit.Duration)},
		Refinement: bandit.RefinementConfig{Iterations: 20, BankSize: 6},
	}
}

// stepService returns a loaded service on a fresh in-memory store in
// step mode (training after every trainEvery rewards), closed when the
// test ends.
func stepService(t testing.TB, seed uint64, trainEvery int) *bandit.Service {
	t.Helper()
	ctx := context.Background()
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Seed: seed, Step: &bandit.StepConfig{TrainEvery: trainEvery}})
	t.Cleanup(func() { svc.Close(ctx) })
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	return svc
}

// stepAgent returns the agent of a bandit created with cfg on a
// stepService of the given seed and trainEvery.
func stepAgent(t testing.TB, seed uint64, trainEvery int, cfg *bandit.Config) *bandit.Agent {
	t.Helper()
	a, err := stepService(t, seed, trainEvery).Create(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// reopen starts a service with cfg on st, as a restarted process does,
// and returns it, closed when the test ends, and its agent of the toy
// bandit.
func reopen(t *testing.T, st bandit.Store, cfg bandit.ServiceConfig) (*bandit.Service, *bandit.Agent) {
	t.Helper()
	ctx := context.Background()
	svc := bandit.NewService(st, cfg)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close(ctx) })
	a, err := svc.Agent("toy")
	if err != nil {
		t.Fatal(err)
	}
	return svc, a
}

// toyReward: arm a pays 1 on red, arm b pays 1 on blue.
func toyReward(color string, arm string) float64 {
	if (color == "red") == (arm == "a") {
		return 1
	}
	return 0
}

// trainToy makes n decisions of a on alternating red and blue contexts of
// size 1 and rewards each at once with toyReward.
func trainToy(ctx context.Context, t *testing.T, a *bandit.Agent, n int) {
	t.Helper()
	for i := range n {
		color := []string{"red", "blue"}[i%2]
		out, err := a.Decide(ctx, bandit.DecideRequest{Context: []byte(fmt.Sprintf(`{"color": %q, "size": 1}`, color))})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Reward(ctx, out.Decision.EventID, toyReward(color, a.Config().Arms[out.Decision.Arm])); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServiceLearnsAndResumes(t *testing.T) {
	for _, kind := range []bandit.PolicyKind{bandit.RefinedTS, bandit.MeanFieldTS, bandit.EpsGreedy, bandit.Greedy, bandit.Uniform, bandit.LinearTS, bandit.LaplaceTS, bandit.FlowTS, bandit.NeuralLinear} {
		t.Run(string(kind), func(t *testing.T) {
			ctx := context.Background()
			st := store.NewMemory()
			svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: testLogger(t)})
			if err := svc.Load(ctx); err != nil {
				t.Fatal(err)
			}
			a, err := svc.Create(ctx, smallConfig(kind))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var late float64
			const n = 300
			for i := range n {
				color := []string{"red", "blue"}[rng.IntN(2)]
				out, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(fmt.Sprintf(`{"color": %q, "size": %d}`, color, i%7))})
				if err != nil {
					t.Fatal(err)
				}
				d := out.Decision
				var sum float64
				for _, p := range d.Propensities {
					sum += p
				}
				if sum < 0.999 || sum > 1.001 || d.Propensities[d.Arm] <= 0 {
					t.Fatalf("decision %d: propensities %v (arm %d), want a distribution giving the arm > 0", i, d.Propensities, d.Arm)
				}
				r := toyReward(color, a.Config().Arms[d.Arm])
				if i >= n-100 {
					late += r
				}
				if err := a.Reward(ctx, d.EventID, r); err != nil {
					t.Fatal(err)
				}
				if i%20 == 0 {
					time.Sleep(5 * time.Millisecond) // let the trainer run
				}
			}
			st1 := a.Status()
			t.Logf("%s: last 100 mean reward %.2f, status %+v", kind, late/100, st1)
			if kind != bandit.Uniform && late/100 < 0.7 {
				t.Errorf("mean reward of the last 100 = %.2f, want >= 0.7", late/100)
			}
			if err := svc.Close(ctx); err != nil {
				t.Fatal(err)
			}
			_, a2 := reopen(t, st, bandit.ServiceConfig{Workers: 1, Seed: 2, Logger: testLogger(t)})
			if got := a2.Status().ModelVersion; got < st1.ModelVersion {
				t.Errorf("after restart model version %d, want >= %d", got, st1.ModelVersion)
			}
		})
	}
}

func TestDecideIdempotency(t *testing.T) {
	ctx := context.Background()
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Workers: 1, Seed: 1})
	defer svc.Close(ctx)
	svc.Load(ctx)
	a, err := svc.Create(ctx, smallConfig(bandit.EpsGreedy))
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.Decide(ctx, bandit.DecideRequest{EventID: "e1", Context: json.RawMessage(`{"color":"red","size":1}`)})
	if err != nil || !first.Created {
		t.Fatalf("first decision: %v, created %v", err, first != nil && first.Created)
	}
	again, err := a.Decide(ctx, bandit.DecideRequest{EventID: "e1", Context: json.RawMessage(`{"size":1.0, "color":"red"}`)})
	if err != nil || again.Created || again.Decision.Arm != first.Decision.Arm {
		t.Fatalf("same event again: %v, %+v; want the stored decision", err, again)
	}
	_, err = a.Decide(ctx, bandit.DecideRequest{EventID: "e1", Context: json.RawMessage(`{"color":"blue","size":1}`)})
	if !errors.Is(err, bandit.ErrConflict) {
		t.Fatalf("same event, other context: %v, want ErrConflict", err)
	}
}

// A decision left without a reward for reward.wait gets reward.default;
// a later reward with another value is then a conflict, the same value
// is accepted.
func TestRewardDefaultAfterWait(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1})
	defer svc.Close(ctx)
	svc.Load(ctx)
	cfg := smallConfig(bandit.Greedy)
	def := -1.0
	wait := bandit.Duration(100 * time.Millisecond)
	cfg.Reward = bandit.RewardConfig{Wait: &wait, Default: &def}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"late", "on-time"} {
		if _, err := a.Decide(ctx, bandit.DecideRequest{EventID: id, Context: json.RawMessage(`{"color": "red", "size": 1}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Reward(ctx, "on-time", 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, rewards, err := st.Counts(ctx, "toy")
		if err != nil {
			t.Fatal(err)
		}
		if rewards == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d rewards 5s after the wait, want the default applied to the second", rewards)
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs, err := st.ListDecisions(ctx, "toy", time.Time{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		want := map[string]float64{"late": -1, "on-time": 1}[r.EventID]
		if r.Reward == nil || r.Reward.Value != want {
			t.Errorf("reward of %s = %+v, want %g", r.EventID, r.Reward, want)
		}
	}
	err = a.Reward(ctx, "late", 5)
	var ce *bandit.RewardConflictError
	if !errors.Is(err, bandit.ErrConflict) || !errors.As(err, &ce) || !ce.Default || ce.Stored != -1 || ce.Wait != 100*time.Millisecond ||
		!strings.Contains(err.Error(), "reward.default") || !strings.Contains(err.Error(), "reward.wait (100ms)") {
		t.Errorf("a late reward with another value: %v, want ErrConflict naming reward.default and reward.wait", err)
	}
	// A reward that conflicts with a client's reward is not called the default.
	err = a.Reward(ctx, "on-time", 0)
	if !errors.As(err, &ce) || ce.Default || ce.Stored != 1 || !strings.Contains(err.Error(), "already has a different reward, 1,") {
		t.Errorf("a second reward with another value: %v, want ErrConflict naming the stored 1", err)
	}
	if err := a.Reward(ctx, "late", -1); err != nil {
		t.Errorf("a late reward equal to the default: %v, want nil", err)
	}
}

// One refinement worker serves every refined-ts bandit in turn: both
// banks fill.
func TestRefinementWorkersAreShared(t *testing.T) {
	ctx := context.Background()
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Workers: 1, Seed: 1})
	defer svc.Close(ctx)
	svc.Load(ctx)
	var agents []*bandit.Agent
	for _, name := range []string{"one", "two"} {
		cfg := smallConfig(bandit.RefinedTS)
		cfg.Name = name
		a, err := svc.Create(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			out, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(fmt.Sprintf(`{"color": "blue", "size": %d}`, i))})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Reward(ctx, out.Decision.EventID, float64(out.Decision.Arm)); err != nil {
				t.Fatal(err)
			}
		}
		agents = append(agents, a)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		full := 0
		for _, a := range agents {
			if b := a.Status().Bank; b.Depth == b.Capacity {
				full++
			}
		}
		if full == len(agents) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("banks %+v, %+v after 10s; want both full", *agents[0].Status().Bank, *agents[1].Status().Bank)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
