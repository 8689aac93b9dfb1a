package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/store"
)

// sendHost is send with the Host header set to host.
func (f *fixture) sendHost(t *testing.T, host, method, path, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
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

// TestForeignHostIsRefusedOnTheOpenLoopbackDefault: with AllowedHosts
// (serve's open loopback default), a request naming another Host (a page
// whose name rebound to 127.0.0.1, with Origin and Host both its own) is
// a 421 problem and creates nothing; the loopback names pass with any
// port and case (issue 31, finding 10).
func TestForeignHostIsRefusedOnTheOpenLoopbackDefault(t *testing.T) {
	f := newFixtureWith(t, memoryStore(t), func(c *api.Config) { c.AllowedHosts = []string{"localhost", "127.0.0.1", "::1"} })
	for _, tc := range []struct {
		name, host, method, path, body string
		header                         []string
		want                           int
	}{
		{"a rebound page creating a bandit is a 421", "rebound.example:8080", "POST", "/v1/bandits", toyBandit,
			[]string{"Origin", "http://rebound.example:8080", "Content-Type", "application/json"}, http.StatusMisdirectedRequest},
		{"a rebound page reading the dashboard is a 421", "rebound.example", "GET", "/v1/dashboard", "", nil, http.StatusMisdirectedRequest},
		{"a foreign Host on /readyz is a 421", "127.0.0.1.rebound.example", "GET", "/readyz", "", nil, http.StatusMisdirectedRequest},
		{"localhost in capitals passes", "LOCALHOST:8080", "GET", "/healthz", "", nil, http.StatusOK},
		{"[::1] with a port passes", "[::1]:8080", "GET", "/healthz", "", nil, http.StatusOK},
		{"127.0.0.1 without a port passes", "127.0.0.1", "GET", "/healthz", "", nil, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, out := f.sendHost(t, tc.host, tc.method, tc.path, tc.body, tc.header...)
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, out, tc.want)
			}
			if tc.want == http.StatusMisdirectedRequest {
				if ct := resp.Header.Get("Content-Type"); ct != api.ProblemContentType || !strings.Contains(string(out), `"status":421`) {
					t.Errorf("Content-Type %q, body %s; want a 421 problem", ct, out)
				}
			}
		})
	}
	if bs, _ := f.store.ListBandits(context.Background()); len(bs) != 0 {
		t.Errorf("%d bandits stored, want none", len(bs))
	}
}

// unreachable is an in-memory store whose Ping is a PostgreSQL store's
// on a port where no database listens: its error names the user, the
// database and the host:port.
type unreachable struct {
	bandit.Store
	pg *store.Postgres
}

func (u unreachable) Ping(ctx context.Context) error { return u.pg.Ping(ctx) }

// TestReadyzHidesDatabaseDetailsWhenKeysAreRequired: /readyz stays open,
// and during an outage it says the store is unavailable without the
// database's user, name or address when keys are required (every
// address beyond loopback); on the open loopback default it keeps the
// error for the operator (issue 31, finding 11).
func TestReadyzHidesDatabaseDetailsWhenKeysAreRequired(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://refinery_user@127.0.0.1:1/refinery_secret_db?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pg, err := store.NewPostgres(pool, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, requireKeys := range []bool{true, false} {
		mem := memoryStore(t)
		f := newFixtureWith(t, unreachable{Store: mem, pg: pg}, func(c *api.Config) { c.RequireKeys, c.Keys = requireKeys, mem.(keys.Store) })
		resp, out := f.send(t, "GET", "/readyz", "")
		var body struct {
			Checks map[string]string `json:"checks"`
		}
		if err := json.Unmarshal(out, &body); err != nil {
			t.Fatal(err)
		}
		leaks := strings.Contains(string(out), "refinery_user") || strings.Contains(string(out), "refinery_secret_db") || strings.Contains(string(out), "127.0.0.1:1")
		switch {
		case resp.StatusCode != http.StatusServiceUnavailable:
			t.Errorf("keys required %v: /readyz %d %s, want 503", requireKeys, resp.StatusCode, out)
		case requireKeys && (leaks || body.Checks["store"] != "unavailable"):
			t.Errorf("keys required: /readyz says %s, want store \"unavailable\" and no user, database or address", out)
		case !requireKeys && !leaks:
			t.Errorf("open loopback: /readyz says %s, want the database's error", out)
		}
	}
}
