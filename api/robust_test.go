package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
)

// TestErrorAnswersAreBounded: a configuration with hundreds of thousands
// of problems and a 100 KB path get short answers (issue 16, finding 8).
func TestErrorAnswersAreBounded(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	arms := strings.Repeat(`"",`, 300_000)
	body := `{"name": "x", "arms": [` + arms + `""], "features": [{"name": "f", "type": "numeric"}]}`
	resp, out := f.call(t, "POST", "/v1/bandits", "application/json", body)
	var p api.Problem
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || len(p.Errors) == 0 || len(p.Errors) > api.MaxProblemErrors || len(out) > 8<<10 {
		t.Errorf("a %d-byte config with many problems: status %d, %d errors, %d bytes; want 400, 1..%d errors, at most 8 KiB", len(body), resp.StatusCode, len(p.Errors), len(out), api.MaxProblemErrors)
	}
	many := `{"name": "x", "arms": ["a"], "features": [` + strings.Repeat(`{"name": "", "type": "numeric"},`, 900) + `{"name": "", "type": "numeric"}]}`
	resp, out = f.call(t, "POST", "/v1/bandits", "application/json", many)
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 400 || len(p.Errors) != api.MaxProblemErrors || !strings.Contains(p.Detail, "more problems") {
		t.Errorf("901 empty feature names: status %d, %d errors, detail %q; want 400, %d errors and a count of the rest", resp.StatusCode, len(p.Errors), p.Detail, api.MaxProblemErrors)
	}
	long := "/v1/" + strings.Repeat("a", 100<<10)
	resp, out = f.call(t, "GET", long, "", "")
	if resp.StatusCode != 404 || len(out) > 2*api.MaxEchoBytes+512 {
		t.Errorf("GET of a 100 KB path: status %d with %d bytes, want 404 with at most %d", resp.StatusCode, len(out), 2*api.MaxEchoBytes+512)
	}
	long = "/v1/bandits/" + strings.Repeat("b", 50<<10)
	resp, out = f.call(t, "GET", long, "", "")
	if resp.StatusCode != 404 || len(out) > 2*api.MaxEchoBytes+512 {
		t.Errorf("GET of a bandit with a 50 KB name: status %d with %d bytes, want 404 with at most %d", resp.StatusCode, len(out), 2*api.MaxEchoBytes+512)
	}
}

// rawRequest writes req on a fresh connection, then closes the writing
// side, and returns the status line.
func rawRequest(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestUnreadableBodies: a body shorter than its Content-Length or with a
// malformed chunk is a 400, not a 500 (issue 16, finding 3).
func TestUnreadableBodies(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	addr := strings.TrimPrefix(f.srv.URL, "http://")
	const head = "POST /v1/bandits/toy/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
	for _, tc := range []struct{ name, req string }{
		{"a body shorter than its Content-Length", head + "Content-Length: 100\r\n\r\n" + `{"context": {`},
		{"a malformed chunk", head + "Transfer-Encoding: chunked\r\n\r\n" + "zz\r\n{}\r\n0\r\n\r\n"},
		{"a chunk longer than announced", head + "Transfer-Encoding: chunked\r\n\r\n" + "2\r\n{\"context\": 1}\r\n0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rawRequest(t, addr, tc.req); !strings.HasPrefix(got, "HTTP/1.1 400") {
				t.Errorf("status line %q, want 400", got)
			}
		})
	}
}

// TestExplicitZeroWaitIsKept: "wait": "0s" is the client's choice, not a
// missing value (issue 16, finding 9).
func TestExplicitZeroWaitIsKept(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	out := f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "z", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "uniform"}, "reward": {"wait": "0s"}}`)
	var v struct {
		Reward struct {
			Wait string `json:"wait"`
		} `json:"reward"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.Reward.Wait != "0s" {
		t.Errorf("stored reward.wait = %q, want 0s", v.Reward.Wait)
	}
	out = f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "d", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "uniform"}}`)
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(10 * time.Minute); v.Reward.Wait != want {
		t.Errorf("default reward.wait = %q, want %s", v.Reward.Wait, want)
	}
}

// TestSlowBodyIs408: a body that stops arriving is answered 408 after
// the body read timeout (issue 16, finding 3).
func TestSlowBodyIs408(t *testing.T) {
	srv := newServer(t, memoryStore(t), api.Config{BodyReadTimeout: 200 * time.Millisecond})
	if resp, body := post(t, srv.URL+"/v1/bandits", toyBandit); resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	c, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := c.Write([]byte("POST /v1/bandits/toy/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"context\": {")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	if !strings.HasPrefix(line, "HTTP/1.1 408") || time.Since(start) > 5*time.Second {
		t.Errorf("status line %q after %v, want 408 after about 200ms", strings.TrimSpace(line), time.Since(start))
	}
}

// earlyAnswer sends req on a fresh connection (its body cut short, so
// that the rest is still to come) and returns the status line and how
// long the server took to close the connection after it; fails after 5s.
func earlyAnswer(t *testing.T, addr, req string) (line string, closedAfter time.Duration) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	line, err = br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	answered := time.Now()
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("the connection was not closed within 5s of the answer %q: %v", strings.TrimSpace(line), err)
	}
	return strings.TrimSpace(line), time.Since(answered)
}

// TestEarlyAnswersDoNotWaitForTheBody: a request answered before its body
// has arrived (404 unknown bandit, 401 no key, 413 by Content-Length) is
// answered and closed at once, not held until the body arrives or the
// read timeout (30s under serve); Expect: 100-continue with a length
// over the limit is a 413 without 100 Continue (issue 31, finding 12).
func TestEarlyAnswersDoNotWaitForTheBody(t *testing.T) {
	open := newFixture(t, memoryStore(t))
	open.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	keyed := newKeyFixture(t, memoryStore(t))
	const partial = "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"context\": {"
	for _, tc := range []struct {
		name, addr, req, want string
	}{
		{"a decision for an unknown bandit", open.srv.URL, "POST /v1/bandits/nope/decisions HTTP/1.1\r\nHost: x\r\n" + partial, "HTTP/1.1 404"},
		{"a decision without a key", keyed.srv.URL, "POST /v1/bandits/toy/decisions HTTP/1.1\r\nHost: x\r\n" + partial, "HTTP/1.1 401"},
		{"a decision of 10 MiB by Content-Length", open.srv.URL, "POST /v1/bandits/toy/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\n\r\n{\"context\": {", "HTTP/1.1 413"},
		{"a decision of 10 MiB with Expect: 100-continue", open.srv.URL, "POST /v1/bandits/toy/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10485760\r\nExpect: 100-continue\r\n\r\n", "HTTP/1.1 413"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, after := earlyAnswer(t, strings.TrimPrefix(tc.addr, "http://"), tc.req)
			if !strings.HasPrefix(line, tc.want) || after > 2*time.Second {
				t.Errorf("status line %q, connection closed %v after it; want %s and a close within 2s", line, after, tc.want)
			}
		})
	}
}

// A problem's detail counts the others in English: "and 1 more problem",
// not "1 more problems" (issue 30, polish).
func TestProblemDetailSaysOneMoreProblemInTheSingular(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	for _, tt := range []struct{ body, want string }{
		{`{"name": "", "arms": [], "features": [{"name": "f", "type": "numeric"}]}`, "name: required (and 1 more problem, see errors)"},
		{`{"name": "", "arms": [], "features": []}`, "name: required (and 2 more problems, see errors)"},
	} {
		resp, out := f.call(t, "POST", "/v1/bandits", "application/json", tt.body)
		var p api.Problem
		if err := json.Unmarshal(out, &p); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 400 || p.Detail != tt.want {
			t.Errorf("POST %s = %d, detail %q; want 400, %q", tt.body, resp.StatusCode, p.Detail, tt.want)
		}
	}
}

// HEAD on a GET route answers as GET does, with its status and headers
// and no body, instead of 405 (issue 30, polish); on a route without GET
// it stays a 405, and every 405's Allow lists HEAD beside GET.
func TestHEADAnswersLikeGETWithoutABody(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "h", "arms": ["a", "b"], "features": [{"name": "f", "type": "numeric"}], "policy": {"kind": "uniform"}}`)
	for _, tt := range []struct {
		path string
		want int
	}{
		{"/healthz", 200}, {"/openapi.json", 200}, {"/metrics", 200}, {"/", 200},
		{"/v1/bandits", 200}, {"/v1/bandits/h", 200}, {"/v1/bandits/h/decisions", 200},
		{"/v1/bandits/none", 404}, {"/v1/snapshots", 405},
	} {
		get, _ := f.call(t, "GET", tt.path, "", "")
		head, body := f.call(t, "HEAD", tt.path, "", "")
		if head.StatusCode != tt.want || len(body) != 0 {
			t.Errorf("HEAD %s = %d with %d bytes, want %d and no body", tt.path, head.StatusCode, len(body), tt.want)
		}
		if tt.want != 405 && (get.StatusCode != head.StatusCode || get.Header.Get("Content-Type") != head.Header.Get("Content-Type")) {
			t.Errorf("HEAD %s = %d %q, GET = %d %q; want the same", tt.path, head.StatusCode, head.Header.Get("Content-Type"), get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
	resp, _ := f.call(t, "PUT", "/v1/bandits/h", "application/json", `{}`)
	if got, want := resp.Header.Get("Allow"), "GET, HEAD, PATCH, DELETE"; resp.StatusCode != 405 || got != want {
		t.Errorf("PUT /v1/bandits/h = %d, Allow %q; want 405, %q", resp.StatusCode, got, want)
	}
}
