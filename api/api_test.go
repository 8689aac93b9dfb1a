package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/strictjson"
	"github.com/refinery-bandits/refinery/store"
	"github.com/refinery-bandits/refinery/store/storetest"
)

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fixture is a server on a store, with its metrics registry.
type fixture struct {
	srv     *httptest.Server
	store   bandit.Store
	reg     *prometheus.Registry
	metrics *api.Metrics
}

// memoryStore and postgresStore make the stores the tests run against.
func memoryStore(t *testing.T) bandit.Store {
	s := store.NewMemory()
	t.Cleanup(func() { s.Close() })
	return s
}

func postgresStore(t *testing.T) bandit.Store { return openPostgresStore(t) }

// openPostgresStore is postgresStore for tests and benchmarks alike.
func openPostgresStore(t testing.TB) bandit.Store {
	pcfg, _ := storetest.FreshSchema(t)
	store.SetSessionDefaults(pcfg.ConnConfig.RuntimeParams)
	ctx := context.Background()
	if err := store.MigrateConfig(ctx, pcfg.ConnConfig, store.Up); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.NewPostgres(pool, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		pool.Close()
	})
	return s
}

func newFixture(t *testing.T, st bandit.Store) *fixture {
	return newFixtureWith(t, st, func(*api.Config) {})
}

// newFixtureWith is newFixture with the server's configuration changed
// by set.
func newFixtureWith(t *testing.T, st bandit.Store, set func(*api.Config)) *fixture {
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	m := api.NewMetrics(reg)
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: log, Observer: m})
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := api.Config{Service: svc, Metrics: m, Gatherer: reg, Logger: log}
	set(&cfg)
	s := api.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		svc.Close(context.Background())
	})
	return &fixture{srv: srv, store: st, reg: reg, metrics: m}
}

// call sends body (a string, sent as is) with the given content type
// ("" for none) and returns the response and its body.
func (f *fixture) call(t *testing.T, method, path, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	if contentType == "" {
		return f.send(t, method, path, body)
	}
	return f.send(t, method, path, body, "Content-Type", contentType)
}

// noRedirects is a client that returns redirects as they are.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// send sends body ("" for none) with the given headers (name, value
// pairs) and returns the response, redirects included, and its body.
func (f *fixture) send(t *testing.T, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, out
}

func (f *fixture) must(t *testing.T, want int, method, path, body string) []byte {
	t.Helper()
	resp, out := f.call(t, method, path, "application/json", body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, out, want)
	}
	return out
}

const toyBandit = `{"name": "toy", "arms": ["a", "b"],
	"features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}],
	"policy": {"kind": "eps-greedy"}, "model": {"hidden": [4]}, "training": {"iterations": 5}}`

// state is what the bad requests must leave alone.
type state struct {
	bandits            int
	decisions, rewards int64
	reward             float64
}

func (f *fixture) state(t *testing.T) state {
	ctx := context.Background()
	bs, err := f.store.ListBandits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, r, err := f.store.Counts(ctx, "toy")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := f.store.ListDecisions(ctx, "toy", time.Time{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var reward float64
	for _, rec := range recs {
		if rec.EventID == "d1" && rec.Reward != nil {
			reward = rec.Reward.Value
		}
	}
	return state{bandits: len(bs), decisions: d, rewards: r, reward: reward}
}

// onBothStores runs f on the in-memory store and on PostgreSQL (skipped
// without $DATABASE_URL, failed under CI=true: storetest.DatabaseURL).
func onBothStores(t *testing.T, f func(t *testing.T, st bandit.Store)) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) bandit.Store
	}{
		{"on the in-memory store", memoryStore},
		{"on PostgreSQL", postgresStore},
	} {
		t.Run(tc.name, func(t *testing.T) { f(t, tc.store(t)) })
	}
}

func TestBadRequests(t *testing.T) { onBothStores(t, testBadRequests) }

func testBadRequests(t *testing.T, st bandit.Store) {
	f := newFixture(t, st)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d1", "context": {"color": "red", "size": 1}}`)
	f.must(t, http.StatusNoContent, "POST", "/v1/bandits/toy/events/d1/reward", `{"value": 1}`)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d2", "context": {"color": "blue", "size": 2}}`)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", strings.Replace(toyBandit, `"toy"`, `"shelved"`, 1))
	f.must(t, http.StatusOK, "PATCH", "/v1/bandits/shelved", `{"archived": true}`)
	before := f.state(t)

	const (
		decide = "/v1/bandits/toy/decisions"
		batch  = "/v1/bandits/toy/decision-batches"
		rank   = "/v1/bandits/toy/rankings"
		reward = "/v1/bandits/toy/events/d1/reward"
		json_  = "application/json"
		none   = "(none)" // no field member
	)
	huge := `{"name": "big", "arms": ["a"], "features": [{"name": "x", "type": "numeric"}], "pad": "` + strings.Repeat("x", 2<<20) + `"}`
	hugeDecision := `{"context": {"color": "red", "size": 1, "pad": "` + strings.Repeat("x", 100<<10) + `"}}`
	tests := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		wantStatus  int
		wantField   string
	}{
		{"a bandit config that is broken JSON is a 400 about the body", "POST", "/v1/bandits", json_, `{"name": "x", "arms": [`, 400, ""},
		{"a bandit config over 1 MiB is a 413", "POST", "/v1/bandits", json_, huge, 413, none},
		{"a bandit with no arms is a 400 naming arms", "POST", "/v1/bandits", json_, `{"name": "x", "arms": [], "features": [{"name": "f", "type": "numeric"}]}`, 400, "arms"},
		{"a bandit with one arm is a 400 naming arms", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}]}`, 400, "arms"},
		{"duplicate arm names are a 400 naming the duplicate", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a", "a"], "features": [{"name": "f", "type": "numeric"}]}`, 400, "arms[1]"},
		{"duplicate feature names are a 400 naming the duplicate", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}, {"name": "f", "type": "numeric"}]}`, 400, "features[1].name"},
		{"an unknown policy is a 400 naming policy.kind", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "oracle"}}`, 400, "policy.kind"},
		{"an absurd hidden width is a 400 naming the layer", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "model": {"hidden": [100000]}}`, 400, "model.hidden[0]"},
		{"an unknown config field is a 400 naming it", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "colour": 1}`, 400, "colour"},
		{"an unknown nested config field is a 400 naming its path", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kindd": "mf-ts"}}`, 400, "policy.kindd"},
		{"a config key in another case is a 400 naming it", "POST", "/v1/bandits", json_, `{"NAME": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}]}`, 400, "NAME"},
		{"a capitalized config key is a 400 naming it", "POST", "/v1/bandits", json_, `{"name": "x", "Arms": ["a"], "features": [{"name": "f", "type": "numeric"}]}`, 400, "Arms"},
		{"a capitalized decision key is a 400 naming it", "POST", decide, json_, `{"Context": {"color": "red", "size": 3}}`, 400, "Context"},
		{"a capitalized reward key is a 400 naming it", "POST", reward, json_, `{"Value": 1}`, 400, "Value"},
		{"a categorical feature without values is a 400", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "categorical"}]}`, 400, "features[0].values"},
		{"a bandit name with a space is a 400", "POST", "/v1/bandits", json_, `{"name": "a b", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}]}`, 400, "name"},
		{"an epsilon above 1 is a 400", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "eps-greedy", "epsilon": 2}}`, 400, "policy.epsilon"},
		{"refinement fractions that do not sum to 1 are a 400", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "refinement": {"fractions": [0.5, 0.2]}}`, 400, "refinement.fractions"},
		{"a string where a number belongs is a 400 naming it", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "policy": {"samples": "3"}}`, 400, "policy.samples"},
		{"a bandit name already taken is a 409", "POST", "/v1/bandits", json_, toyBandit, 409, none},
		{"a decision body that is broken JSON is a 400 about the body", "POST", decide, json_, `{"context": {"color": "red",`, 400, ""},
		{"a NaN literal is a 400 about the body", "POST", decide, json_, `{"context": {"color": "red", "size": NaN}}`, 400, ""},
		{"an Infinity literal is a 400 about the body", "POST", decide, json_, `{"context": {"color": "red", "size": Infinity}}`, 400, ""},
		{"a number beyond float64 is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "red", "size": 1e400}}`, 400, "context.size"},
		{"a decision for an unknown bandit is a 404", "POST", "/v1/bandits/nope/decisions", json_, `{"context": {}}`, 404, none},
		{"a string for a numeric feature is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red", "size": "3"}}`, 400, "context.size"},
		{"a number for a categorical feature is a 400 naming it", "POST", decide, json_, `{"context": {"color": 1, "size": 3}}`, 400, "context.color"},
		{"an unknown feature is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red", "size": 3, "weight": 2}}`, 400, "context.weight"},
		{"a missing required feature is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red"}}`, 400, "context.size"},
		{"an undeclared category is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "green", "size": 3}}`, 400, "context.color"},
		{"a context that is not an object is a 400", "POST", decide, json_, `{"context": [1, 2]}`, 400, "context"},
		{"a missing context is a 400", "POST", decide, json_, `{}`, 400, "context"},
		{"excluding an unknown arm is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red", "size": 3}, "excluded_arms": ["c"]}`, 400, "excluded_arms[0]"},
		{"excluding every arm is a 400", "POST", decide, json_, `{"context": {"color": "red", "size": 3}, "excluded_arms": ["a", "b"]}`, 400, "excluded_arms"},
		{"an event ID with a slash is a 400", "POST", decide, json_, `{"event_id": "a/b", "context": {"color": "red", "size": 3}}`, 400, "event_id"},
		{"an event ID decided for another context is a 409", "POST", decide, json_, `{"event_id": "d1", "context": {"color": "blue", "size": 1}}`, 409, none},
		{"a decision body over 64 KiB is a 413", "POST", decide, json_, hugeDecision, 413, none},
		{"a decision in text/plain is a 415", "POST", decide, "text/plain", `{"context": {"color": "red", "size": 3}}`, 415, none},
		{"trailing data after the JSON body is a 400", "POST", decide, json_, `{"context": {"color": "red", "size": 3}} {}`, 400, ""},
		{"an unknown decision field is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red", "size": 3}, "arm": "a"}`, 400, "arm"},
		// Batches of decisions: an item at fault is named by its index,
		// and no decision of the batch is stored.
		{"a batch item with an undeclared category is a 400 naming it", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}, {"color": "green", "size": 1}]}`, 400, "contexts[1].color"},
		{"a batch item missing a feature is a 400 naming it (the valid items before it not stored)", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}, {"color": "blue", "size": 2}, {"color": "red"}], "event_ids": ["n1", "n2", "n3"]}`, 400, "contexts[2].size"},
		{"a batch item with an unknown feature is a 400 naming it", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1, "weight": 2}]}`, 400, "contexts[0].weight"},
		{"a batch item that is not an object is a 400 naming it", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}, [1, 2]]}`, 400, "contexts[1]"},
		{"a batch item that is null is a 400 naming it", "POST", batch, json_, `{"contexts": [null]}`, 400, "contexts[0]"},
		{"an empty batch is a 400 naming contexts", "POST", batch, json_, `{"contexts": []}`, 400, "contexts"},
		{"a batch without contexts is a 400 naming contexts", "POST", batch, json_, `{}`, 400, "contexts"},
		{"a batch of 101 contexts is a 400 naming contexts", "POST", batch, json_, `{"contexts": [` + strings.Repeat(`{"color": "red", "size": 1},`, 100) + `{"color": "red", "size": 1}]}`, 400, "contexts"},
		{"fewer event IDs than contexts is a 400 naming event_ids", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}, {"color": "red", "size": 2}], "event_ids": ["n1"]}`, 400, "event_ids"},
		{"an event ID twice in a batch is a 400 naming the second", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}, {"color": "red", "size": 2}], "event_ids": ["n1", "n1"]}`, 400, "event_ids[1]"},
		{"a batch event ID with a slash is a 400 naming it", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}], "event_ids": ["a/b"]}`, 400, "event_ids[0]"},
		{"a batch excluding every arm is a 400 naming excluded_arms", "POST", batch, json_, `{"contexts": [{"color": "red", "size": 1}], "excluded_arms": ["a", "b"]}`, 400, "excluded_arms"},
		{"a batch with a single decision's member is a 400 naming it", "POST", batch, json_, `{"context": {"color": "red", "size": 1}}`, 400, "context"},
		{"a batch whose event ID was decided for another context is a 409", "POST", batch, json_, `{"contexts": [{"color": "blue", "size": 1}], "event_ids": ["d1"]}`, 409, none},
		{"a batch on an archived bandit is a 409", "POST", "/v1/bandits/shelved/decision-batches", json_, `{"contexts": [{"color": "red", "size": 1}]}`, 409, none},
		{"a batch for an unknown bandit is a 404", "POST", "/v1/bandits/nope/decision-batches", json_, `{"contexts": [{}]}`, 404, none},
		{"a batch body over 2 MiB is a 413", "POST", batch, json_, `{"contexts": [{"pad": "` + strings.Repeat("x", api.MaxBatchBytes) + `"}]}`, 413, none},
		// Rankings: more slots than arms, and the rest of a ranking's
		// body at fault, stores no slot.
		{"a ranking of more slots than arms is a 400 naming slots", "POST", rank, json_, `{"context": {"color": "red", "size": 1}, "slots": 3}`, 400, "slots"},
		{"a ranking of more slots than arms not excluded is a 400 naming slots", "POST", rank, json_, `{"context": {"color": "red", "size": 1}, "slots": 2, "excluded_arms": ["a"]}`, 400, "slots"},
		{"a ranking without slots is a 400 naming slots", "POST", rank, json_, `{"context": {"color": "red", "size": 1}}`, 400, "slots"},
		{"a ranking of a string of slots is a 400 naming slots", "POST", rank, json_, `{"context": {"color": "red", "size": 1}, "slots": "2"}`, 400, "slots"},
		{"a ranking with an undeclared category is a 400 naming it", "POST", rank, json_, `{"context": {"color": "green", "size": 1}, "slots": 2, "event_ids": ["n1", "n2"]}`, 400, "context.color"},
		{"a ranking with fewer event IDs than slots is a 400 naming event_ids", "POST", rank, json_, `{"context": {"color": "red", "size": 1}, "slots": 2, "event_ids": ["n1"]}`, 400, "event_ids"},
		{"a ranking with an event ID twice is a 400 naming the second", "POST", rank, json_, `{"context": {"color": "red", "size": 1}, "slots": 2, "event_ids": ["n1", "n1"]}`, 400, "event_ids[1]"},
		{"a ranking with a batch's member is a 400 naming it", "POST", rank, json_, `{"contexts": [{"color": "red", "size": 1}], "slots": 1}`, 400, "contexts"},
		{"a ranking whose event ID was decided for another context is a 409", "POST", rank, json_, `{"context": {"color": "blue", "size": 1}, "slots": 1, "event_ids": ["d1"]}`, 409, none},
		{"a ranking on an archived bandit is a 409", "POST", "/v1/bandits/shelved/rankings", json_, `{"context": {"color": "red", "size": 1}, "slots": 1}`, 409, none},
		{"a ranking for an unknown bandit is a 404", "POST", "/v1/bandits/nope/rankings", json_, `{"context": {}, "slots": 1}`, 404, none},
		{"a reward for an unknown event is a 404", "POST", "/v1/bandits/toy/events/nope/reward", json_, `{"value": 1}`, 404, none},
		{"a reward for an unknown bandit is a 404", "POST", "/v1/bandits/nope/events/d1/reward", json_, `{"value": 1}`, 404, none},
		{"a conflicting reward value is a 409", "POST", reward, json_, `{"value": 2}`, 409, none},
		{"a reward value that is a string is a 400 naming value", "POST", reward, json_, `{"value": "1"}`, 400, "value"},
		{"a reward without a value is a 400 naming value", "POST", reward, json_, `{}`, 400, "value"},
		{"a NaN reward is a 400 about the body", "POST", reward, json_, `{"value": NaN}`, 400, ""},
		{"a reward beyond float64 is a 400 naming value", "POST", reward, json_, `{"value": -1e999}`, 400, "value"},
		{"an empty reward body is a 400", "POST", reward, json_, ``, 400, ""},
		// Issue 16: values that used to pass validation and then broke
		// the trainer, the encoder of the answer or PostgreSQL.
		{"a finite reward of 1e308 is a 400 naming value", "POST", reward, json_, `{"value": 1e308}`, 400, "value"},
		{"a finite context value of 1.7e308 is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "red", "size": 1.7e308}}`, 400, "context.size"},
		{"a duplicate context key hiding a NUL is a 400 naming it", "POST", decide, json_, `{"context": {"color": "\u0000", "color": "red", "size": 1}}`, 400, "context.color"},
		{"a NUL character in a context value is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red\u0000", "size": 1}}`, 400, "context.color"},
		{"a lone surrogate is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "\udc00", "size": 1}}`, 400, "context.color"},
		{"invalid UTF-8 is a 400 naming the feature", "POST", decide, json_, "{\"context\": {\"color\": \"r\xffd\", \"size\": 1}}", 400, "context.color"},
		{"a duplicate top-level key is a 400 naming it", "POST", reward, json_, `{"value": 1, "value": 2}`, 400, "value"},
		{"nesting 100 levels deep is a 400", "POST", decide, json_, `{"context": {"color": "red", "size": 1}, "x": ` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, 400, "x" + strings.Repeat("[0]", strictjson.MaxDepth-1)},
		{"a duplicate key in a bandit config is a 400 naming it", "POST", "/v1/bandits", json_, `{"name": "x", "name": "y", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}]}`, 400, "name"},
		{"an explicit 0s reward wait with a default is a 400 (not replaced by 10m)", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "reward": {"wait": "0s", "default": 0}}`, 400, "reward.wait"},
		{"a default reward of 1e308 is a 400", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "reward": {"wait": "1m", "default": 1e308}}`, 400, "reward.default"},
		{"a numeric scale of 1e-300 is a 400", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric", "scale": 1e-300}]}`, 400, "features[0].scale"},
		// Issue 31, finding 3: numbers PostgreSQL's jsonb cannot store
		// (contexts are kept as sent), or no float64 holds.
		{"a context number that underflows a float64 is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "red", "size": 1e-400}}`, 400, "context.size"},
		{"a context number with a 20,000-digit mantissa is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "red", "size": 0.` + strings.Repeat("0", 20_000) + `1}}`, 400, "context.size"},
		{"a context zero with a five-digit exponent is a 400 naming the feature", "POST", decide, json_, `{"context": {"color": "red", "size": 0e-20000}}`, 400, "context.size"},
		{"an unknown feature holding 1e-400 is a 400 naming it", "POST", decide, json_, `{"context": {"color": "red", "size": 1, "weight": 1e-400}}`, 400, "context.weight"},
		{"a reward that underflows a float64 is a 400 naming value", "POST", reward, json_, `{"value": 1e-400}`, 400, "value"},
		{"a reward with a 3,000-digit mantissa is a 400 naming value", "POST", reward, json_, `{"value": 1.` + strings.Repeat("0", 3000) + `}`, 400, "value"},
		{"an epsilon of 1e-400 is a 400 naming it", "POST", "/v1/bandits", json_, `{"name": "x", "arms": ["a"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "eps-greedy", "epsilon": 1e-400}}`, 400, "policy.epsilon"},
		{"an epsilon of 0e-20000 on PATCH is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"policy": {"epsilon": 0e-20000}}`, 400, "policy.epsilon"},
		{"an unknown route is a 404", "GET", "/v2/bandits", "", "", 404, none},
		{"a wrong method is a 405", "DELETE", "/v1/bandits", "", "", 405, none},
		{"PUT on a bandit is a 405", "PUT", "/v1/bandits/toy", json_, `{}`, 405, none},
		{"DELETE on a decision is a 405", "DELETE", "/v1/bandits/toy/decisions/d1", "", "", 405, none},
		// PATCH: what cannot change, what does not exist, what is
		// there already, and settings invalid as at creation.
		{"adding an arm that exists is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"add_arms": ["b"]}`, 400, "add_arms[0]"},
		{"adding the same arm twice is a 400 naming the second", "PATCH", "/v1/bandits/toy", json_, `{"add_arms": ["c", "c"]}`, 400, "add_arms[1]"},
		{"adding an empty arm name is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"add_arms": [""]}`, 400, "add_arms[0]"},
		{"adding no arms is a 400", "PATCH", "/v1/bandits/toy", json_, `{"add_arms": []}`, 400, "add_arms"},
		{"a value for an unknown feature is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"add_values": {"shape": ["round"]}}`, 400, "add_values.shape"},
		{"a value for a numeric feature is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"add_values": {"size": ["big"]}}`, 400, "add_values.size"},
		{"a value declared already is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"add_values": {"color": ["green", "red"]}}`, 400, "add_values.color[1]"},
		{"the same new value twice is a 400 naming the second", "PATCH", "/v1/bandits/toy", json_, `{"add_values": {"color": ["green", "green"]}}`, 400, "add_values.color[1]"},
		{"a value that is not a string is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"add_values": {"color": [1]}}`, 400, "add_values.color[0]"},
		{"replacing the arms is a 400 naming arms", "PATCH", "/v1/bandits/toy", json_, `{"arms": ["a", "b", "c"]}`, 400, "arms"},
		{"renaming is a 400 naming name", "PATCH", "/v1/bandits/toy", json_, `{"name": "other"}`, 400, "name"},
		{"changing the features is a 400 naming features", "PATCH", "/v1/bandits/toy", json_, `{"features": []}`, 400, "features"},
		{"changing the network is a 400 naming model", "PATCH", "/v1/bandits/toy", json_, `{"model": {"hidden": [8]}}`, 400, "model"},
		{"changing the policy kind is a 400 naming policy.kind", "PATCH", "/v1/bandits/toy", json_, `{"policy": {"kind": "mf-ts"}}`, 400, "policy.kind"},
		{"an epsilon above 1 on PATCH is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"policy": {"epsilon": 2}}`, 400, "policy.epsilon"},
		{"an unknown nested field on PATCH is a 400 naming its path", "PATCH", "/v1/bandits/toy", json_, `{"training": {"iterationz": 5}}`, 400, "training.iterationz"},
		{"a string for a number on PATCH is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"training": {"iterations": "5"}}`, 400, "training.iterations"},
		{"a section that is not an object is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"policy": 3}`, 400, "policy"},
		{"an unknown PATCH member is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"arms_to_add": ["c"]}`, 400, "arms_to_add"},
		{"a PATCH key in another case is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"Add_arms": ["c"]}`, 400, "Add_arms"},
		{"archived that is not a boolean is a 400 naming it", "PATCH", "/v1/bandits/toy", json_, `{"archived": "yes"}`, 400, "archived"},
		{"an empty PATCH is a 400", "PATCH", "/v1/bandits/toy", json_, `{}`, 400, ""},
		{"a PATCH in text/plain is a 415", "PATCH", "/v1/bandits/toy", "text/plain", `{"archived": true}`, 415, none},
		{"a PATCH of an unknown bandit is a 404", "PATCH", "/v1/bandits/nope", json_, `{"archived": true}`, 404, none},
		{"changing an archived bandit is a 409", "PATCH", "/v1/bandits/shelved", json_, `{"training": {"iterations": 7}}`, 409, none},
		{"deciding on an archived bandit is a 409", "POST", "/v1/bandits/shelved/decisions", json_, `{"context": {"color": "red", "size": 1}}`, 409, none},
		{"a DELETE of an unknown bandit is a 404", "DELETE", "/v1/bandits/nope", "", "", 404, none},
		{"a DELETE with purge=yes is a 400 naming purge", "DELETE", "/v1/bandits/toy?purge=yes", "", "", 400, "purge"},
		{"a DELETE with an unknown parameter is a 400 naming it", "DELETE", "/v1/bandits/toy?force=true", "", "", 400, "force"},
		// The decision log's query.
		{"a decision page of 5000 is a 400 naming limit", "GET", decide + "?limit=5000", "", "", 400, "limit"},
		{"a decision page of -1 is a 400 naming limit", "GET", decide + "?limit=-1", "", "", 400, "limit"},
		{"a since that is not a time is a 400 naming since", "GET", decide + "?since=yesterday", "", "", 400, "since"},
		{"an until before since is a 400 naming until", "GET", decide + "?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "", "", 400, "until"},
		{"a cursor this API did not make is a 400 naming cursor", "GET", decide + "?cursor=abc", "", "", 400, "cursor"},
		{"an unknown query parameter is a 400 naming it", "GET", decide + "?offset=10", "", "", 400, "offset"},
		{"a repeated query parameter is a 400 naming it", "GET", decide + "?limit=1&limit=2", "", "", 400, "limit"},
		{"parameters separated by ';' are a 400 naming the first", "GET", decide + "?limit=5;limit=6", "", "", 400, "limit"},
		{"a DELETE with purge=true;x is a 400 naming purge (it deleted the bandit)", "DELETE", "/v1/bandits/toy?purge=true;x=1", "", "", 400, "purge"},
		{"a malformed escape in the query is a 400 naming its parameter", "GET", decide + "?limit=%zz", "", "", 400, "limit"},
		{"an unknown decision is a 404", "GET", decide + "/nope", "", "", 404, none},
		{"a decision of an unknown bandit is a 404", "GET", "/v1/bandits/nope/decisions/d1", "", "", 404, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.call(t, tt.method, tt.path, tt.contentType, tt.body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d (%s), want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if ct := resp.Header.Get("Content-Type"); ct != api.ProblemContentType {
				t.Errorf("Content-Type = %q, want %q", ct, api.ProblemContentType)
			}
			var p api.Problem
			if err := json.Unmarshal(body, &p); err != nil {
				t.Fatalf("body %q is not a problem: %v", body, err)
			}
			if allow := resp.Header.Get("Allow"); (tt.wantStatus == http.StatusMethodNotAllowed) != (allow != "") {
				t.Errorf("Allow = %q on a %d", allow, resp.StatusCode)
			}
			if p.Status != tt.wantStatus || p.Title == "" || p.Detail == "" || p.RequestID == "" {
				t.Errorf("problem %+v: want status %d, a title, a detail and a request ID", p, tt.wantStatus)
			}
			hasField := bytes.Contains(body, []byte(`"field":`)) // on the wire, beside errors
			switch {
			case tt.wantField == none && hasField:
				t.Errorf("field = %q, want none (problem %s)", p.Field, body)
			case tt.wantField != none && (!hasField || p.Field != tt.wantField):
				t.Errorf("field = %q, want %q (problem %s)", p.Field, tt.wantField, body)
			}
		})
	}
	if after := f.state(t); after != before {
		t.Errorf("stored data changed: before %+v, after %+v", before, after)
	}
}

func TestMetricsCountByRoutePattern(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	for _, id := range []string{"e1", "e2", "e3"} {
		f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "`+id+`", "context": {"color": "red", "size": 1}}`)
	}
	f.must(t, http.StatusOK, "POST", "/v1/bandits/toy/decisions", `{"event_id": "e1", "context": {"color": "red", "size": 1}}`) // a replay
	for _, id := range []string{"e1", "e2"} {
		f.must(t, http.StatusNoContent, "POST", "/v1/bandits/toy/events/"+id+"/reward", `{"value": 1}`)
	}
	f.call(t, "GET", "/v1/bandits/nope", "", "")

	want := `
# HELP refinery_rewards_total Rewards accepted (204), including defaults applied after reward.wait; an idempotent repeat of a reward counts again.
# TYPE refinery_rewards_total counter
refinery_rewards_total{bandit="toy"} 2
# HELP refinery_http_requests_total HTTP requests by method, route pattern and status code.
# TYPE refinery_http_requests_total counter
refinery_http_requests_total{code="200",method="POST",route="/v1/bandits/{name}/decisions"} 1
refinery_http_requests_total{code="201",method="POST",route="/v1/bandits"} 1
refinery_http_requests_total{code="201",method="POST",route="/v1/bandits/{name}/decisions"} 3
refinery_http_requests_total{code="204",method="POST",route="/v1/bandits/{name}/events/{event_id}/reward"} 2
refinery_http_requests_total{code="404",method="GET",route="/v1/bandits/{name}"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "refinery_rewards_total", "refinery_http_requests_total"); err != nil {
		t.Error(err)
	}
	// Decisions count the stored ones, not the replay: 3 in all, with
	// sample "point" (eps-greedy).
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var decisions float64
	for _, mf := range mfs {
		if mf.GetName() != "refinery_decisions_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sample" && l.GetValue() != "point" {
					t.Errorf("sample label %q, want point", l.GetValue())
				}
			}
			decisions += m.GetCounter().GetValue()
		}
	}
	if decisions != 3 {
		t.Errorf("refinery_decisions_total sums to %g, want 3", decisions)
	}
}
