package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/cpustat"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
)

// BenchmarkDecisionRequest is the request path of one decision and its
// reward, as the load generator drives it, in process: the handler
// chain (request ID, metrics, admission, routing) of POST .../decisions
// with a mushroom-sized context (22 categorical features, 117 one-hot
// inputs), the decision of an eps-greedy bandit on the paper's network,
// its JSON response, then POST .../reward, on the in-memory store (the
// PostgreSQL write is BenchmarkWrites'). The trainer is held back
// (training.min_interval 1h) so that it does not run inside the
// measurement. One op is a decision and its reward. linear-ts and mf-ts
// are there for the cost of their propensities (issue 30, finding 1).
func BenchmarkDecisionRequest(b *testing.B) {
	for _, policy := range []string{"eps-greedy", "refined-ts", "linear-ts", "mf-ts"} {
		b.Run(policy, func(b *testing.B) { benchDecisionRequest(b, policy) })
	}
}

// benchFeatures is a schema shaped like the mushroom data's: 22
// categorical features, 117 values in all.
func benchFeatures() []map[string]any {
	var fs []map[string]any
	for j := range 22 {
		n := 5
		if j == 0 {
			n = 12
		}
		vals := make([]string, n)
		for k := range vals {
			vals[k] = fmt.Sprintf("value-%d", k)
		}
		fs = append(fs, map[string]any{"name": fmt.Sprintf("feature-%d", j), "type": "categorical", "values": vals})
	}
	return fs
}

func benchDecisionRequest(b *testing.B, policy string) {
	st := store.NewMemory()
	defer st.Close()
	reg := prometheus.NewRegistry()
	m := api.NewMetrics(reg)
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Observer: m})
	if err := svc.Load(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer svc.Close(context.Background())
	s := api.New(api.Config{Service: svc, Metrics: m, Gatherer: reg, Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()

	features := benchFeatures()
	cfg, _ := json.Marshal(map[string]any{
		"name": "bench", "arms": []string{"eat", "pass"}, "features": features,
		"policy":   map[string]any{"kind": policy},
		"training": map[string]any{"min_interval": "1h"},
	})
	do := func(method, path string, body []byte, want int) []byte {
		req := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	do("POST", "/v1/bandits", cfg, http.StatusCreated)
	rng := rand.New(rand.NewPCG(1, 2))
	bodies := make([][]byte, 256)
	for i := range bodies {
		ctx := map[string]string{}
		for _, f := range features {
			vals := f["values"].([]string)
			ctx[f["name"].(string)] = vals[rng.IntN(len(vals))]
		}
		bodies[i], _ = json.Marshal(map[string]any{"context": ctx})
	}
	step := func(i int) {
		out := do("POST", "/v1/bandits/bench/decisions", bodies[i%len(bodies)], http.StatusCreated)
		var d struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal(out, &d); err != nil {
			b.Fatal(err)
		}
		do("POST", "/v1/bandits/bench/events/"+d.EventID+"/reward", []byte(`{"value": 5}`), http.StatusNoContent)
	}
	// Train once on some data (a refined-ts bandit then refines), so
	// that decisions take the trained path.
	for i := range 200 {
		step(i)
	}
	if policy == "refined-ts" {
		// Wait for the first refined samples.
		for i := 0; ; i++ {
			out := do("POST", "/v1/bandits/bench/decisions", bodies[0], http.StatusCreated)
			if strings.Contains(string(out), `"sample":"refined"`) {
				break
			}
			if i > 100000 {
				b.Fatal("no refined samples")
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpustat.Self()
	for i := range b.N {
		step(i)
	}
	// CPU time per op, which a busy machine does not inflate as it does
	// ns/op (the wall time); it includes whatever the service's own
	// goroutines did meanwhile (the refinement workers of refined-ts).
	b.ReportMetric(float64((cpustat.Self()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkShadowBanditGET is GET /v1/bandits/{name} of a bandit with a
// candidate whose log holds simulators.ShadowWindow rewarded decisions
// with its choices, on each store (PostgreSQL with $DATABASE_URL): the
// estimate made on every GET (ShadowEstimateInterval negative, as before
// the cache) beside the one reused while the log is unchanged (the
// default). One op is one GET.
func BenchmarkShadowBanditGET(b *testing.B) {
	stores := map[string]func(testing.TB) bandit.Store{"memory": func(testing.TB) bandit.Store { return store.NewMemory() }}
	if os.Getenv("DATABASE_URL") != "" {
		stores["postgres"] = openPostgresStore
	}
	for _, name := range []string{"memory", "postgres"} {
		open, ok := stores[name]
		if !ok {
			continue
		}
		st := open(b)
		svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1})
		if err := svc.Load(context.Background()); err != nil {
			b.Fatal(err)
		}
		cfg := strings.Replace(toyBandit, `"training": {"iterations": 5}`, `"training": {"iterations": 5, "min_interval": "1h"}, "shadow": {"policy": {"kind": "uniform"}}`, 1)
		setup := api.New(api.Config{Service: svc, Logger: slog.New(slog.DiscardHandler)})
		mustServe(b, setup, "POST", "/v1/bandits", cfg, http.StatusCreated)
		for i := range simulators.ShadowWindow {
			id := fmt.Sprint("e", i)
			mustServe(b, setup, "POST", "/v1/bandits/toy/decisions", fmt.Sprintf(`{"event_id": %q, "context": {"color": "red", "size": %d}}`, id, i%5), http.StatusCreated)
			mustServe(b, setup, "POST", "/v1/bandits/toy/events/"+id+"/reward", fmt.Sprintf(`{"value": %d}`, i%2), http.StatusNoContent)
		}
		setup.Close()
		for _, tc := range []struct {
			name     string
			interval time.Duration
		}{{"estimated-every-GET", -1}, {"reused", 0}} {
			b.Run(name+"/"+tc.name, func(b *testing.B) {
				s := api.New(api.Config{Service: svc, Logger: slog.New(slog.DiscardHandler), ShadowEstimator: simulators.EstimateShadow, ShadowEstimateInterval: tc.interval})
				defer s.Close()
				b.ReportAllocs()
				for b.Loop() {
					mustServe(b, s, "GET", "/v1/bandits/toy", "", http.StatusOK)
				}
			})
		}
		svc.Close(context.Background())
	}
}

// mustServe has h serve one request and fails b unless its status is want.
func mustServe(b *testing.B, h http.Handler, method, path, body string, want int) {
	if w := serveRequest(h, method, path, body); w.Code != want {
		b.Fatalf("%s %s: %d %s, want %d", method, path, w.Code, w.Body, want)
	}
}
