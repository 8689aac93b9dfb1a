package api_test

import (
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// refinery_build_info, refinery_reward_sum and refinery_trainer_lag_seconds
// (issue 18, finding 9). An mf-ts bandit whose trainer may retrain once
// an hour trains on its first reward at once (lag 0 afterwards), then
// holds its second: its lag grows from the second reward on (at least
// the 150 ms slept, less than a minute). A uniform bandit has no trainer
// and no lag. The reward sums are the rewards' values: 2 - 3.5 and 1.
func TestMetricsBuildInfoRewardSumAndTrainerLag(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	f.metrics.SetBuildInfo("v9.9", "portable")
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "lagged", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}],
		"policy": {"kind": "mf-ts"}, "model": {"hidden": [4]}, "training": {"iterations": 5, "min_interval": "1h", "cpu_share": 1}}`)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "u", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`)
	for _, b := range []string{"lagged", "u"} {
		f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+b+"/decisions", `{"event_id": "e1", "context": {"x": 1}}`)
	}
	f.must(t, http.StatusNoContent, "POST", "/v1/bandits/lagged/events/e1/reward", `{"value": 2}`)
	f.must(t, http.StatusNoContent, "POST", "/v1/bandits/u/events/e1/reward", `{"value": 1}`)
	lag := func(name string) float64 {
		t.Helper()
		mfs, err := f.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "refinery_trainer_lag_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				if m.GetLabel()[0].GetValue() == name {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no refinery_trainer_lag_seconds{bandit=%q}", name)
		return 0
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, body := f.call(t, "GET", "/v1/bandits/lagged", "", "")
		var b struct {
			Status struct {
				ModelVersion int `json:"model_version"`
			} `json:"status"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatal(err)
		}
		if b.Status.ModelVersion == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first reward was not trained on within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := lag("lagged"); got != 0 {
		t.Errorf("lag after the first training = %g s, want 0", got)
	}
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/lagged/decisions", `{"event_id": "e2", "context": {"x": 2}}`)
	f.must(t, http.StatusNoContent, "POST", "/v1/bandits/lagged/events/e2/reward", `{"value": -3.5}`)
	time.Sleep(150 * time.Millisecond)
	if got := lag("lagged"); got < 0.15 || got > 60 {
		t.Errorf("lag of a held reward = %g s, want 0.15 to 60", got)
	}
	if got := lag("u"); got != 0 {
		t.Errorf("uniform's lag = %g s, want 0", got)
	}
	want := `
# HELP refinery_build_info Always 1, labelled with the binary's version (git describe at build time), the Go version and the kernel level the numerical core runs on.
# TYPE refinery_build_info gauge
refinery_build_info{goversion="` + runtime.Version() + `",kernels="portable",version="v9.9"} 1
# HELP refinery_reward_sum Sum of the values of the rewards counted by refinery_rewards_total (defaults included, an idempotent repeat counted again); with it, the mean reward over a window is increase(sum)/increase(count). A gauge: rewards may be negative.
# TYPE refinery_reward_sum gauge
refinery_reward_sum{bandit="lagged"} -1.5
refinery_reward_sum{bandit="u"} 1
`
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want), "refinery_build_info", "refinery_reward_sum"); err != nil {
		t.Error(err)
	}
}
