package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestServeRefusesForeignHostsOnTheOpenLoopbackDefault: serve on its open
// loopback default answers a Host other than its names with 421 (DNS
// rebinding, issue 31, finding 10); with keys required, a foreign Host
// reaches authentication (a reverse proxy may forward its public name);
// serve --help says so.
func TestServeRefusesForeignHostsOnTheOpenLoopbackDefault(t *testing.T) {
	post := func(m *Main, host string) int {
		t.Helper()
		req, err := http.NewRequest("POST", m.URL()+"/v1/bandits", strings.NewReader(`{"name": "x", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "uniform"}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	open := startServe(t, "")
	if got := post(open, "rebound.example:8080"); got != http.StatusMisdirectedRequest {
		t.Errorf("open loopback, Host rebound.example: %d, want 421", got)
	}
	if got := post(open, "localhost:8080"); got != http.StatusCreated {
		t.Errorf("open loopback, Host localhost: %d, want 201", got)
	}
	keyed := startMain(t, func(m *Main) { m.RequireKeys = true })
	if got := post(keyed, "public.example"); got != http.StatusUnauthorized {
		t.Errorf("keys required, Host public.example without a key: %d, want 401", got)
	}
	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"serve", "--help"}, &stdout, &stderr)
	if help := stdout.String(); !strings.Contains(help, "DNS") || !strings.Contains(help, "421") || !strings.Contains(help, "/readyz") {
		t.Errorf("serve --help does not document the Host check and /readyz:\n%s", help)
	}
}
