package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/store/storetest"
)

func TestKeysCommandLine(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no action", []string{"keys"}, "refinery keys: missing action: create, list or revoke\n"},
		{"an unknown action", []string{"keys", "rotate"}, "refinery keys: unknown action \"rotate\": want create, list or revoke\n"},
		{"create without scopes", []string{"keys", "create", "--name", "ci"}, "refinery keys: create needs --name and --scopes (admin, decide, read)\n"},
		{"an unknown scope", []string{"keys", "create", "--name", "ci", "--scopes", "read,write"}, "refinery keys: --scopes: scope \"write\": want admin, decide or read\n"},
		{"a name with a slash", []string{"keys", "create", "--name", "a/b", "--scopes", "read"}, "refinery keys: --name: name \"a/b\": want 1 to 64 letters, digits, '.', '_', '-' or spaces, starting with a letter or digit\n"},
		{"revoke without an ID", []string{"keys", "revoke"}, "refinery keys: revoke needs one key ID: revoke ID (refinery keys list shows them)\n"},
		{"scopes with list", []string{"keys", "list", "--scopes", "read"}, "refinery keys: --name and --scopes go with create, not list\n"},
		{"no database", []string{"keys", "list"}, "refinery keys: no database: pass --database-url or set DATABASE_URL (the in-memory store of serve makes its own admin key)\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", "")
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || stderr.String() != tt.want {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "localhost:80": true, "[::1]:8080": true, "127.1.2.3:0": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.5:8080": false, "example.com:8080": false, "nonsense": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// keysRun runs the keys command and returns its stdout, failing unless
// it exits 0.
func keysRun(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"keys"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("refinery keys %s: exit %d, %s", strings.Join(args, " "), code, stderr.String())
	}
	return stdout.String()
}

// TestKeysEndToEnd: keys made by the CLI in PostgreSQL open a serve that
// requires them to exactly their scopes; list shows them without their
// secrets; revoke marks them.
func TestKeysEndToEnd(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	if code := run(context.Background(), []string{"migrate", "up", "--database-url", url}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("migrate up: exit %d", code)
	}
	admin := strings.TrimSpace(keysRun(t, "create", "--name", "ops", "--scopes", "admin", "--database-url", url))
	read := strings.TrimSpace(keysRun(t, "create", "--database-url", url, "--name", "dashboard viewer", "--scopes", "read"))
	if !keys.WellFormed(admin) || !keys.WellFormed(read) {
		t.Fatalf("create printed %q and %q, want secrets", admin, read)
	}

	m := startMain(t, func(m *Main) { m.DatabaseURL, m.RequireKeys = url, true })
	if m.AdminKey != "" {
		t.Errorf("serve on PostgreSQL made an admin key of its own")
	}
	c := newClient(t, m.URL())
	status := func(method, path, secret string, body any) int {
		t.Helper()
		req, err := http.NewRequest(method, m.URL()+path, strings.NewReader(body.(string)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const cfg = `{"name": "k", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`
	for _, tt := range []struct {
		method, path, secret, body string
		want                       int
	}{
		{"POST", "/v1/bandits", "", cfg, 401},
		{"POST", "/v1/bandits", read, cfg, 403},
		{"POST", "/v1/bandits", admin, cfg, 201},
		{"POST", "/v1/bandits/k/decisions", read, `{"context": {"x": 1}}`, 403},
		{"POST", "/v1/bandits/k/decisions", admin, `{"context": {"x": 1}}`, 201},
		{"GET", "/v1/dashboard", "", "", 401},
		{"GET", "/v1/dashboard", read, "", 200},
		{"GET", "/metrics", read, "", 200},
	} {
		if got := status(tt.method, tt.path, tt.secret, tt.body); got != tt.want {
			t.Errorf("%s %s with key %.12q = %d, want %d", tt.method, tt.path, tt.secret, got, tt.want)
		}
	}

	list := keysRun(t, "list", "--database-url", url)
	if !strings.Contains(list, "ops") || !strings.Contains(list, "dashboard viewer") || strings.Contains(list, admin) || strings.Contains(list, read) {
		t.Errorf("list = %q, want both keys and neither secret", list)
	}
	id := read[4:16]
	if out := keysRun(t, "revoke", id, "--database-url", url); out != "revoked key "+id+"\n" {
		t.Errorf("revoke printed %q", out)
	}
	for _, line := range strings.Split(keysRun(t, "list", "--database-url", url), "\n") {
		if strings.HasPrefix(line, id) && strings.HasSuffix(strings.TrimSpace(line), " -") {
			t.Errorf("the revoked key is listed without a revocation time: %q", line)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"keys", "revoke", "000000000000", "--database-url", url}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "no key") {
		t.Errorf("revoking an unknown key: exit %d, %q; want 1 and no key", code, stderr.String())
	}
}

// The in-memory server that requires keys makes an admin key and prints
// it once; a loopback server without --require-keys is open.
func TestServeMakesAnAdminKeyInMemory(t *testing.T) {
	m := startMain(t, func(m *Main) { m.RequireKeys = true })
	if !m.KeysRequired || !keys.WellFormed(m.AdminKey) {
		t.Fatalf("keys required %v, admin key %q; want true and a key", m.KeysRequired, m.AdminKey)
	}
	c := newClient(t, m.URL())
	if code, _, _, _ := c.do("GET", "/v1/bandits", nil); code != 401 {
		t.Errorf("GET /v1/bandits without the key = %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", m.URL()+"/v1/bandits", nil)
	req.Header.Set("Authorization", "Bearer "+m.AdminKey)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("GET /v1/bandits with the admin key = %d, want 200", resp.StatusCode)
	}
	open := startServe(t, "")
	if open.KeysRequired {
		t.Error("a loopback in-memory server requires keys without --require-keys")
	}
}

// With keys required, serve --simulate drives its bandits with a key of
// its own, revoked when serve closes, and --pprof's profiles need the
// admin scope.
func TestServeSimulatesAndProfilesWithKeys(t *testing.T) {
	m := startMain(t, func(m *Main) {
		m.RequireKeys, m.Pprof = true, true
		m.Simulate, m.Rate = "wheel", 50
	})
	get := func(path, secret string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", m.URL()+path, nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get("/debug/pprof/", ""); got != 401 {
		t.Errorf("GET /debug/pprof/ without a key = %d, want 401", got)
	}
	if got := get("/debug/pprof/", m.AdminKey); got != 200 {
		t.Errorf("GET /debug/pprof/ with the admin key = %d, want 200", got)
	}
	var decided bool
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !decided; time.Sleep(100 * time.Millisecond) {
		decided = true
		for _, name := range m.sim.bandits() {
			a, err := m.Service.Agent(name)
			if err != nil {
				decided = false
				break
			}
			d, _, err := m.Store.Counts(context.Background(), a.Name())
			decided = decided && err == nil && d >= 10
		}
	}
	if !decided {
		t.Fatal("the simulator's bandits did not get 10 decisions each within 20s")
	}
	ks := m.Store.(keys.Store)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	all, err := ks.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var sim *keys.Key
	for _, k := range all {
		if k.Name == "serve simulator" {
			sim = k
		}
	}
	if sim == nil || sim.RevokedAt == nil {
		t.Errorf("the simulator's key after Close: %+v, want it revoked", sim)
	}
}
