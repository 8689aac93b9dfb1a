package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// laplaceConfigs are the configurations of the kinds that fit a
// posterior at the MAP.
func laplaceConfigs() map[string]*bandit.Config {
	out := map[string]*bandit.Config{}
	for _, name := range []string{"laplace-diagonal", "laplace-last-layer", "flow-ts", "neural-linear"} {
		var c *bandit.Config
		switch name {
		case "laplace-diagonal":
			c = smallConfig(bandit.LaplaceTS)
		case "laplace-last-layer":
			c = smallConfig(bandit.LaplaceTS)
			c.Policy.Laplace = bandit.LaplaceLastLayer
		case "flow-ts":
			c = smallConfig(bandit.FlowTS)
			c.Policy.Flow = &bandit.FlowConfig{Length: 4, Iterations: 200}
		case "neural-linear":
			c = smallConfig(bandit.NeuralLinear)
		}
		out[name] = c
	}
	return out
}

// playToy decides and rewards n toy contexts on a (step mode or live).
func playToy(t testing.TB, a *bandit.Agent, n int, seed uint64) (late float64, samples map[bandit.SampleKind]int, estimators map[string]int) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 2))
	samples, estimators = map[bandit.SampleKind]int{}, map[string]int{}
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
		samples[d.Sample]++
		estimators[out.Propensity.Estimator]++
		r := toyReward(color, a.Config().Arms[d.Arm])
		if i >= n-100 {
			late += r
		}
		if err := a.Reward(ctx, d.EventID, r); err != nil {
			t.Fatal(err)
		}
	}
	return late / 100, samples, estimators
}

// TestLaplaceKindsLearnAndResume: laplace-ts (both structures), flow-ts
// and neural-linear learn the toy bandit through the service's agent in
// step mode, say what they acted on, and after a restart from the
// persisted snapshot publish the same posterior (the flow's ELBO and the
// last layer's evidence bit for bit: restored, not refitted).
func TestLaplaceKindsLearnAndResume(t *testing.T) {
	want := map[string][2]string{
		"laplace-diagonal":   {"laplace", "laplace"},
		"laplace-last-layer": {"laplace", "laplace"},
		"flow-ts":            {"flow", "flow"},
		"neural-linear":      {"exact", "linear-posterior"},
	}
	for name, cfg := range laplaceConfigs() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			st := store.NewMemory()
			step := &bandit.StepConfig{TrainEvery: 10}
			svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Logger: testLogger(t), Step: step})
			if err := svc.Load(ctx); err != nil {
				t.Fatal(err)
			}
			a, err := svc.Create(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			late, samples, est := playToy(t, a, 300, 1)
			st1 := a.Status()
			post, _ := json.Marshal(st1.Posterior)
			t.Logf("%s: last 100 mean reward %.2f, samples %v, estimators %v, posterior %s", name, late, samples, est, post)
			if late < 0.7 {
				t.Errorf("mean reward of the last 100 = %.2f, want >= 0.7", late)
			}
			w := want[name]
			if samples[bandit.SampleKind(w[0])] != 300 || est[w[1]] != 300 {
				t.Errorf("samples %v, estimators %v; want every decision on %s with %s", samples, est, w[0], w[1])
			}
			if st1.Posterior == nil {
				t.Fatal("no posterior status")
			}
			if name == "flow-ts" && st1.Posterior.FlowELBO == nil {
				t.Error("flow-ts without a flow ELBO")
			}
			if err := svc.Close(ctx); err != nil {
				t.Fatal(err)
			}
			_, a2 := reopen(t, st, bandit.ServiceConfig{Seed: 2, Logger: testLogger(t), Step: step})
			st2 := a2.Status()
			if st2.ModelVersion != st1.ModelVersion || !reflect.DeepEqual(st2.Posterior, st1.Posterior) {
				p2, _ := json.Marshal(st2.Posterior)
				t.Errorf("after restart version %d posterior %s, want version %d posterior %s", st2.ModelVersion, p2, st1.ModelVersion, post)
			}
			if late2, _, _ := playToy(t, a2, 100, 3); late2 < 0.7 {
				t.Errorf("after restart mean reward %.2f, want >= 0.7", late2)
			}
		})
	}
}

// TestLaplaceOldSnapshotLoads: a snapshot without the posterior fields
// (as written before they existed) loads: the MAP is restored and the
// posterior refitted on the rows the snapshot had seen, which for the
// last layer gives the same evidence and prior precision as before.
func TestLaplaceOldSnapshotLoads(t *testing.T) {
	for _, name := range []string{"laplace-diagonal", "flow-ts"} {
		t.Run(name, func(t *testing.T) {
			cfg := laplaceConfigs()[name]
			ctx := context.Background()
			st := store.NewMemory()
			step := &bandit.StepConfig{TrainEvery: 10}
			svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Logger: testLogger(t), Step: step})
			if err := svc.Load(ctx); err != nil {
				t.Fatal(err)
			}
			a, err := svc.Create(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			playToy(t, a, 100, 1)
			st1 := a.Status()
			if err := svc.Close(ctx); err != nil {
				t.Fatal(err)
			}
			snap, err := st.LatestSnapshot(ctx, "toy")
			if err != nil {
				t.Fatal(err)
			}
			var meta map[string]any
			if err := json.Unmarshal(snap.Metrics, &meta); err != nil {
				t.Fatal(err)
			}
			found := 0
			for _, k := range []string{"laplace_var", "last_layer", "flow", "flow_elbo"} {
				if _, ok := meta[k]; ok {
					found++
				}
				delete(meta, k)
			}
			if found == 0 {
				t.Fatal("the snapshot holds no posterior field")
			}
			old, _ := json.Marshal(meta)
			if err := st.SaveSnapshot(ctx, &bandit.Snapshot{Bandit: "toy", Version: snap.Version + 1, Params: snap.Params, Metrics: old}); err != nil && !errors.Is(err, bandit.ErrConflict) {
				t.Fatal(err)
			}
			_, a2 := reopen(t, st, bandit.ServiceConfig{Seed: 2, Logger: testLogger(t), Step: step})
			st2 := a2.Status()
			if st2.Posterior == nil || st2.Posterior.Kind != st1.Posterior.Kind {
				t.Fatalf("posterior after loading the old snapshot: %+v, want kind %s", st2.Posterior, st1.Posterior.Kind)
			}
			if name == "flow-ts" {
				if *st2.Posterior.LogEvidence != *st1.Posterior.LogEvidence || *st2.Posterior.PriorPrecision != *st1.Posterior.PriorPrecision {
					t.Errorf("refitted last layer: evidence %v, alpha %v; before %v, %v", *st2.Posterior.LogEvidence, *st2.Posterior.PriorPrecision, *st1.Posterior.LogEvidence, *st1.Posterior.PriorPrecision)
				}
				if st2.Posterior.FlowELBO == nil {
					t.Error("no flow after loading the old snapshot")
				}
			}
			ms := func(p *bandit.PosteriorStatus) float64 {
				if p.MeanSigma == nil {
					return 0
				}
				return *p.MeanSigma
			}
			if ms(st2.Posterior) != ms(st1.Posterior) {
				t.Errorf("refitted diagonal Laplace: mean sigma %v, before %v", ms(st2.Posterior), ms(st1.Posterior))
			}
			if late, _, _ := playToy(t, a2, 100, 3); late < 0.7 {
				t.Errorf("after loading mean reward %.2f, want >= 0.7", late)
			}
		})
	}
}

// TestLaplaceConfigValidation: the new policy fields are checked.
func TestLaplaceConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		set   func(*bandit.Config)
		field string
	}{
		{func(c *bandit.Config) { c.Policy.Laplace = "full" }, "policy.laplace"},
		{func(c *bandit.Config) { c.Policy.Kind = bandit.MeanFieldTS; c.Policy.Laplace = "diagonal" }, "policy.laplace"},
		{func(c *bandit.Config) { c.Policy.Flow = &bandit.FlowConfig{} }, "policy.flow"},
		{func(c *bandit.Config) { c.Policy.Kind = bandit.FlowTS; c.Policy.Flow = &bandit.FlowConfig{Length: 51} }, "policy.flow.length"},
		{func(c *bandit.Config) { c.Policy.Kind = bandit.FlowTS; c.Policy.Flow = &bandit.FlowConfig{LR: 2} }, "policy.flow.lr"},
	} {
		c := smallConfig(bandit.LaplaceTS)
		tc.set(c)
		bandit.SetDefaults(c)
		err := bandit.Validate(c)
		var ve *bandit.ValidationError
		if !errors.As(err, &ve) || ve.Errors[0].Field != tc.field {
			t.Errorf("%+v: %v, want an error on %s", c.Policy, err, tc.field)
		}
	}
	c := smallConfig(bandit.FlowTS)
	bandit.SetDefaults(c)
	if err := bandit.Validate(c); err != nil || c.Policy.Flow.Length != 10 || c.Policy.Flow.Iterations != 1000 || c.Policy.Flow.LR != 0.03 {
		t.Errorf("flow-ts defaults: %v, %+v", err, c.Policy.Flow)
	}
	c = smallConfig(bandit.LaplaceTS)
	bandit.SetDefaults(c)
	if err := bandit.Validate(c); err != nil || c.Policy.Laplace != "diagonal" {
		t.Errorf("laplace-ts defaults: %v, %q", err, c.Policy.Laplace)
	}
}
