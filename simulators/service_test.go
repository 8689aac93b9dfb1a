package simulators

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// TestSimulateDecidesAsTheService: the same seed and configuration give
// the same decisions (arm, probabilities, sample kind, model version)
// through Run and through the service's HTTP API on real loopback HTTP,
// the in-memory store and a service in step mode with the same seed,
// each reward sent before the next decision. Every policy kind takes
// part; refined-ts trains and refines along the way.
func TestSimulateDecidesAsTheService(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Steps = 40
	cfg.Seeds = 1
	cfg.KeepDecisions = true
	ctx := context.Background()
	results, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, spec := range cfg.Policies {
		sim := results[i]
		if sim.Err != nil {
			t.Fatalf("%s: %v", spec.Name, sim.Err)
		}
		t.Run(spec.Name, func(t *testing.T) {
			got := serveDecisions(t, cfg, spec, sim.Seed)
			if len(got) != len(sim.Decisions) {
				t.Fatalf("%d decisions over HTTP, %d simulated", len(got), len(sim.Decisions))
			}
			for s, want := range sim.Decisions {
				g := got[s]
				if g.Arm != want.Arm || !slices.Equal(g.Propensities, want.Propensities) || g.Sample != want.Sample || g.ModelVersion != want.ModelVersion {
					t.Fatalf("step %d: HTTP decided arm %d %v on %s (version %d), the simulation arm %d %v on %s (version %d)",
						s+1, g.Arm, g.Propensities, g.Sample, g.ModelVersion, want.Arm, want.Propensities, want.Sample, want.ModelVersion)
				}
			}
			if spec.Kind == "refined-ts" && sim.Samples[bandit.SampleRefined] == 0 {
				t.Errorf("refined-ts made no decision on refined samples: %v", sim.Samples)
			}
		})
	}
}

// serveDecisions plays spec for cfg.Steps steps of seed through a real
// HTTP server and returns its decisions.
func serveDecisions(t *testing.T, cfg RunConfig, spec PolicySpec, seed int) []*bandit.Decision {
	t.Helper()
	ctx := context.Background()
	clock := bandit.NewManualClock(time.Unix(0, 0).UTC())
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{
		Seed: ServiceSeed(seed, spec.Name),
		Step: &bandit.StepConfig{Clock: clock, TrainEvery: cfg.Preset.TrainEvery},
	})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Service: svc})
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	bc, err := BanditConfig(spec, cfg.Env, cfg.Preset)
	if err != nil {
		t.Fatal(err)
	}
	post := func(path string, body any, want int) []byte {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(hs.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		out.ReadFrom(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %s %s", path, resp.Status, out.Bytes())
		}
		return out.Bytes()
	}
	post("/v1/bandits", bc, http.StatusCreated)
	enc := bandit.NewEncoder(bc.Features)
	envRNG := rand.New(rand.NewPCG(uint64(seed), envStream))
	var ds []*bandit.Decision
	for i := range cfg.Steps {
		st := cfg.Env.Next(envRNG)
		raw, err := enc.Decode(st.X)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("e%d", i+1)
		var resp struct {
			Arm           string             `json:"arm"`
			Probabilities map[string]float64 `json:"probabilities"`
			ModelVersion  int64              `json:"model_version"`
			Sample        bandit.SampleKind  `json:"sample"`
		}
		if err := json.Unmarshal(post("/v1/bandits/sim/decisions", map[string]any{"event_id": id, "context": raw}, http.StatusCreated), &resp); err != nil {
			t.Fatal(err)
		}
		d := &bandit.Decision{Arm: slices.Index(bc.Arms, resp.Arm), ModelVersion: resp.ModelVersion, Sample: resp.Sample}
		for _, a := range bc.Arms {
			d.Propensities = append(d.Propensities, resp.Probabilities[a])
		}
		ds = append(ds, d)
		post("/v1/bandits/sim/events/"+id+"/reward", map[string]any{"value": st.Realized[d.Arm]}, http.StatusNoContent)
		clock.Advance(StepInterval)
	}
	return ds
}
