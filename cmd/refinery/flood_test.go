package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
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
	h := newHammer(m.URL(), "load", "honest")
	h.auth = "Bearer " + m.AdminKey
	flood := newHammer(m.URL(), "load", "flood")
	alone, _ := h.beside(honestClients, phase, func(stop <-chan struct{}) { <-stop })
	beside, honestSt := h.beside(honestClients, phase, func(stop <-chan struct{}) { flood.flood(flooders, stop, flood.unknownKeyDecision) })
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
