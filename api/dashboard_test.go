package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// fakeRegret is a RegretSource for one bandit.
type fakeRegret struct{ name string }

func (f fakeRegret) Regret(b string) (float64, int64, bool) {
	if b != f.name {
		return 0, 0, false
	}
	return 12.5, 30, true
}

// dashFixture is a server whose dashboard samples every 30ms and sees
// the service's events.
func dashFixture(t *testing.T) *httptest.Server {
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st := store.NewMemory()
	dash := api.NewDashboard(api.DashboardConfig{Every: 30 * time.Millisecond, Regret: fakeRegret{"sim"}, Logger: log})
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: log, Observer: dash})
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := api.New(api.Config{Service: svc, Logger: log, Dashboard: dash})
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		s.Close()
		svc.Close(context.Background())
		st.Close()
	})
	return srv
}

func TestDashboardJSON(t *testing.T) {
	srv := dashFixture(t)
	f := &fixture{srv: srv}
	const steps = 30
	for _, name := range []string{"sim", "plain"} {
		f.must(t, 201, "POST", "/v1/bandits", `{"name": "`+name+`", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}],
			"policy": {"kind": "eps-greedy"}, "model": {"hidden": [4]}, "training": {"iterations": 5, "min_interval": "0s"}}`)
	}
	// The arm mix is over the last 10 samples (300ms): decide after the
	// first samples and look soon after.
	time.Sleep(70 * time.Millisecond)
	for _, name := range []string{"sim", "plain"} {
		for i := range steps {
			var d struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(f.must(t, 201, "POST", "/v1/bandits/"+name+"/decisions", fmt.Sprintf(`{"context": {"x": %d}}`, i)), &d); err != nil {
				t.Fatal(err)
			}
			f.must(t, 204, "POST", "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", `{"value": 1}`)
		}
	}
	time.Sleep(100 * time.Millisecond) // a few more samples

	var v struct {
		Ephemeral   bool   `json:"ephemeral_store"`
		RegretChart string `json:"regret_chart"`
		Bandits     []struct {
			Name      string             `json:"name"`
			Decisions int64              `json:"decisions"`
			Rewards   int64              `json:"rewards"`
			AvgReward *float64           `json:"avg_reward"`
			ArmShare  map[string]float64 `json:"arm_share"`
			Regret    *struct {
				Cumulative float64 `json:"cumulative"`
				Steps      int64   `json:"steps"`
			} `json:"regret"`
			Layers []bandit.LayerSpread `json:"layers"`
			Recent []struct {
				Arm        string   `json:"arm"`
				Propensity float64  `json:"propensity"`
				Reward     *float64 `json:"reward"`
			} `json:"recent"`
			Charts map[string]string `json:"charts"`
		} `json:"bandits"`
	}
	if err := json.Unmarshal(f.must(t, 200, "GET", "/v1/dashboard", ""), &v); err != nil {
		t.Fatal(err)
	}
	if !v.Ephemeral {
		t.Error("ephemeral_store = false on the in-memory store")
	}
	if !strings.Contains(v.RegretChart, "<polyline") {
		t.Errorf("regret_chart has no line: %.200s", v.RegretChart)
	}
	if len(v.Bandits) != 2 {
		t.Fatalf("%d bandits, want 2", len(v.Bandits))
	}
	for _, b := range v.Bandits {
		if b.Decisions != steps || b.Rewards != steps {
			t.Errorf("%s: %d decisions, %d rewards; want %d of each", b.Name, b.Decisions, b.Rewards, steps)
		}
		if b.AvgReward == nil || *b.AvgReward != 1 {
			t.Errorf("%s: avg_reward = %v, want 1", b.Name, b.AvgReward)
		}
		if (b.Regret != nil) != (b.Name == "sim") || (b.Regret != nil && (b.Regret.Cumulative != 12.5 || b.Regret.Steps != 30)) {
			t.Errorf("%s: regret = %+v, want {12.5 30} for sim only", b.Name, b.Regret)
		}
		if len(b.Layers) != 0 {
			t.Errorf("%s: layers = %+v, want none: eps-greedy's point estimate has no σ (TestDashboardPanelsPerKind)", b.Name, b.Layers)
		}
		if len(b.Recent) != 12 || b.Recent[0].Reward == nil || !(b.Recent[0].Propensity > 0) {
			t.Errorf("%s: recent = %+v, want the 12 newest with rewards and propensities", b.Name, b.Recent)
		}
		var share float64
		for _, s := range b.ArmShare {
			share += s
		}
		if math.Abs(share-1) > 1e-9 {
			t.Errorf("%s: arm shares %v sum to %g, want 1", b.Name, b.ArmShare, share)
		}
		for _, c := range []string{"throughput", "reward", "arms", "elbo", "lag"} {
			if !strings.HasPrefix(b.Charts[c], "<svg") {
				t.Errorf("%s: chart %s is not SVG: %.80q", b.Name, c, b.Charts[c])
			}
		}
	}
}

// The page, its script, style and icon come from the binary: nothing
// from another origin.
func TestDashboardPageIsSelfContained(t *testing.T) {
	srv := dashFixture(t)
	f := &fixture{srv: srv}
	for _, tt := range []struct{ path, ctype, want string }{
		{"/", "text/html", "in-memory store"},
		{"/static/dashboard.js", "javascript", "/v1/dashboard"},
		{"/static/dashboard.css", "text/css", ".card"},
		{"/static/favicon.svg", "image/svg+xml", "<svg"},
	} {
		resp, body := f.call(t, "GET", tt.path, "", "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), tt.ctype) || !strings.Contains(string(body), tt.want) {
			t.Errorf("GET %s = %d %s, want 200 %s containing %q", tt.path, resp.StatusCode, resp.Header.Get("Content-Type"), tt.ctype, tt.want)
		}
		for _, ext := range []string{"src=\"http", "href=\"http", "url(http", "import("} {
			if strings.Contains(string(body), ext) {
				t.Errorf("GET %s refers to another origin: %q", tt.path, ext)
			}
		}
	}
}

// TestDashboardPosterior: the panel of a flow-ts bandit carries the
// posterior fitted at the MAP (bandit.Status.Posterior), which the page
// shows: the last layer's prior precision, noise and evidence, and once
// the trainer has rows, the flow's length and ELBO.
func TestDashboardPosterior(t *testing.T) {
	srv := dashFixture(t)
	f := &fixture{srv: srv}
	f.must(t, 201, "POST", "/v1/bandits", `{"name": "fl", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}],
		"policy": {"kind": "flow-ts", "flow": {"length": 3, "iterations": 50}}, "model": {"hidden": [4]}, "training": {"iterations": 5, "min_interval": "0s"}}`)
	for i := range 10 {
		var d struct {
			EventID string `json:"event_id"`
			Sample  string `json:"sample"`
		}
		if err := json.Unmarshal(f.must(t, 201, "POST", "/v1/bandits/fl/decisions", fmt.Sprintf(`{"context": {"x": %d}}`, i)), &d); err != nil {
			t.Fatal(err)
		}
		if d.Sample != "flow" {
			t.Fatalf("flow-ts decision on %q samples", d.Sample)
		}
		f.must(t, 204, "POST", "/v1/bandits/fl/events/"+d.EventID+"/reward", fmt.Sprintf(`{"value": %d}`, i%3))
	}
	var post *bandit.PosteriorStatus
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var v struct {
			Bandits []struct {
				Posterior *bandit.PosteriorStatus `json:"posterior"`
			} `json:"bandits"`
		}
		if err := json.Unmarshal(f.must(t, 200, "GET", "/v1/dashboard", ""), &v); err != nil {
			t.Fatal(err)
		}
		if post = v.Bandits[0].Posterior; post != nil && post.FlowELBO != nil {
			break
		}
	}
	if post == nil || post.Kind != "flow" || post.FlowLength != 3 || post.FlowELBO == nil || post.PriorPrecision == nil || post.LogEvidence == nil {
		t.Fatalf("dashboard posterior %+v, want a flow of 3 layers with its ELBO and the last layer's evidence", post)
	}
	if js := string(f.must(t, 200, "GET", "/static/dashboard.js", "")); !strings.Contains(js, `data-field="posterior"`) {
		t.Error("the page does not show the posterior")
	}
}

// TestDashboardPanelsPerKind: every policy kind gets the panels it has
// (panelsFor's table) and no other, and once it has decisions, rewards
// and a trained model, none of them is left "waiting for data" (issue
// 18, finding 7: linear-ts and uniform waited forever for an ELBO and a
// posterior σ they cannot have). Its objective is the trainer's: an ELBO
// for mf-ts and refined-ts, the MAP's for the point estimates, none
// without a network.
func TestDashboardPanelsPerKind(t *testing.T) {
	srv := dashFixture(t)
	f := &fixture{srv: srv}
	base := []string{"throughput", "reward", "arms"}
	kinds := []struct {
		name, policy, objective string
		panels                  []string
	}{
		{"uniform", `"kind": "uniform"`, "", base},
		{"linear-ts", `"kind": "linear-ts"`, "", append(base[:3:3], "lag")},
		{"greedy", `"kind": "greedy"`, "map", append(base[:3:3], "elbo", "lag")},
		{"eps-greedy", `"kind": "eps-greedy"`, "map", append(base[:3:3], "elbo", "lag")},
		{"laplace-diagonal", `"kind": "laplace-ts", "laplace": "diagonal"`, "map", append(base[:3:3], "elbo", "lag", "spread")},
		{"laplace-last-layer", `"kind": "laplace-ts", "laplace": "last-layer"`, "map", append(base[:3:3], "elbo", "lag")},
		{"flow-ts", `"kind": "flow-ts", "flow": {"length": 2, "iterations": 20}`, "map", append(base[:3:3], "elbo", "lag")},
		{"neural-linear", `"kind": "neural-linear"`, "map", append(base[:3:3], "elbo", "lag")},
		{"mf-ts", `"kind": "mf-ts"`, "elbo", append(base[:3:3], "elbo", "lag", "spread")},
		{"refined-ts", `"kind": "refined-ts"`, "elbo", append(base[:3:3], "elbo", "lag", "spread", "bank")},
	}
	for _, k := range kinds {
		f.must(t, 201, "POST", "/v1/bandits", `{"name": "`+k.name+`", "arms": ["a", "b", "c"], "features": [{"name": "x", "type": "numeric"}],
			"policy": {`+k.policy+`}, "model": {"hidden": [4]}, "training": {"iterations": 5, "min_interval": "1ms"},
			"refinement": {"iterations": 5, "bank_size": 4}}`)
	}
	time.Sleep(70 * time.Millisecond) // a few samples before the traffic
	for i := range 20 {
		for _, k := range kinds {
			var d struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(f.must(t, 201, "POST", "/v1/bandits/"+k.name+"/decisions", fmt.Sprintf(`{"context": {"x": %d}}`, i%5)), &d); err != nil {
				t.Fatal(err)
			}
			f.must(t, 204, "POST", "/v1/bandits/"+k.name+"/events/"+d.EventID+"/reward", fmt.Sprintf(`{"value": %d}`, i%2))
		}
	}

	type panelView struct {
		Name      string            `json:"name"`
		Panels    []string          `json:"panels"`
		Charts    map[string]string `json:"charts"`
		Objective string            `json:"objective"`
		ELBO      *float64          `json:"elbo"`
		Layers    []json.RawMessage `json:"layers"`
	}
	type view struct {
		Bandits []panelView `json:"bandits"`
	}
	// Wait until no chart waits (trainings take a moment), then check.
	var v view
	waiting := func() []string {
		var w []string
		for _, b := range v.Bandits {
			for p, c := range b.Charts {
				if strings.Contains(c, "waiting for data") {
					w = append(w, b.Name+"/"+p)
				}
			}
		}
		return w
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v = view{}
		if err := json.Unmarshal(f.must(t, 200, "GET", "/v1/dashboard", ""), &v); err != nil {
			t.Fatal(err)
		}
		if len(waiting()) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if w := waiting(); len(w) > 0 {
		t.Errorf("charts still waiting for data after 20s: %v", w)
	}
	if len(v.Bandits) != len(kinds) {
		t.Fatalf("%d bandits on the dashboard, want %d", len(v.Bandits), len(kinds))
	}
	for _, k := range kinds {
		i := slices.IndexFunc(v.Bandits, func(b panelView) bool { return b.Name == k.name })
		if i < 0 {
			t.Fatalf("no bandit %q on the dashboard", k.name)
		}
		b := v.Bandits[i]
		if !slices.Equal(b.Panels, k.panels) {
			t.Errorf("%s: panels %v, want %v", k.name, b.Panels, k.panels)
		}
		if len(b.Charts) != len(k.panels) {
			t.Errorf("%s: %d charts, want one per panel (%v)", k.name, len(b.Charts), k.panels)
		}
		for _, p := range k.panels {
			if !strings.HasPrefix(b.Charts[p], "<svg") {
				t.Errorf("%s: chart %s is not SVG: %.80q", k.name, p, b.Charts[p])
			}
		}
		if b.Objective != k.objective || (b.ELBO != nil) != (k.objective != "") {
			t.Errorf("%s: objective %q (value %v), want %q with a value iff there is one", k.name, b.Objective, b.ELBO, k.objective)
		}
		if (len(b.Layers) > 0) != slices.Contains(k.panels, "spread") {
			t.Errorf("%s: %d layers of σ, want them iff the spread panel is shown", k.name, len(b.Layers))
		}
	}
}
