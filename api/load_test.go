package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// faultyStore is the in-memory store with InsertDecision and
// InsertDecisions replaced by fault, when set.
type faultyStore struct {
	bandit.Store
	mu    sync.Mutex
	fault func(ctx context.Context) error
}

func (s *faultyStore) set(f func(ctx context.Context) error) {
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

func (s *faultyStore) InsertDecision(ctx context.Context, d *bandit.Decision) (*bandit.Decision, bool, error) {
	s.mu.Lock()
	f := s.fault
	s.mu.Unlock()
	if f != nil {
		if err := f(ctx); err != nil {
			return nil, false, err
		}
	}
	return s.Store.InsertDecision(ctx, d)
}

func (s *faultyStore) InsertDecisions(ctx context.Context, ds []*bandit.Decision) ([]*bandit.Decision, []bool, error) {
	s.mu.Lock()
	f := s.fault
	s.mu.Unlock()
	if f != nil {
		if err := f(ctx); err != nil {
			return nil, nil, err
		}
	}
	return s.Store.InsertDecisions(ctx, ds)
}

func newServer(t *testing.T, st bandit.Store, cfg api.Config) *httptest.Server {
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: log, MaxBandits: 2})
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.Service, cfg.Logger = svc, log
	s := api.New(cfg)
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		svc.Close(context.Background())
	})
	return srv
}

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// unavailable is err as a store reports an unavailable database, marked
// bandit.ErrStoreUnavailable (the PostgreSQL store's classification of
// such errors is store's TestErrorsOfAnUnavailableDatabaseAreTheDomains).
func unavailable(err error) error { return fmt.Errorf("%w: %w", bandit.ErrStoreUnavailable, err) }

// TestOutagesAre503: a database that refuses, terminates or shuts down
// connections gives 503 with Retry-After, not 500, and /readyz turns 503;
// a hung database is cut off by the request timeout (issue 16, finding 4).
func TestOutagesAre503(t *testing.T) {
	st := &faultyStore{Store: store.NewMemory()}
	srv := newServer(t, st, api.Config{RequestTimeout: 300 * time.Millisecond})
	if resp, body := post(t, srv.URL+"/v1/bandits", toyBandit); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	const decision = `{"context": {"color": "red", "size": 1}}`
	for _, tc := range []struct {
		name  string
		fault func(context.Context) error
	}{
		{"admin shutdown", func(context.Context) error {
			return unavailable(&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})
		}},
		{"refused", func(context.Context) error {
			return unavailable(fmt.Errorf("store: insert decision: %w", &pgconn.ConnectError{}))
		}},
		{"cannot connect now", func(context.Context) error { return unavailable(&pgconn.PgError{Code: "57P03"}) }},
		{"hung", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st.set(tc.fault)
			start := time.Now()
			resp, body := post(t, srv.URL+"/v1/bandits/toy/decisions", decision)
			if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
				t.Errorf("decision: %d (Retry-After %q) %s, want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the answer took %v, want it within the request timeout", d)
			}
			if resp, err := http.Get(srv.URL + "/readyz"); err != nil || resp.StatusCode != 503 {
				t.Errorf("/readyz during the outage: %v %v, want 503", resp.StatusCode, err)
			}
		})
	}
	st.set(nil)
	if resp, body := post(t, srv.URL+"/v1/bandits/toy/decisions", decision); resp.StatusCode != 201 {
		t.Errorf("decision after the outage: %d %s, want 201", resp.StatusCode, body)
	}
}

// TestOverloadIsShed: with every slot busy, further requests are
// answered 429 with Retry-After after a short wait, and /healthz still
// answers (issue 16, finding 6).
func TestOverloadIsShed(t *testing.T) {
	st := &faultyStore{Store: store.NewMemory()}
	srv := newServer(t, st, api.Config{MaxInFlight: 2, AdmissionWait: 50 * time.Millisecond})
	if resp, body := post(t, srv.URL+"/v1/bandits", toyBandit); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	st.set(func(ctx context.Context) error {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	const decision = `{"context": {"color": "red", "size": 1}}`
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { post(t, srv.URL+"/v1/bandits/toy/decisions", decision) })
	}
	<-entered
	<-entered
	start := time.Now()
	for i := range 5 {
		resp, body := post(t, srv.URL+"/v1/bandits/toy/decisions", decision)
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("request %d beyond capacity: %d (Retry-After %q) %s, want 429 with Retry-After", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("5 shed requests took %v, want about 5 x 50ms", d)
	}
	if resp, err := http.Get(srv.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz at capacity: %v %v, want 200", resp, err)
	}
	close(release)
	wg.Wait()
	st.set(nil)
	if resp, body := post(t, srv.URL+"/v1/bandits/toy/decisions", decision); resp.StatusCode != 201 {
		t.Errorf("decision after the load: %d %s, want 201", resp.StatusCode, body)
	}
}

// TestClientOrderedCostsAreBounded: the configurations of issue 16,
// finding 5 and issue 31, finding 4 are refused, and bandits beyond the
// service's limit are 403.
func TestClientOrderedCostsAreBounded(t *testing.T) {
	srv := newServer(t, store.NewMemory(), api.Config{})
	for _, tc := range []struct{ name, body, field string }{
		{"100 samples x 10000 propensity samples", `{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "mf-ts", "samples": 100, "propensity_samples": 10000}}`, "policy.propensity_samples"},
		{"a 2-million-parameter network", `{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "model": {"hidden": [1024, 1024, 1024]}}`, "model.hidden"},
		{"a refinement budget beyond the limit", `{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "model": {"hidden": [512, 512]}, "refinement": {"iterations": 100000, "batch_size": 4096}}`, "refinement.iterations"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, srv.URL+"/v1/bandits", tc.body)
			if resp.StatusCode != 400 || !strings.Contains(body, `"field":"`+tc.field+`"`) {
				t.Errorf("%d %s, want 400 naming %s", resp.StatusCode, body, tc.field)
			}
		})
	}
	var values, arms []string
	for i := range 1000 {
		values = append(values, fmt.Sprintf(`"v%d"`, i))
	}
	for i := range 100 {
		arms = append(arms, fmt.Sprintf(`"a%d"`, i))
	}
	// Issue 31, finding 4: 100 arms, a hidden layer of 240 and 10,000
	// propensity draws per mf-ts decision (6.1 s and 25.5 MB each).
	heavy := `{"name": "x", "arms": [` + strings.Join(arms, ",") + `], "features": [{"name": "f", "type": "numeric"}], "model": {"hidden": [240]}, "policy": {"kind": "mf-ts", "samples": 1, "propensity_samples": 10000}}`
	if resp, body := post(t, srv.URL+"/v1/bandits", heavy); resp.StatusCode != 400 || !strings.Contains(body, `"field":"policy.propensity_samples"`) || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("the heaviest decision of issue 31: %d %q %s, want a 400 problem+json naming policy.propensity_samples", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	v := strings.Join(values, ",")
	lin := `{"name": "x", "arms": [` + strings.Join(arms, ",") + `], "features": [{"name": "f", "type": "categorical", "values": [` + v + `]}, {"name": "g", "type": "categorical", "values": [` + v + `]}], "policy": {"kind": "linear-ts"}}`
	if resp, body := post(t, srv.URL+"/v1/bandits", lin); resp.StatusCode != 400 || !strings.Contains(body, `"field":"features"`) {
		t.Errorf("linear-ts on 2000 inputs and 100 arms: %d %s, want 400 naming features", resp.StatusCode, body)
	}
	for i, want := range []int{201, 201, 403} {
		body := fmt.Sprintf(`{"name": "b%d", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "uniform"}}`, i)
		if resp, out := post(t, srv.URL+"/v1/bandits", body); resp.StatusCode != want {
			t.Errorf("bandit %d of a service limited to 2: %d %s, want %d", i+1, resp.StatusCode, out, want)
		}
	}
}
