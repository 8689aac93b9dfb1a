package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/store/storetest"
)

// Every series of refinery_decisions_total that a bandit can increase
// (bandit x arm x the sample kinds of its policy) and each bandit's
// refinery_rewards_total exist from the bandit's creation, at 0, and
// again after a restart of serve on the same PostgreSQL database, where
// the loaded bandits' counters start over at 0. Dashboards and alerts
// then see no holes.
func TestMetricSeriesExistFromTheStart(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	bandits := map[string]struct {
		kind    string
		samples []string
	}{
		"refined": {"refined-ts", []string{"refined", "mean-field"}},
		"eps":     {"eps-greedy", []string{"point"}},
		"linear":  {"linear-ts", []string{"exact"}},
		"uniform": {"uniform", []string{"none"}},
	}
	// check asserts that every series is exposed with the value want
	// (decided: the one series of a decision made since the start, with
	// the value 1), and that no other sample kind is.
	check := func(t *testing.T, base, when, decided string) {
		t.Helper()
		text := string(newClient(t, base).must(http.StatusOK, "GET", "/metrics", nil))
		for name, b := range bandits {
			for _, arm := range []string{"a", "b"} {
				for _, s := range b.samples {
					series := fmt.Sprintf(`refinery_decisions_total{arm=%q,bandit=%q,sample=%q}`, arm, name, s)
					want := "0"
					if series == decided {
						want = "1"
					}
					if !strings.Contains(text, series+" "+want+"\n") {
						t.Errorf("%s: %s %s is not exposed", when, series, want)
					}
				}
			}
			if n := strings.Count(text, fmt.Sprintf(`refinery_decisions_total{arm="a",bandit=%q,`, name)); n != len(b.samples) {
				t.Errorf("%s: bandit %s has %d series for arm a, want %d (%v)", when, name, n, len(b.samples), b.samples)
			}
			series := fmt.Sprintf(`refinery_rewards_total{bandit=%q}`, name)
			if !strings.Contains(text, series+" 0\n") && !(decided != "" && name == "eps" && strings.Contains(text, series+" 1\n")) {
				t.Errorf("%s: %s is not exposed at its value", when, series)
			}
		}
	}

	m := startServe(t, url)
	c := newClient(t, m.URL())
	for name, b := range bandits {
		c.must(http.StatusCreated, "POST", "/v1/bandits", map[string]any{
			"name": name, "arms": []string{"a", "b"},
			"features": []map[string]any{{"name": "size", "type": "numeric"}},
			"policy":   map[string]any{"kind": b.kind},
			"model":    map[string]any{"hidden": []int{4}},
		})
	}
	check(t, m.URL(), "after creation", "")
	out := c.must(http.StatusCreated, "POST", "/v1/bandits/eps/decisions", map[string]any{"event_id": "e1", "context": map[string]any{"size": 1}})
	arm := "a"
	if strings.Contains(string(out), `"arm":"b"`) {
		arm = "b"
	}
	c.must(http.StatusNoContent, "POST", "/v1/bandits/eps/events/e1/reward", map[string]any{"value": 1})
	check(t, m.URL(), "after a decision", fmt.Sprintf(`refinery_decisions_total{arm=%q,bandit="eps",sample="point"}`, arm))
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	m2 := startServe(t, url)
	check(t, m2.URL(), "after a restart", "")
}
