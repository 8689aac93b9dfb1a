package api_test

import (
	"context"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
)

// tarpitServer is a server that requires keys on the in-memory store,
// with Config.RefusedKeyDelay delay and Config.MaxRefusedPending
// pending, the toy bandit, an admin and a read key.
func tarpitServer(t *testing.T, delay time.Duration, pending int) (s *api.Server, base, admin, read string) {
	st := memoryStore(t)
	ks := st.(keys.Store)
	rnd := mrand.NewChaCha8([32]byte{31})
	for _, k := range []struct {
		secret *string
		scope  keys.Scope
	}{{&admin, keys.Admin}, {&read, keys.Read}} {
		secret, key, err := keys.New(rnd, "test "+string(k.scope), []keys.Scope{k.scope}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := ks.CreateKey(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		*k.secret = secret
	}
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: log})
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = api.New(api.Config{Service: svc, Logger: log, RequireKeys: true, Keys: ks, RefusedKeyDelay: delay, MaxRefusedPending: pending})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		svc.Close(context.Background())
	})
	if code, _, _ := timed(t, srv.URL, "POST", "/v1/bandits", toyBandit, "Authorization", "Bearer "+admin); code != http.StatusCreated {
		t.Fatalf("create the toy bandit: %d", code)
	}
	return s, srv.URL, admin, read
}

// timed sends one request on a connection of its own and returns its
// status, how long the answer took and whether the server closed the
// connection after it.
func timed(t *testing.T, base, method, path, body string, header ...string) (code int, took time.Duration, closed bool) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	defer hc.CloseIdleConnections()
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return 0, time.Since(start), false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), resp.Close
}

// TestTarpitHoldsRefusedKeys: a request refused for its key (none,
// unknown, malformed, a forged dashboard cookie) is answered
// 401 after Config.RefusedKeyDelay and closes its connection; a known
// key's request, a 403 (a known key without the scope) and the sign-in
// form of a browser without a cookie are answered at once, also while
// refusals are held; past Config.MaxRefusedPending refusals held, more
// are answered at once (still closing); Drain answers the held ones at
// once (issue 31, finding 7: an unauthenticated flood).
func TestTarpitHoldsRefusedKeys(t *testing.T) {
	const (
		// delay is long enough that no answer given at once takes it
		// on a loaded machine.
		delay   = 2 * time.Second
		pending = 8
	)
	_, base, admin, read := tarpitServer(t, delay, pending)
	unknown, _, err := keys.New(mrand.NewChaCha8([32]byte{1}), "nobody", []keys.Scope{keys.Admin}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const decision = `{"context": {"color": "red", "size": 1}}`
	refused := []struct {
		name         string
		method, path string
		body         string
		header       []string
	}{
		{"no key", "POST", "/v1/bandits/toy/decisions", decision, nil},
		{"an unknown key", "POST", "/v1/bandits/toy/decisions", decision, []string{"Authorization", "Bearer " + unknown}},
		{"a malformed key", "GET", "/v1/bandits", "", []string{"Authorization", "Bearer rfk_nonsense"}},
		{"a forged dashboard cookie", "GET", "/v1/dashboard", "", []string{"Cookie", "refinery_key=forged"}},
		{"an unknown key on the dashboard's page", "GET", "/", "", []string{"Authorization", "Bearer " + unknown}},
	}
	served := []struct {
		name         string
		method, path string
		body         string
		header       []string
		want         int
		// open: the connection stays open (a 403 before its body was
		// read closes it, as every early answer does: problem.go).
		open bool
	}{
		{"a known key", "POST", "/v1/bandits/toy/decisions", decision, []string{"Authorization", "Bearer " + admin}, http.StatusCreated, true},
		{"a known key without the scope", "POST", "/v1/bandits/toy/decisions", decision, []string{"Authorization", "Bearer " + read}, http.StatusForbidden, false},
		{"the sign-in form without a cookie", "GET", "/", "", nil, http.StatusUnauthorized, true},
		{"the probes", "GET", "/healthz", "", nil, http.StatusOK, true},
	}
	// Every refusal at once (fewer than pending): each is held. While
	// they are, the served requests are answered at once.
	var wg sync.WaitGroup
	for _, tc := range refused {
		wg.Go(func() {
			code, took, closed := timed(t, base, tc.method, tc.path, tc.body, tc.header...)
			if code != http.StatusUnauthorized || took < delay || !closed {
				t.Errorf("%s: %d after %v, connection closed %v; want 401 after at least %v, closed", tc.name, code, took, closed, delay)
			}
		})
	}
	time.Sleep(delay / 4)
	for _, tc := range served {
		code, took, closed := timed(t, base, tc.method, tc.path, tc.body, tc.header...)
		if code != tc.want || took >= delay/2 || tc.open && closed {
			t.Errorf("%s, beside held refusals: %d after %v, connection closed %v; want %d at once (under %v), closed %v", tc.name, code, took, closed, tc.want, delay/2, !tc.open)
		}
	}
	wg.Wait()

	// 3 x pending unknown keys at once: pending of them are held, the
	// rest answered at once; all close their connections.
	var mu sync.Mutex
	var held, atOnce int
	for range 3 * pending {
		wg.Go(func() {
			code, took, closed := timed(t, base, "POST", "/v1/bandits/toy/decisions", decision, "Authorization", "Bearer "+unknown)
			if code != http.StatusUnauthorized || !closed {
				t.Errorf("an unknown key past the bound: %d, connection closed %v; want 401, closed", code, closed)
			}
			mu.Lock()
			defer mu.Unlock()
			if took >= delay {
				held++
			} else {
				atOnce++
			}
		})
	}
	wg.Wait()
	if held != pending || atOnce != 2*pending {
		t.Errorf("%d unknown keys at once: %d held, %d answered at once; want %d and %d", 3*pending, held, atOnce, pending, 2*pending)
	}

	// Drain answers the held refusals at once.
	s, base, _, _ := tarpitServer(t, time.Hour, pending)
	for range pending {
		wg.Go(func() {
			if code, took, _ := timed(t, base, "POST", "/v1/bandits/toy/decisions", decision); code != http.StatusUnauthorized || took > time.Minute {
				t.Errorf("held while the server drains: %d after %v; want 401 at the drain", code, took)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	s.Drain()
	wg.Wait()
}
