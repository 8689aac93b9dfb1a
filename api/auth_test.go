package api_test

import (
	"context"
	"encoding/json"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
)

// keyCacheTTL is the fixture's key cache: short, so that a revocation
// shows at once.
const keyCacheTTL = 50 * time.Millisecond

// refusedKeyDelay is the tarpit's delay in the tests of what a refusal
// says (the tarpit itself: TestTarpitHoldsRefusedKeys).
const refusedKeyDelay = 20 * time.Millisecond

// keyFixture is a server that requires keys, on st, with a key per
// scope and a revoked admin key.
type keyFixture struct {
	*fixture
	admin, decide, read, revoked string
}

func newKeyFixture(t *testing.T, st bandit.Store) *keyFixture {
	ks := st.(keys.Store)
	rnd := mrand.NewChaCha8([32]byte{7})
	f := &keyFixture{}
	for _, k := range []struct {
		secret *string
		scope  keys.Scope
	}{{&f.admin, keys.Admin}, {&f.decide, keys.Decide}, {&f.read, keys.Read}, {&f.revoked, keys.Admin}} {
		secret, key, err := keys.New(rnd, "test "+string(k.scope), []keys.Scope{k.scope}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := ks.CreateKey(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		*k.secret = secret
		if k.secret == &f.revoked {
			if err := ks.RevokeKey(context.Background(), key.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.fixture = newFixtureWith(t, st, func(c *api.Config) {
		c.RequireKeys, c.Keys, c.KeyCacheTTL, c.RefusedKeyDelay = true, ks, keyCacheTTL, refusedKeyDelay
	})
	return f
}

func bearer(secret string) []string {
	return []string{"Authorization", "Bearer " + secret, "Content-Type", "application/json"}
}

// TestKeysBadInput is the bad-input table of issue 17: missing, wrong,
// malformed, revoked and under-scoped keys (401 or 403, problem+json,
// WWW-Authenticate as RFC 6750 says), a cross-origin request without
// Content-Type (the no-cors fetch that created a bandit), a body without
// Content-Type, and reads of the dashboard, its JSON and /metrics
// without the scope. None of them changes what is stored.
func TestKeysBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) bandit.Store
	}{
		{"on the in-memory store", memoryStore},
		{"on PostgreSQL", postgresStore},
	} {
		t.Run(tc.name, func(t *testing.T) { testKeysBadInput(t, newKeyFixture(t, tc.store(t))) })
	}
}

func testKeysBadInput(t *testing.T, f *keyFixture) {
	mustKey := func(want int, secret, method, path, body string) []byte {
		t.Helper()
		resp, out := f.send(t, method, path, body, bearer(secret)...)
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, out, want)
		}
		return out
	}
	mustKey(201, f.admin, "POST", "/v1/bandits", toyBandit)
	mustKey(201, f.decide, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d1", "context": {"color": "red", "size": 1}}`)
	mustKey(204, f.decide, "POST", "/v1/bandits/toy/events/d1/reward", `{"value": 1}`)
	mustKey(201, f.admin, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d2", "context": {"color": "blue", "size": 2}}`) // admin includes decide
	before := f.state(t)

	const (
		decide   = "/v1/bandits/toy/decisions"
		decision = `{"context": {"color": "red", "size": 3}}`
		json_    = "application/json"
	)
	unknown, _, _ := keys.New(mrand.NewChaCha8([32]byte{99}), "never stored", []keys.Scope{keys.Admin}, time.Now())
	const (
		noChallenge = `Bearer realm="refinery"`
		invalid     = `error="invalid_token"`
	)
	tests := []struct {
		name          string
		method, path  string
		body          string
		header        []string
		wantStatus    int
		wantChallenge string // a substring of WWW-Authenticate; "" for none
	}{
		{"a decision without a key is a 401", "POST", decide, decision, []string{"Content-Type", json_}, 401, noChallenge},
		{"a decision with a Basic authorization is a 401", "POST", decide, decision, []string{"Authorization", "Basic dXNlcjpwYXNz", "Content-Type", json_}, 401, `error="invalid_request"`},
		{"a decision with a malformed key is a 401", "POST", decide, decision, bearer("rfk_123"), 401, invalid},
		{"a decision with a wrong key is a 401", "POST", decide, decision, bearer(unknown), 401, invalid},
		{"a decision with a revoked key is a 401", "POST", decide, decision, bearer(f.revoked), 401, invalid},
		{"a decision with a read key is a 403 naming the decide scope", "POST", decide, decision, bearer(f.read), 403, `scope="decide"`},
		{"a reward with a read key is a 403", "POST", "/v1/bandits/toy/events/d2/reward", `{"value": 1}`, bearer(f.read), 403, `scope="decide"`},
		{"creating a bandit with a decide key is a 403 naming admin", "POST", "/v1/bandits", strings.Replace(toyBandit, "toy", "toy2", 1), bearer(f.decide), 403, `scope="admin"`},
		{"importing a snapshot with a read key is a 403", "POST", "/v1/snapshots", `{}`, bearer(f.read), 403, `scope="admin"`},
		{"reading the dashboard's JSON without a key is a 401", "GET", "/v1/dashboard", "", nil, 401, noChallenge},
		{"reading the dashboard's JSON with a decide key is a 403", "GET", "/v1/dashboard", "", bearer(f.decide), 403, `scope="read"`},
		{"reading the decision log without a key is a 401", "GET", "/v1/bandits/toy/decisions", "", nil, 401, noChallenge},
		{"reading a bandit with a revoked key is a 401", "GET", "/v1/bandits/toy", "", bearer(f.revoked), 401, invalid},
		{"reading /metrics without a key is a 401", "GET", "/metrics", "", nil, 401, noChallenge},
		{"reading /openapi.json with a decide key is a 403", "GET", "/openapi.json", "", bearer(f.decide), 403, `scope="read"`},
		{"an unknown route without a key is a 401, not a 404", "GET", "/v1/nothing", "", nil, 401, noChallenge},
		{"a browser's cross-origin decision without Content-Type is a 403", "POST", decide, decision, []string{"Origin", "http://127.0.0.1:9999", "Sec-Fetch-Site", "cross-site", "Authorization", "Bearer " + f.decide}, 403, ""},
		{"a browser's cross-origin bandit without Content-Type and key is a 403", "POST", "/v1/bandits", strings.Replace(toyBandit, "toy", "toy3", 1), []string{"Origin", "http://localhost:3000"}, 403, ""},
		{"a decision without Content-Type is a 415", "POST", decide, decision, []string{"Authorization", "Bearer " + f.decide}, 415, ""},
		{"a decision in a form's content type is a 415", "POST", decide, decision, []string{"Authorization", "Bearer " + f.decide, "Content-Type", "application/x-www-form-urlencoded"}, 415, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.send(t, tt.method, tt.path, tt.body, tt.header...)
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
			if p.Status != tt.wantStatus || p.Detail == "" || p.RequestID == "" {
				t.Errorf("problem %+v: want status %d, a detail and a request ID", p, tt.wantStatus)
			}
			ch := resp.Header.Get("WWW-Authenticate")
			if tt.wantChallenge == "" && ch != "" || tt.wantChallenge != "" && (!strings.HasPrefix(ch, noChallenge) || !strings.Contains(ch, tt.wantChallenge)) {
				t.Errorf("WWW-Authenticate = %q, want one containing %q", ch, tt.wantChallenge)
			}
			for _, secret := range []string{f.admin, f.decide, f.read, f.revoked, unknown} {
				if strings.Contains(string(body), secret) {
					t.Errorf("the answer repeats a secret: %s", body)
				}
			}
		})
	}
	if after := f.state(t); after != before {
		t.Errorf("stored data changed: before %+v, after %+v", before, after)
	}

	// What the scopes do allow: read reads the dashboard with the
	// decisions' event IDs and contexts, and /metrics.
	var v struct {
		Bandits []struct {
			Recent []struct {
				EventID string          `json:"event_id"`
				Context json.RawMessage `json:"context"`
			} `json:"recent"`
		} `json:"bandits"`
	}
	if err := json.Unmarshal(mustKey(200, f.read, "GET", "/v1/dashboard", ""), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Bandits) != 1 || len(v.Bandits[0].Recent) != 2 || v.Bandits[0].Recent[0].EventID == "" || len(v.Bandits[0].Recent[0].Context) == 0 {
		t.Errorf("the read key's dashboard = %+v, want the two decisions with event IDs and contexts", v)
	}
	mustKey(200, f.read, "GET", "/metrics", "")
	mustKey(200, f.admin, "GET", "/v1/bandits/toy", "")
	for _, path := range []string{"/healthz", "/readyz", "/static/dashboard.css"} {
		if resp, out := f.send(t, "GET", path, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s without a key = %d %s, want 200 (open)", path, resp.StatusCode, out)
		}
	}
}

// TestDashboardLogin: without a read key the page is the login form
// (401) with the security headers; posting a read key sets it as an
// HttpOnly, SameSite=Strict cookie that reads the dashboard's JSON but
// writes nothing; a decide key is refused (403); a revoked key stops
// working once the cache forgets it.
func TestDashboardLogin(t *testing.T) {
	f := newKeyFixture(t, memoryStore(t))
	resp, body := f.send(t, "GET", "/", "")
	if resp.StatusCode != 401 || !strings.Contains(string(body), `action="/login"`) || strings.Contains(string(body), "<script") {
		t.Fatalf("GET / without a key = %d %.200s, want 401 with the login form and no script", resp.StatusCode, body)
	}
	for name, want := range map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'self'", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
	} {
		if got := resp.Header.Get(name); !strings.Contains(got, want) {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("CSP %q does not forbid framing", resp.Header.Get("Content-Security-Policy"))
	}
	form := "application/x-www-form-urlencoded"
	resp, body = f.send(t, "POST", "/login", url.Values{"key": {f.decide}}.Encode(), "Content-Type", form)
	if resp.StatusCode != 403 || !strings.Contains(string(body), "read scope") || len(resp.Cookies()) != 0 {
		t.Errorf("login with a decide key = %d %.200s (cookies %v), want 403 saying it lacks read, no cookie", resp.StatusCode, body, resp.Cookies())
	}
	resp, _ = f.send(t, "POST", "/login", url.Values{"key": {f.read}}.Encode(), "Content-Type", form)
	cs := resp.Cookies()
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "/" || len(cs) != 1 || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("login with a read key = %d, Location %q, cookies %+v; want 303 to / with an HttpOnly SameSite=Strict cookie", resp.StatusCode, resp.Header.Get("Location"), cs)
	}
	// The cookie is a signed session, not the key (issue 30, finding 12).
	secretPart := f.read[strings.LastIndexByte(f.read, '_')+1:]
	if strings.Contains(cs[0].Value, secretPart) || !strings.HasPrefix(cs[0].Value, "v1.") {
		t.Errorf("the sign-in cookie %q holds the key %q", cs[0].Value, f.read)
	}
	cookie := cs[0].Name + "=" + cs[0].Value
	// A forged MAC, another expiry under the same MAC, and the raw key
	// as the cookie are all refused.
	mac := cs[0].Value[strings.LastIndexByte(cs[0].Value, '.')+1:]
	forged := strings.TrimSuffix(cs[0].Value, mac) + strings.Repeat("A", len(mac))
	parts := strings.Split(cs[0].Value, ".")
	later := strings.Join([]string{parts[0], parts[1], "99999999999", parts[3]}, ".")
	for _, bad := range []string{forged, later, f.read} {
		if resp, body := f.send(t, "GET", "/v1/dashboard", "", "Cookie", cs[0].Name+"="+bad); resp.StatusCode != 401 {
			t.Errorf("dashboard JSON with the cookie %q = %d %.200s, want 401", bad, resp.StatusCode, body)
		}
	}
	if resp, body := f.send(t, "GET", "/v1/dashboard", "", "Cookie", cookie); resp.StatusCode != 200 {
		t.Errorf("dashboard JSON with the cookie = %d %s, want 200", resp.StatusCode, body)
	}
	if resp, body := f.send(t, "GET", "/", "", "Cookie", cookie); resp.StatusCode != 200 || !strings.Contains(string(body), "/static/dashboard.js") || strings.Contains(string(body), `id="open"`) {
		t.Errorf("GET / with the cookie = %d %.200s, want 200, the dashboard, no open banner", resp.StatusCode, body)
	}
	// An admin key in the cookie still writes nothing: writes need the header.
	if resp, body := f.send(t, "POST", "/v1/bandits", toyBandit, "Cookie", "refinery_key="+f.admin, "Content-Type", "application/json"); resp.StatusCode != 401 {
		t.Errorf("a bandit created with an admin key in the cookie = %d %s, want 401", resp.StatusCode, body)
	}
	resp, _ = f.send(t, "POST", "/logout", "")
	if cs := resp.Cookies(); resp.StatusCode != 303 || len(cs) != 1 || cs[0].MaxAge >= 0 {
		t.Errorf("logout = %d, cookies %+v; want 303 clearing the cookie", resp.StatusCode, cs)
	}
}

// The open server (no keys required) says so on the dashboard, and still
// refuses a browser's cross-origin write and a body without
// Content-Type.
func TestOpenServerSaysSo(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	resp, body := f.call(t, "GET", "/", "", "")
	if resp.StatusCode != 200 || !strings.Contains(string(body), `id="open"`) || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET / = %d, X-Frame-Options %q, open banner %v; want 200, DENY, the banner", resp.StatusCode, resp.Header.Get("X-Frame-Options"), strings.Contains(string(body), `id="open"`))
	}
	kf := &keyFixture{fixture: f}
	if resp, out := kf.send(t, "POST", "/v1/bandits", toyBandit, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"); resp.StatusCode != 403 {
		t.Errorf("a cross-origin no-cors bandit = %d %s, want 403", resp.StatusCode, out)
	}
	if resp, out := kf.send(t, "POST", "/v1/bandits", toyBandit); resp.StatusCode != 415 {
		t.Errorf("a bandit without Content-Type = %d %s, want 415", resp.StatusCode, out)
	}
	if bs, err := f.store.ListBandits(context.Background()); err != nil || len(bs) != 0 {
		t.Errorf("%d bandits stored (%v), want none", len(bs), err)
	}
}

// A key revoked while in use stops working once the server's cache of
// checked keys (Config.KeyCacheTTL) forgets it.
func TestRevokedKeyStopsWorking(t *testing.T) {
	st := memoryStore(t)
	f := newKeyFixture(t, st)
	if resp, out := f.send(t, "GET", "/v1/bandits", "", bearer(f.read)...); resp.StatusCode != 200 {
		t.Fatalf("GET with the read key = %d %s", resp.StatusCode, out)
	}
	// The dashboard's sign-in with the same key.
	resp, _ := f.send(t, "POST", "/login", url.Values{"key": {f.read}}.Encode(), "Content-Type", "application/x-www-form-urlencoded")
	if len(resp.Cookies()) != 1 {
		t.Fatalf("login: cookies %v", resp.Cookies())
	}
	cookie := resp.Cookies()[0].Name + "=" + resp.Cookies()[0].Value
	if resp, out := f.send(t, "GET", "/v1/dashboard", "", "Cookie", cookie); resp.StatusCode != 200 {
		t.Fatalf("dashboard JSON with the sign-in cookie = %d %s", resp.StatusCode, out)
	}
	ks := st.(keys.Store)
	all, err := ks.ListKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if k.Hash == keys.Hash(f.read) {
			if err := ks.RevokeKey(context.Background(), k.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(keyCacheTTL + 10*time.Millisecond)
	if resp, out := f.send(t, "GET", "/v1/bandits", "", bearer(f.read)...); resp.StatusCode != 401 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "revoked") {
		t.Errorf("GET with the revoked read key = %d %s (WWW-Authenticate %q), want 401 saying revoked", resp.StatusCode, out, resp.Header.Get("WWW-Authenticate"))
	}
	if resp, out := f.send(t, "GET", "/v1/dashboard", "", "Cookie", cookie); resp.StatusCode != 401 {
		t.Errorf("dashboard JSON with the revoked key's sign-in cookie = %d %s, want 401", resp.StatusCode, out)
	}
}
