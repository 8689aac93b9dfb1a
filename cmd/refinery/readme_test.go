package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmeCall is one curl command of the README's session and the answer
// it shows (the comment lines after it, "" when none).
type readmeCall struct {
	method, path, body, shown string
}

// readmeSession extracts the curl session from README.md: the fenced
// block that starts the server with `bin/refinery serve &`.
func readmeSession(t *testing.T) []readmeCall {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(raw), "```")
	var block string
	for i := 1; i < len(blocks); i += 2 {
		if strings.Contains(blocks[i], "bin/refinery serve &") {
			block = blocks[i]
			break
		}
	}
	if block == "" {
		t.Fatal("README.md has no block with `bin/refinery serve &`")
	}
	var calls []readmeCall
	lines := strings.Split(block, "\n")
	urlRE := regexp.MustCompile(`localhost:8080(/\S*)`)
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "curl "):
			cmd := line
			// A quoted body may span lines: join until the quotes balance.
			for strings.Count(cmd, "'")%2 == 1 && i+1 < len(lines) {
				i++
				cmd += "\n" + lines[i]
			}
			m := urlRE.FindStringSubmatch(cmd)
			if m == nil {
				t.Fatalf("README curl without a localhost:8080 URL: %s", cmd)
			}
			c := readmeCall{method: "GET", path: m[1]}
			if j := strings.Index(cmd, " -d '"); j >= 0 {
				c.method = "POST"
				c.body = cmd[j+len(" -d '") : strings.LastIndex(cmd, "'")]
			}
			calls = append(calls, c)
		case strings.HasPrefix(line, "# ") && len(calls) > 0:
			calls[len(calls)-1].shown += strings.TrimPrefix(line, "# ")
		}
	}
	return calls
}

// TestREADMESession runs the README's curl session against serve (the
// in-memory store) and checks each answer: the creation 201, the first
// decision 201 with the members the README shows, among them the
// probabilities, 1/2 each (issue 18: a fresh Thompson-sampling bandit
// explores; before the fix this decision answered {"eat": 0, "pass": 1}),
// the reward 204 and the bandit's status 200.
func TestREADMESession(t *testing.T) {
	calls := readmeSession(t)
	if len(calls) != 4 {
		t.Fatalf("the README session has %d curl commands, want 4 (create, decide, reward, get): %+v", len(calls), calls)
	}
	m := startServe(t, "")
	wantStatus := []int{201, 201, 204, 200}
	memberRE := regexp.MustCompile(`"(\w+)":(\{[^{}]*\}|"[^"]*"|-?[0-9][0-9.eE+-]*)`)
	for i, c := range calls {
		req, err := http.NewRequest(c.method, m.URL()+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("%s %s -> %d %s", c.method, c.path, resp.StatusCode, body)
		if resp.StatusCode != wantStatus[i] {
			t.Fatalf("%s %s: status %d, want %d: %s", c.method, c.path, resp.StatusCode, wantStatus[i], body)
		}
		if c.shown == "" {
			continue
		}
		var got map[string]json.RawMessage
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		shown := memberRE.FindAllStringSubmatch(c.shown, -1)
		if len(shown) < 3 {
			t.Fatalf("the README shows too few members after %s %s: %q", c.method, c.path, c.shown)
		}
		for _, mm := range shown {
			key, want := mm[1], mm[2]
			raw, ok := got[key]
			if !ok {
				continue // a member of a nested object (propensity's), checked with it
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, raw); err != nil {
				t.Fatal(err)
			}
			if compact.String() != want {
				t.Errorf("%s %s: %q = %s, the README shows %s", c.method, c.path, key, compact.String(), want)
			}
		}
		if i == 1 {
			var d struct {
				Probabilities map[string]float64 `json:"probabilities"`
			}
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			for arm, p := range d.Probabilities {
				if p < 0.25 || p > 0.75 {
					t.Errorf("the first decision's probability of %s is %g: a fresh bandit must explore", arm, p)
				}
			}
		}
	}
}
