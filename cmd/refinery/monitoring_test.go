package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/store/storetest"
)

// The alerting rules and the Grafana dashboard shipped in docs/monitoring.
var (
	alertRules = filepath.Join("..", "..", "docs", "monitoring", "refinery-alerts.yml")
	dashboard  = filepath.Join("..", "..", "docs", "monitoring", "refinery-dashboard.json")
)

// grafanaDashboard is the part of Grafana's dashboard model the checks
// read.
type grafanaDashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			Type string `json:"type"`
			UID  string `json:"uid"`
		} `json:"datasource"`
		GridPos *struct{ X, Y, W, H int } `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func readDashboard(t *testing.T) grafanaDashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	return d
}

// dashboardExprs returns every PromQL expression of the dashboard with
// Grafana's variables replaced by values Prometheus parses.
func dashboardExprs(d grafanaDashboard) []string {
	r := strings.NewReplacer("$__rate_interval", "5m", "$bandit", ".*")
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, r.Replace(tg.Expr))
		}
	}
	return out
}

// TestDashboardIsWellFormed checks the dashboard's structure: a title and
// uid, unique panel IDs, every panel placed, on the datasource variable,
// with at least one query, each with a refId unique in its panel.
func TestDashboardIsWellFormed(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("dashboard title %q, uid %q, %d panels", d.Title, d.UID, len(d.Panels))
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		switch {
		case p.ID == 0 || ids[p.ID]:
			t.Errorf("panel %q: id %d is zero or repeated", p.Title, p.ID)
		case p.Title == "" || p.Type == "":
			t.Errorf("panel %d: no title or type", p.ID)
		case p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24:
			t.Errorf("panel %q: gridPos %+v", p.Title, p.GridPos)
		case p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}":
			t.Errorf("panel %q: datasource %+v, want prometheus ${datasource}", p.Title, p.Datasource)
		case len(p.Targets) == 0:
			t.Errorf("panel %q: no queries", p.Title)
		}
		ids[p.ID] = true
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q: query %q with refId %q (empty or repeated)", p.Title, tg.Expr, tg.RefID)
			}
			refs[tg.RefID] = true
		}
	}
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	if !slices.Contains(vars, "datasource") || !slices.Contains(vars, "bandit") {
		t.Errorf("template variables %v, want datasource and bandit", vars)
	}
}

// TestMonitoringPromQLParses runs promtool check rules on the alerting
// rules and on the dashboard's queries written as recording rules, so
// that every expression is valid PromQL. promtool comes with Debian's
// prometheus package; under CI=true its absence fails the test.
func TestMonitoringPromQLParses(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found (apt-get install prometheus)")
		}
		t.Skip("promtool not found (apt-get install prometheus)")
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(readDashboard(t)) {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: refinery_dashboard:query_%d\n        expr: %s\n", i, q)
	}
	asRules := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(asRules, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{alertRules, asRules} {
		out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool check rules %s: %v\n%s", f, err, out)
		}
	}
}

// metricName matches a metric of the service in an expression; the
// suffixes of a histogram's series name its family.
var metricName = regexp.MustCompile(`\brefinery_[a-z_]+\b`)

func family(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if n, ok := strings.CutSuffix(name, s); ok && n != "refinery_reward" {
			return n
		}
	}
	return name
}

// TestMonitoringUsesExportedMetrics drives serve on PostgreSQL (the
// group-commit metrics exist only there) until every kind of series
// exists — a refined-ts bandit that trains, refines, reuses samples past
// their bounds and scores its health — and checks that every metric the
// alerting rules and the dashboard query is in its /metrics.
func TestMonitoringUsesExportedMetrics(t *testing.T) {
	rules, err := os.ReadFile(alertRules)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range append(dashboardExprs(readDashboard(t)), string(rules)) {
		for _, n := range metricName.FindAllString(e, -1) {
			if !strings.HasPrefix(n, "refinery_dashboard") {
				used[family(n)] = true
			}
		}
	}
	if len(used) < 20 {
		t.Fatalf("only %d metrics found in the rules and the dashboard: %v", len(used), used)
	}

	m := startServe(t, storetest.FreshSchemaURL(t))
	c := newClient(t, m.URL())
	// "watched" has rewards other than 0 and 1 (the Gaussian likelihood,
	// whose noise the health metrics report), "clicks" 0/1 rewards (the
	// Bernoulli likelihood and its calibration error). Their samples serve
	// one decision each: decisions outrun the refinement workers and act
	// beyond the bounds.
	for _, name := range []string{"watched", "clicks"} {
		c.must(http.StatusCreated, "POST", "/v1/bandits", map[string]any{
			"name": name, "arms": []string{"a", "b"},
			"features":   []map[string]any{{"name": "x", "type": "numeric"}},
			"policy":     map[string]any{"kind": "refined-ts", "samples": 3, "max_sample_uses": 1},
			"model":      map[string]any{"hidden": []int{4}},
			"training":   map[string]any{"iterations": 20, "min_interval": "10ms"},
			"refinement": map[string]any{"iterations": 5, "bank_size": 3},
		})
	}
	exported := func() map[string]bool {
		resp, err := http.Get(m.URL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		got := map[string]bool{}
		for _, line := range strings.Split(string(body), "\n") {
			if n, ok := strings.CutPrefix(line, "# TYPE "); ok {
				got[strings.Fields(n)[0]] = true
			}
		}
		return got
	}
	var missing []string
	for i, deadline := 0, time.Now().Add(60*time.Second); ; i++ {
		for name, pay := range map[string][2]float64{"watched": {-0.5, 2}, "clicks": {0, 1}} {
			var d decisionBody
			if err := json.Unmarshal(c.must(http.StatusCreated, "POST", "/v1/bandits/"+name+"/decisions", map[string]any{"context": map[string]any{"x": float64(i%7) - 3}}), &d); err != nil {
				t.Fatal(err)
			}
			r := pay[0]
			if (d.Arm == "a") == (i%7 < 3) {
				r = pay[1]
			}
			c.must(http.StatusNoContent, "POST", "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", map[string]any{"value": r})
		}
		if i%20 != 19 {
			continue
		}
		got := exported()
		missing = missing[:0]
		for n := range used {
			if !got[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			slices.Sort(missing)
			t.Fatalf("after %d decisions and 60s, /metrics lacks %d metrics the rules or the dashboard use: %v", i+1, len(missing), missing)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
