package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// TestUnknownKeyFloodKeepsHonestClientsServed is finding 7 of issue 31
// as bench/overload.md measures it, on real loopback HTTP to serve with
// keys required (the in-memory store): 16 honest clients with the admin
// key in a closed loop of decision + reward, alone for 3 s and then
// beside 64 clients in a closed loop each sending a decision under a
// fresh unknown key. The honest clients keep at least half their rate
// alone (the bar; without the tarpit they kept 17% in the bench),
// none of their answers is an error, every flood answer is a 401 or a
// 429, and the flood gets no more answers than the tarpit lets through
// (one per api.DefaultRefusedKeyDelay and client, plus its first).
func TestUnknownKeyFloodKeepsHonestClientsServed(t *testing.T) {
	const (
		honestClients = 16
		flooders      = 64
		phase         = 3 * time.Second
	)
	m := startMain(t, func(m *Main) { m.RequireKeys = true })
	createLoad(t, m)
	h := newHammer(m.URL(), "load", "honest")
	h.auth = "Bearer " + m.AdminKey
	flood := newHammer(m.URL(), "load", "flood")
	alone, _, _ := h.beside(honestClients, phase, func(stop <-chan struct{}) { <-stop })
	beside, honestSt, _ := h.beside(honestClients, phase, func(stop <-chan struct{}) { flood.flood(flooders, stop, flood.unknownKeyDecision) })
	floodSt, _, _ := flood.take()
	t.Logf("honest %.0f transactions/s alone, %.0f/s (%.0f%%) beside %d unknown-key clients: honest %v, flood %v",
		alone, beside, 100*beside/alone, flooders, honestSt, floodSt)
	if beside < alone/2 {
		t.Errorf("honest clients beside the flood: %.0f transactions/s, less than half of their %.0f alone", beside, alone)
	}
	for code, n := range honestSt {
		if code != 200 && code != 201 && code != 204 {
			t.Errorf("honest clients beside the flood: %d answers %d", n, code)
		}
	}
	var answers int64
	for code, n := range floodSt {
		answers += n
		if code != http.StatusUnauthorized && code != http.StatusTooManyRequests {
			t.Errorf("the flood got %d answers %d, want 401 or 429", n, code)
		}
	}
	// Each flooder's requests are held a second each; the last may be
	// answered after stop.
	if most := int64(flooders) * (int64(phase/api.DefaultRefusedKeyDelay) + 1); answers > most {
		t.Errorf("the flood got %d answers in %v, want at most %d (one per client and %v)", answers, phase, most, api.DefaultRefusedKeyDelay)
	}
}

// createLoad creates the bandit "load" of the flood tests (an
// eps-greedy bandit on a color and a size) with m's admin key.
func createLoad(t *testing.T, m *Main) {
	t.Helper()
	req, _ := http.NewRequest("POST", m.URL()+"/v1/bandits", strings.NewReader(`{"name": "load", "arms": ["a", "b"],
		"features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}],
		"policy": {"kind": "eps-greedy"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+m.AdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create: %d", resp.StatusCode)
	}
}

// createKey stores a key named name with scope in m's store and returns
// its Authorization header.
func createKey(t *testing.T, m *Main, name string, scope keys.Scope) string {
	t.Helper()
	secret, k, err := keys.New(nil, name, []keys.Scope{scope}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Store.(keys.Store).CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	return "Bearer " + secret
}

// TestCrowdOnAnotherKeyKeepsHonestClientsServed is the crowd of issue
// 31's bench on real loopback HTTP to serve with keys required
// (--max-conns 256), on both stores: 16 honest clients with one key in a
// closed loop of decision + reward, alone for 3 s and then beside 512
// clients in a closed loop under a key of their own, each on its own
// keep-alive connection (twice the connection cap), in a process of
// their own (crowdProcess).
//
// The keys take turns (api's shares): the crowd's acknowledged decisions
// are at most a quarter more than the honest clients' (and 100, the
// lead and its first second); the honest clients keep at least
// honestFloor of their rate alone; every refusal either side gets is a
// 429 or a 503, and of the crowd's requests at most 1 in 1,000 ends in
// a transport error. The floor is not issue 31's half: here the server
// and the honest clients share one process and the crowd's process
// takes its cores from both, so equal turns leave the honest clients at
// most about half of what they did alone with the machine to themselves.
// At the commit that made the keys take turns: 38-42% on the in-memory
// store and 54-66% on PostgreSQL at load 2.8 (where a transaction waits
// for its commit and the crowd's process takes less from it); before,
// with a share of requests under way only, 16-33% and 25-84% at load 7,
// and the crowd had 6 times the honest clients' decisions. The floor on
// PostgreSQL was 40% until a fresh-clone CI run on a 2-core Zen 3
// (2026-11-28) measured 39% beside the rest of the suite (the test
// alone there: 42-56%); it is 30%, and what tells taking turns from not
// is the crowd's share of decisions, asserted first.
func TestCrowdOnAnotherKeyKeepsHonestClientsServed(t *testing.T) {
	const (
		honestClients = 16
		crowdClients  = 512
		phase         = 3 * time.Second
	)
	for _, tc := range []struct {
		name        string
		url         func(*testing.T) string
		honestFloor float64
	}{
		{"on the in-memory store", func(*testing.T) string { return "" }, 0.25},
		{"on PostgreSQL", func(t *testing.T) string { return storetest.FreshSchemaURL(t) }, 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMain(t, func(m *Main) { m.RequireKeys, m.MaxConns, m.DatabaseURL = true, crowdClients/2, tc.url(t) })
			m.AdminKey = strings.TrimPrefix(createKey(t, m, "admin", keys.Admin), "Bearer ")
			createLoad(t, m)
			h := newHammer(m.URL(), "load", "honest")
			h.auth = createKey(t, m, "honest", keys.Decide)
			// A client with a pool of one connection per caller, which
			// the connection cap must keep.
			h.client = &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxConnsPerHost: honestClients, MaxIdleConnsPerHost: honestClients}}
			crowdAuth := createKey(t, m, "crowd", keys.Decide)
			crowd := newHammer(m.URL(), "load", "crowd")
			alone, _, _ := h.beside(honestClients, phase, func(stop <-chan struct{}) { <-stop })
			beside, honestSt, _ := h.beside(honestClients, phase, func(stop <-chan struct{}) {
				crowdProcess(t, m.URL(), "load", crowdAuth, crowdClients, crowd, stop)
			})
			crowdSt, _, _ := crowd.take()
			t.Logf("honest %.0f transactions/s alone, %.0f/s (%.0f%%) beside %d clients on another key: honest %v, crowd %v (transport errors: %q)",
				alone, beside, 100*beside/alone, crowdClients, honestSt, crowdSt, crowd.errs)
			// The keys take turns: at most the lead (the per-key share, 16
			// a key-second) more for the crowd, besides a quarter for the
			// counts' decay and the crowd's process starting.
			honestDecisions, crowdDecisions := honestSt[201]+honestSt[200], crowdSt[201]+crowdSt[200]
			if crowdDecisions > honestDecisions*5/4+100 {
				t.Errorf("the crowd was acknowledged %d decisions beside the honest clients' %d, want at most a quarter more (and 100)", crowdDecisions, honestDecisions)
			}
			if beside < tc.honestFloor*alone {
				t.Errorf("honest clients beside the crowd: %.0f transactions/s, less than %.0f%% of their %.0f alone", beside, 100*tc.honestFloor, alone)
			}
			for code, n := range honestSt {
				if code != 200 && code != 201 && code != 204 && code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
					t.Errorf("honest clients beside the crowd: %d answers %d, want every refusal a 429 or 503", n, code)
				}
			}
			var answers int64
			for code, n := range crowdSt {
				answers += n
				if code != 0 && code != 200 && code != 201 && code != 204 && code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
					t.Errorf("the crowd got %d answers %d, want every refusal a 429 or 503", n, code)
				}
			}
			// A connection past the cap is answered 503 once its request
			// arrives (connLimiter.refuse); answered before it, Go's
			// client failed a few in a thousand requests on connections
			// it had pooled ahead of need ("readLoopPeekFailLocked").
			if n := crowdSt[0]; n*1000 > answers {
				t.Errorf("the crowd got %d transport errors of %d answers (%q), want at most 1 in 1,000", n, answers, crowd.errs)
			}
		})
	}
}

// TestHonestClientsServedRightAfterAnotherKeyLeaves is the stall of the
// honest clients after the 2,048 clients left in bench/overload.md (run
// 3 at 7c4cebc: 1 transaction a second for the 15 s after), on real
// loopback HTTP to serve with keys required, on both stores: 16 honest
// clients in a closed loop of decision + reward, alone for phase, then
// on while 8 clients of another key come for phase and go, and for
// afterPhase after. The other key's 8 clients (half its share, so that
// none of them waits and its last request ends as they stop) send fewer
// requests than the honest ones, which run ahead of them by the lead and
// wait (api's shares) when the other key stops. From servedWithin after
// it stopped, the honest clients are acknowledged in each second at
// least a quarter of their rate alone (the other key stays active for a
// second after its last request, and a request held then waits at most
// a second: api's shareActive and shareWait; the quarter leaves room for
// the trainer's work and a loaded machine), and every refusal they get
// is a 429. At 7c4cebc they got 16 429s a second and 0 or 1 decision in
// each of the 4 s after, in 4 runs of 4: their held requests were looked
// at only when a request passed or ended, none did, and each request
// coming back after its 429 queued behind those still waiting (api's
// shares.recheck). Since: 2 to 28 decisions in the first second (held
// while the other key is active), then their rate alone.
func TestHonestClientsServedRightAfterAnotherKeyLeaves(t *testing.T) {
	const (
		honestClients = 16
		others        = 8
		phase         = 2 * time.Second
		servedWithin  = 2 * time.Second
		afterPhase    = servedWithin + 2*time.Second
	)
	for _, tc := range []struct {
		name string
		url  func(*testing.T) string
	}{
		{"on the in-memory store", func(*testing.T) string { return "" }},
		{"on PostgreSQL", func(t *testing.T) string { return storetest.FreshSchemaURL(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := startMain(t, func(m *Main) { m.RequireKeys, m.DatabaseURL = true, tc.url(t) })
			m.AdminKey = strings.TrimPrefix(createKey(t, m, "admin", keys.Admin), "Bearer ")
			createLoad(t, m)
			h := newHammer(m.URL(), "load", "honest")
			h.auth = createKey(t, m, "honest", keys.Decide)
			other := newHammer(m.URL(), "load", "other")
			other.auth = createKey(t, m, "other", keys.Decide)
			alone, _, _ := h.beside(honestClients, phase, func(stop <-chan struct{}) { <-stop })
			// The honest clients go on while the other key's clients come
			// for phase and go, and for afterPhase after.
			var left time.Time
			_, st, acked := h.beside(honestClients, phase+afterPhase, func(stop <-chan struct{}) {
				otherStop := make(chan struct{})
				time.AfterFunc(phase, func() { close(otherStop) })
				other.closedLoop(others, otherStop)
				left = time.Now()
				<-stop
			})
			otherSt, _, _ := other.take()
			secs := perSecond(acked, left, int(afterPhase/time.Second))
			t.Logf("honest %.0f transactions/s alone; beside %d clients of another key for %v and after: honest %v, other %v; after they stopped, honest decisions acknowledged in each second %v",
				alone, others, phase, st, otherSt, secs)
			for i := int(servedWithin / time.Second); i < len(secs); i++ {
				if float64(secs[i]) < alone/4 {
					t.Errorf("second %d after the other key left: the honest clients were acknowledged %d decisions, want at least a quarter of their %.0f/s alone", i, secs[i], alone)
				}
			}
			for code, n := range st {
				if code != 200 && code != 201 && code != 204 && code != http.StatusTooManyRequests {
					t.Errorf("honest clients beside and after the other key: %d answers %d, want 2xx or 429", n, code)
				}
			}
		})
	}
}
