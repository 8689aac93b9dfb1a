package api_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
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

// stepFixture is a server on a step-mode service (bandit.StepConfig: a
// retraining every 5 rewards inside the reward request, seed 5) on the
// in-memory store, so that what it publishes is a function of the
// requests.
func stepFixture(t *testing.T) *fixture {
	t.Helper()
	log := slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	reg := prometheus.NewRegistry()
	m := api.NewMetrics(reg)
	st := memoryStore(t)
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 5, Logger: log, Observer: m, Step: &bandit.StepConfig{TrainEvery: 5}})
	if err := svc.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Service: svc, Metrics: m, Gatherer: reg, Logger: log}))
	t.Cleanup(func() {
		srv.Close()
		svc.Close(context.Background())
	})
	return &fixture{srv: srv, store: st, reg: reg, metrics: m}
}

// lockInTraffic sends n decisions on alternating sides to the bandit
// name, each rewarded at once: arm a pays 1 on seven in ten, arm b 1 on
// the right; the first exclude decisions exclude arm b.
func lockInTraffic(t *testing.T, f *fixture, name string, n, exclude int) {
	t.Helper()
	for i := range n {
		side := []string{"left", "right"}[i%2]
		body := fmt.Sprintf(`{"event_id": "e%d", "context": {"side": %q}}`, i, side)
		if i < exclude {
			body = fmt.Sprintf(`{"event_id": "e%d", "context": {"side": %q}, "excluded_arms": ["b"]}`, i, side)
		}
		var d struct {
			Arm string `json:"arm"`
		}
		if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/"+name+"/decisions", body), &d); err != nil {
			t.Fatal(err)
		}
		r := 0
		if d.Arm == "a" && i%10 < 7 || d.Arm == "b" && side == "right" {
			r = 1
		}
		f.must(t, http.StatusNoContent, "POST", fmt.Sprintf("/v1/bandits/%s/events/e%d/reward", name, i), fmt.Sprintf(`{"value": %d}`, r))
	}
}

// The health gauges are the status's health figures (issue 28): for a
// greedy bandit locked in on purpose (arm b excluded for 60 decisions,
// then 500 of greedy play), an mf-ts bandit on real rewards (a learned
// noise beside the rewards' variance, its mean-field spread per layer)
// and a uniform one (no posterior: only the lock-in series, at 0), the
// exposition of /metrics is built from GET /v1/bandits/{name}'s
// status.health and compared with prometheus/testutil.
func TestMetricsHealthGauges(t *testing.T) {
	f := stepFixture(t)
	for _, b := range []struct{ name, kind string }{{"locked", "greedy"}, {"mf", "mf-ts"}, {"u", "uniform"}} {
		f.must(t, http.StatusCreated, "POST", "/v1/bandits", fmt.Sprintf(`{"name": %q, "arms": ["a", "b"],
			"features": [{"name": "side", "type": "categorical", "values": ["left", "right"]}],
			"policy": {"kind": %q}, "model": {"hidden": [8]}, "training": {"iterations": 50, "iterations_per_reward": 50}}`, b.name, b.kind))
	}
	lockInTraffic(t, f, "locked", 560, 60)
	lockInTraffic(t, f, "u", 120, 0)
	for i := range 30 {
		f.must(t, http.StatusCreated, "POST", "/v1/bandits/mf/decisions", fmt.Sprintf(`{"event_id": "e%d", "context": {"side": "left"}}`, i))
		f.must(t, http.StatusNoContent, "POST", fmt.Sprintf("/v1/bandits/mf/events/e%d/reward", i), fmt.Sprintf(`{"value": %g}`, 0.5+float64(i%3)))
	}

	var want strings.Builder
	series := map[string][]string{}
	add := func(name, labels string, v float64) {
		series[name] = append(series[name], fmt.Sprintf("%s{%s} %s", name, labels, strconv.FormatFloat(v, 'g', -1, 64)))
	}
	for _, name := range []string{"locked", "mf", "u"} {
		var view struct {
			Status struct {
				Health *bandit.Health `json:"health"`
			} `json:"status"`
		}
		if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/"+name, ""), &view); err != nil {
			t.Fatal(err)
		}
		h := view.Status.Health
		if h == nil {
			t.Fatalf("%s: no health in the status", name)
		}
		for _, l := range h.Layers {
			if l.PointEstimate {
				continue // not reported: its sigmas are held
			}
			add("refinery_posterior_sigma_median", fmt.Sprintf(`bandit=%q,layer="%d"`, name, l.Layer), l.MedianSigma)
			add("refinery_posterior_sigma_at_prior_ratio", fmt.Sprintf(`bandit=%q,layer="%d"`, name, l.Layer), l.AtPriorShare)
		}
		if h.Noise != nil {
			for _, v := range h.Noise.Variances {
				arm := cmp.Or(v.Arm, "shared") // an arm's under model.noise context or per-arm
				add("refinery_noise_variance", fmt.Sprintf(`arm=%q,bandit=%q`, arm, name), v.NoiseVariance)
				add("refinery_reward_variance", fmt.Sprintf(`arm=%q,bandit=%q`, arm, name), *v.RewardVariance)
			}
		}
		if ho := h.HeldOut; ho != nil {
			add("refinery_heldout_loglik_per_reward", fmt.Sprintf(`bandit=%q,window="recent"`, name), ho.RecentLogLikPerReward)
			add("refinery_heldout_loglik_per_reward", fmt.Sprintf(`bandit=%q,window="version"`, name), ho.LogLikPerReward)
			if ho.CalibrationError != nil {
				add("refinery_calibration_error", fmt.Sprintf(`bandit=%q,window="recent"`, name), *ho.RecentCalibrationError)
				add("refinery_calibration_error", fmt.Sprintf(`bandit=%q,window="version"`, name), *ho.CalibrationError)
			}
		}
		alarm := 0.0
		if h.LockIn.Alarm {
			alarm = 1
		}
		add("refinery_lockin_alarm", fmt.Sprintf(`bandit=%q`, name), alarm)
		add("refinery_lockin_top_arm_share", fmt.Sprintf(`bandit=%q`, name), h.LockIn.TopShare)
		switch name {
		case "locked":
			if !h.LockIn.Alarm || h.HeldOut == nil || h.HeldOut.CalibrationError == nil || len(h.Layers) != 0 {
				t.Errorf("locked: %+v, want an alarm, held-out figures with an ECE, no layers (a point estimate)", h)
			}
		case "mf":
			// mf-ts's default model.noise "context": a noise variance per arm.
			if len(h.Layers) != 2 || !h.Layers[0].PointEstimate || h.Layers[1].PointEstimate || h.Noise == nil || len(h.Noise.Variances) != 2 || h.HeldOut == nil || h.HeldOut.CalibrationError != nil {
				t.Errorf("mf: %+v, want 2 layers (the hidden a point estimate), a noise variance per arm and held-out figures without an ECE", h)
			}
		case "u":
			if h.LockIn.Alarm || h.Layers != nil || h.Noise != nil || h.HeldOut != nil || h.LockIn.Decisions != 120 {
				t.Errorf("u: %+v, want the lock-in figures alone, no alarm", h)
			}
		}
	}
	help := map[string]string{}
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		help[mf.GetName()] = mf.GetHelp()
	}
	var names []string
	for _, name := range []string{"refinery_posterior_sigma_median", "refinery_posterior_sigma_at_prior_ratio", "refinery_noise_variance", "refinery_reward_variance",
		"refinery_heldout_loglik_per_reward", "refinery_calibration_error", "refinery_lockin_alarm", "refinery_lockin_top_arm_share"} {
		if len(series[name]) == 0 {
			t.Errorf("no %s figure in the statuses", name)
			continue
		}
		names = append(names, name)
		fmt.Fprintf(&want, "# HELP %s %s\n# TYPE %s gauge\n", name, help[name], name)
		for _, s := range series[name] {
			want.WriteString(s + "\n")
		}
	}
	if err := testutil.GatherAndCompare(f.reg, strings.NewReader(want.String()), names...); err != nil {
		t.Error(err)
	}
}

// Every metric about a bandit carries its bandit label; only the
// service-wide ones (the build, CPU by activity, the store's group
// commits, which batch rows of every bandit, and HTTP by route pattern)
// do not. refinery_decision_seconds and refinery_refinement_seconds had
// none (issue 30, polish).
func TestMetricsOfABanditCarryItsLabel(t *testing.T) {
	f := stepFixture(t)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", `{"name": "r", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}],
		"policy": {"kind": "refined-ts"}, "model": {"hidden": [4]}, "training": {"iterations": 5}, "refinement": {"iterations": 5, "bank_size": 2}}`)
	for i := range 12 {
		f.must(t, http.StatusCreated, "POST", "/v1/bandits/r/decisions", fmt.Sprintf(`{"event_id": "e%d", "context": {"x": %d}}`, i, i%3))
		f.must(t, http.StatusNoContent, "POST", fmt.Sprintf("/v1/bandits/r/events/e%d/reward", i), `{"value": 1}`)
	}
	serviceWide := map[string]bool{"refinery_build_info": true, "refinery_cpu_seconds_total": true, "refinery_store_batch_size": true,
		"refinery_store_commit_seconds": true, "refinery_http_requests_total": true, "refinery_http_request_duration_seconds": true}
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "refinery_") || serviceWide[name] {
			continue
		}
		for _, m := range mf.GetMetric() {
			var bandit string
			for _, l := range m.GetLabel() {
				if l.GetName() == "bandit" {
					bandit = l.GetValue()
				}
			}
			if bandit == "" {
				t.Errorf("%s has a series without a bandit label: %v", name, m.GetLabel())
			}
			if bandit == "r" {
				seen[name] = true
			}
		}
	}
	for _, name := range []string{"refinery_decision_seconds", "refinery_refinement_seconds"} {
		if !seen[name] {
			t.Errorf("no %s{bandit=\"r\"}", name)
		}
	}
}
