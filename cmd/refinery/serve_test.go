package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
	"github.com/refinery-bandits/refinery/store/storetest"
)

// testLogger sends slog records at level and above to t.Log.
func testLogger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tLogWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tLogWriter struct{ t testing.TB }

func (w tLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startServe runs the serve command's Main on a free loopback port and
// waits until /readyz answers 200; it is closed when the test ends.
func startServe(t testing.TB, databaseURL string) *Main {
	t.Helper()
	return startMain(t, func(m *Main) { m.DatabaseURL = databaseURL })
}

// startMain runs a Main on a free loopback port, logging warnings to the
// test, with seed 7 and what set changes, and waits until /readyz
// answers 200; it is closed when the test ends (Close is idempotent, so
// a test may close it first).
func startMain(t testing.TB, set func(*Main)) *Main {
	t.Helper()
	m := NewMain()
	m.Addr = "127.0.0.1:0"
	m.Logger = testLogger(t, slog.LevelWarn)
	m.Seed = 7
	set(m)
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	waitReady(t, m.URL())
	return m
}

func waitReady(t testing.TB, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz not 200 after 30s (last: %v)", base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// client is a small JSON client for the tests.
type client struct {
	t    testing.TB
	base string
	http *http.Client
}

func newClient(t testing.TB, base string) *client {
	return &client{t: t, base: base, http: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64},
	}}
}

// do sends a request with a JSON body (nil: none) and returns the status
// and the body.
func (c *client) do(method, path string, body any) (int, []byte, http.Header, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header, err
}

// must is do that fails the test unless the status is want.
func (c *client) must(want int, method, path string, body any) []byte {
	c.t.Helper()
	code, out, _, err := c.do(method, path, body)
	if err != nil || code != want {
		c.t.Fatalf("%s %s = %d %s (err %v), want %d", method, path, code, out, err, want)
	}
	return out
}

// mushroomData loads the real UCI mushroom file (../shared/data/mushroom).
func mushroomData(t testing.TB) *simulators.MushroomData {
	t.Helper()
	tt, ok := t.(*testing.T)
	if !ok {
		t.Fatal("mushroomData needs a *testing.T")
	}
	d, err := simulators.LoadMushroom(filepath.Join(sharedMushroomDir(tt), simulators.MushroomFile))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mushroomBandit is the refined-ts mushroom bandit's configuration
// (mushroomConfig) changed by set.
func mushroomBandit(d *simulators.MushroomData, name string, set func(*bandit.Config)) bandit.Config {
	cfg := mushroomConfig(d, name, bandit.RefinedTS)
	set(&cfg)
	return cfg
}

// mushroomContext is row i of the data as a decision context.
func mushroomContext(d *simulators.MushroomData, i int) map[string]string {
	ctx := make(map[string]string, len(simulators.MushroomAttributes))
	for j, attr := range simulators.MushroomAttributes {
		ctx[attr] = d.Rows[i][j]
	}
	return ctx
}

// metricSum adds the values of the samples of a metric whose labels
// contain every given "k=\"v\"" pair in a Prometheus text exposition.
func metricSum(t testing.TB, text, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

type decisionBody struct {
	EventID       string             `json:"event_id"`
	Arm           string             `json:"arm"`
	Probabilities map[string]float64 `json:"probabilities"`
	ModelVersion  int64              `json:"model_version"`
	Sample        string             `json:"sample"`
}

// TestServeMushroomEndToEnd runs the mushroom bandit through the HTTP
// API of the real serve command over loopback: 2,000 decisions and
// rewards from the mushroom environment, one client, each reward sent
// right after its decision. The network is small (one hidden layer of
// 16, 60 ELBO iterations per retraining at most every 100ms, refinement
// of 20 iterations, a refined sample serving up to 4 decisions) so that
// the test fits its budget on 2 cores, yet it must learn: the mean
// reward of the last 500 steps must beat that of the first 500 (eating
// half the time at random pays about -2.3 per step; the oracle, which
// eats only the edible ones, 2.6).
func TestServeMushroomEndToEnd(t *testing.T) {
	data := mushroomData(t)
	for _, tc := range []struct {
		name          string
		url           func(t *testing.T) string
		steps, window int
	}{
		{"on PostgreSQL", func(t *testing.T) string { return storetest.FreshSchemaURL(t) }, 2000, 500},
		// The same steps: at 1,000 some runs of the default model still
		// passed every mushroom at the end (2 of 6 within 0.12 of the
		// first window's expected reward).
		{"on the in-memory store", func(*testing.T) string { return "" }, 2000, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name != "on PostgreSQL" && testing.Short() {
				t.Skip("only PostgreSQL in -short mode")
			}
			runMushroom(t, data, tc.url(t), tc.steps, tc.window)
		})
	}
}

func runMushroom(t *testing.T, data *simulators.MushroomData, url string, steps, window int) {
	start := time.Now()
	m := startServe(t, url)
	c := newClient(t, m.URL())
	const name = "mushrooms"
	c.must(http.StatusCreated, "POST", "/v1/bandits", mushroomBandit(data, name, func(c *bandit.Config) {
		c.Policy.Samples, c.Policy.MaxSampleUses = 3, 4
		c.Model.Hidden = []int{16}
		minInterval := bandit.Duration(100 * time.Millisecond)
		c.Training.Iterations, c.Training.SnapshotEvery, c.Training.MinInterval = 60, 5, &minInterval
		c.Refinement.Iterations, c.Refinement.BankSize = 20, 6
	}))

	rng := rand.New(rand.NewPCG(2021, 43))
	var first, last float64
	samples := map[string]int{}
	rw := simulators.DefaultMushroomRewards()
	for i := range steps {
		if i > 0 && i%100 == 0 {
			waitTrained(t, c, name, int64(i))
		}
		row := rng.IntN(len(data.Rows))
		out := c.must(http.StatusCreated, "POST", "/v1/bandits/"+name+"/decisions", map[string]any{"context": mushroomContext(data, row)})
		var d decisionBody
		if err := json.Unmarshal(out, &d); err != nil {
			t.Fatal(err)
		}
		if p := d.Probabilities[d.Arm]; !(p > 0 && p <= 1) {
			t.Fatalf("step %d: probability of the chosen arm %s is %g", i, d.Arm, p)
		}
		samples[d.Sample]++
		r := mushroomReward(data.Edible[row], d.Arm, rng)
		c.must(http.StatusNoContent, "POST", "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", map[string]any{"value": r})
		// The expected reward of the decision (eating a poisonous
		// mushroom is worth -15 on average, +5 or -35 when drawn): the
		// policy's, without the lottery's noise.
		var e float64
		switch {
		case d.Arm == "pass":
		case data.Edible[row]:
			e = rw.EatEdible
		default:
			e = rw.EatPoisonous()
		}
		switch {
		case i < window:
			first += e
		case i >= steps-window:
			last += e
		}
	}
	first, last = first/float64(window), last/float64(window)
	t.Logf("%d steps in %.1fs; mean expected reward first %d: %.2f, last %d: %.2f; samples %v", steps, time.Since(start).Seconds(), window, first, window, last, samples)
	if !(last > first) {
		t.Errorf("mean expected reward of the last %d steps %.2f, want more than the first %d's %.2f", window, last, window, first)
	}

	metrics := string(c.must(http.StatusOK, "GET", "/metrics", nil))
	if got := metricSum(t, metrics, "refinery_decisions_total", `bandit="mushrooms"`); got != float64(steps) {
		t.Errorf("refinery_decisions_total sums to %g, want %d", got, steps)
	}
	if got := metricSum(t, metrics, "refinery_rewards_total", `bandit="mushrooms"`); got != float64(steps) {
		t.Errorf("refinery_rewards_total = %g, want %d", got, steps)
	}
	for _, s := range []string{"refined", "mean-field"} {
		if got := metricSum(t, metrics, "refinery_decisions_total", `bandit="mushrooms"`, `sample="`+s+`"`); got != float64(samples[s]) {
			t.Errorf("refinery_decisions_total{sample=%q} = %g, want %d as the responses said", s, got, samples[s])
		}
	}
	if got := metricSum(t, metrics, "refinery_http_requests_total", `route="/v1/bandits/{name}/decisions"`, `code="201"`); got != float64(steps) {
		t.Errorf("refinery_http_requests_total for the decisions route = %g, want %d", got, steps)
	}
	if samples["refined"] == 0 {
		t.Errorf("no decision acted on refined samples: %v", samples)
	}
	// The trainer and the refinement workers ran: their CPU time is
	// counted, and is part of the process's.
	training := metricSum(t, metrics, "refinery_cpu_seconds_total", `activity="training"`)
	refinement := metricSum(t, metrics, "refinery_cpu_seconds_total", `activity="refinement"`)
	process := metricSum(t, metrics, "process_cpu_seconds_total")
	if !(training > 0 && refinement > 0 && training+refinement <= process+0.02) {
		t.Errorf("CPU seconds: training %g, refinement %g, the whole process %g", training, refinement, process)
	}

	var status struct {
		Status struct {
			Decisions, Rewards int64
			ModelVersion       int64 `json:"model_version"`
		}
	}
	if err := json.Unmarshal(c.must(http.StatusOK, "GET", "/v1/bandits/"+name, nil), &status); err != nil {
		t.Fatal(err)
	}
	if status.Status.Decisions != int64(steps) || status.Status.Rewards != int64(steps) || status.Status.ModelVersion < 1 {
		t.Errorf("status %+v, want %d decisions and rewards and a trained model", status.Status, steps)
	}
	if url == "" {
		return
	}
	// The store holds every decision and reward, read back after shutdown
	// through a store of its own.
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := store.OpenPostgres(context.Background(), url, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d, r, err := s.Counts(context.Background(), name)
	if err != nil || d != int64(steps) || r != int64(steps) {
		t.Errorf("the store holds %d decisions and %d rewards (err %v), want %d of each", d, r, err, steps)
	}
	if _, err := s.LatestSnapshot(context.Background(), name); err != nil {
		t.Errorf("no snapshot persisted: %v", err)
	}
	t.Logf("wall time %.1fs", time.Since(start).Seconds())
}

func TestServeCommandLine(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://from-env")
	m := NewMain()
	if err := m.ParseFlags(nil, io.Discard); err != nil || m.DatabaseURL != "postgres://from-env" || m.Addr != "127.0.0.1:8080" {
		t.Errorf("ParseFlags() = %v, DatabaseURL %q, Addr %q; want $DATABASE_URL and the default address", err, m.DatabaseURL, m.Addr)
	}
	if m.MaxConns != DefaultMaxConns || m.MaxInFlight != api.DefaultMaxInFlight || m.MaxBandits != bandit.DefaultMaxBandits || m.RequestTimeout != api.DefaultRequestTimeout || m.DBWait != 2*time.Minute {
		t.Errorf("ParseFlags() limits: conns %d, in flight %d, bandits %d, request timeout %v, db wait %v; want the defaults", m.MaxConns, m.MaxInFlight, m.MaxBandits, m.RequestTimeout, m.DBWait)
	}
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{"negative workers are refused", []string{"serve", "--workers", "-1"}, "refinery serve: --workers -1: want 0 (one per core less one) or more\n"},
		{"an unknown log level is refused", []string{"serve", "--log-level", "loud"}, "refinery serve: --log-level \"loud\": want debug, info, warn or error\n"},
		{"arguments are refused", []string{"serve", "now"}, "refinery serve: unexpected argument \"now\"\n"},
		{"an unknown simulation is refused", []string{"serve", "--simulate", "casino"}, "refinery serve: --simulate \"casino\": want mushroom or wheel\n"},
		{"zero max connections are refused", []string{"serve", "--max-conns", "0"}, "refinery serve: --max-conns 0: want 1 or more\n"},
		{"zero requests in flight are refused", []string{"serve", "--max-in-flight", "0"}, "refinery serve: --max-in-flight 0: want 1 or more\n"},
		{"zero bandits are refused", []string{"serve", "--max-bandits", "0"}, "refinery serve: --max-bandits 0: want 1 or more\n"},
		{"zero held refusals are refused", []string{"serve", "--max-refused-pending", "0"}, "refinery serve: --max-refused-pending 0: want 1 or more\n"},
		{"a negative refusal delay is refused", []string{"serve", "--refused-key-delay", "-1s"}, "refinery serve: --refused-key-delay -1s: want >= 0\n"},
		{"a share over the slots is refused", []string{"serve", "--max-in-flight", "8", "--max-in-flight-per-key", "9"}, "refinery serve: --max-in-flight-per-key 9: want 0 (--max-in-flight / 4) to --max-in-flight (8)\n"},
		{"a zero request timeout is refused", []string{"serve", "--request-timeout", "0s"}, "refinery serve: --db-wait 2m0s, --request-timeout 0s: want >= 0 and > 0\n"},
		{"a zero trainer retry is refused", []string{"serve", "--trainer-retry", "0s"}, "refinery serve: --trainer-retry 0s, --fleet-poll 5s: want > 0\n"},
		{"a negative fleet poll is refused", []string{"serve", "--fleet-poll", "-1s"}, "refinery serve: --trainer-retry 1s, --fleet-poll -1s: want > 0\n"},
		{"a trainer lease shorter than two renewals is refused", []string{"serve", "--trainer-lease", "1500ms"}, "refinery serve: --trainer-lease 1.5s: want at least twice --trainer-retry (1s), which renews it\n"},
		{"a rate of zero is refused", []string{"serve", "--simulate", "wheel", "--rate", "0/s"}, "refinery serve: --rate \"0/s\": want decisions per second per bandit in (0, 10000], e.g. 20 or 20/s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != 2 || stderr.String() != tt.wantStderr {
				t.Errorf("exit %d, stderr %q; want 2, %q", code, stderr.String(), tt.wantStderr)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"serve", "-h"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "usage: refinery serve") {
		t.Errorf("serve -h = exit %d, stdout %q; want 0 and the usage", code, stdout.String())
	}
	for _, flag := range []string{"-max-in-flight-per-key", "-refused-key-delay", "-max-refused-pending"} {
		if !strings.Contains(stdout.String(), flag) {
			t.Errorf("serve -h does not describe %s", flag)
		}
	}
}

// TestServeRefusedKeyFlags: --refused-key-delay and --max-refused-pending
// reach the tarpit (api.Config.RefusedKeyDelay, MaxRefusedPending): a
// request with an unknown key is answered 401 after --refused-key-delay
// 1500ms, at once with 0, and at once past --max-refused-pending 1 while
// one refusal is held.
func TestServeRefusedKeyFlags(t *testing.T) {
	refuse := func(m *Main) time.Duration {
		secret, _, err := keys.New(nil, "nobody", []keys.Scope{keys.Admin}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", m.URL()+"/v1/bandits", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("an unknown key: %d, want 401", resp.StatusCode)
		}
		return time.Since(start)
	}
	start := func(args ...string) *Main {
		return startMain(t, func(m *Main) {
			if err := m.ParseFlags(append([]string{"--require-keys", "--database-url", ""}, args...), io.Discard); err != nil {
				t.Fatal(err)
			}
			m.Addr = "127.0.0.1:0"
		})
	}
	if d := refuse(start("--refused-key-delay", "1500ms")); d < 1500*time.Millisecond {
		t.Errorf("--refused-key-delay 1500ms: refused after %v", d)
	}
	if d := refuse(start("--refused-key-delay", "0")); d >= api.DefaultRefusedKeyDelay {
		t.Errorf("--refused-key-delay 0: refused after %v, want at once", d)
	}
	m := start("--refused-key-delay", "3s", "--max-refused-pending", "1")
	held := make(chan time.Duration)
	go func() { held <- refuse(m) }()
	time.Sleep(500 * time.Millisecond) // the first is held
	if d := refuse(m); d >= 3*time.Second {
		t.Errorf("--max-refused-pending 1: the second refusal took %v, want at once", d)
	}
	if d := <-held; d < 3*time.Second {
		t.Errorf("--refused-key-delay 3s: the first refusal took %v", d)
	}
}

// Without a database the service runs on the in-memory store, says so
// on /readyz and /, and still answers.
func TestServeWithoutDatabaseUsesMemory(t *testing.T) {
	m := startServe(t, "")
	if !m.Store.Ephemeral() {
		t.Fatal("the store is not the in-memory one")
	}
	c := newClient(t, m.URL())
	var ready struct {
		Ephemeral bool `json:"ephemeral_store"`
	}
	if err := json.Unmarshal(c.must(http.StatusOK, "GET", "/readyz", nil), &ready); err != nil || !ready.Ephemeral {
		t.Errorf("/readyz ephemeral_store = %v (err %v), want true", ready.Ephemeral, err)
	}
	if page := string(c.must(http.StatusOK, "GET", "/", nil)); !strings.Contains(page, "in-memory store") {
		t.Errorf("/ does not warn about the in-memory store: %q", page)
	}
}

// serve --addr 0.0.0.0:PORT prints a dashboard address a browser on this
// machine opens (http://127.0.0.1:PORT/), not the listener's [::]:PORT.
func TestBrowseURLOfEveryInterface(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{ln.Addr(), fmt.Sprintf("http://127.0.0.1:%d", port)},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, "http://127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080"},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80}, "http://10.1.2.3:80"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, "http://[::1]:8080"},
	} {
		if got := browseURL(c.addr); got != c.want {
			t.Errorf("browseURL(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// A bandit created on PostgreSQL answers "trainer": true at once: the
// replica alone on the database trains it, and its first status says so
// instead of false until the next election a moment later (issue 30,
// polish).
func TestCreatedBanditIsTrainedAtOnceOnPostgres(t *testing.T) {
	m := startServe(t, storetest.FreshSchemaURL(t))
	c := newClient(t, m.URL())
	for i := range 5 {
		name := fmt.Sprintf("fresh-%d", i)
		var got struct {
			Status struct {
				Trainer bool `json:"trainer"`
			} `json:"status"`
		}
		out := c.must(201, "POST", "/v1/bandits", map[string]any{"name": name, "arms": []string{"a", "b"},
			"features": []map[string]any{{"name": "x", "type": "numeric"}}, "policy": map[string]any{"kind": "linear-ts"}})
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !got.Status.Trainer {
			t.Errorf("POST %s answered \"trainer\": false: %s", name, out)
		}
	}
}

// waitTrained waits until bandit name's trainer has trained on at least
// rewards rewards (status.trained_rows), so that what a test of learning
// measures is the model and not the speed of the machine; it fails the
// test after 30 s.
func waitTrained(t *testing.T, c *client, name string, rewards int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var st struct {
			Status struct {
				TrainedRows int64 `json:"trained_rows"`
			} `json:"status"`
		}
		if err := json.Unmarshal(c.must(http.StatusOK, "GET", "/v1/bandits/"+name, nil), &st); err != nil {
			t.Fatal(err)
		}
		if st.Status.TrainedRows >= rewards {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the trainer has not trained on %d rewards after 30s", name, rewards)
		}
	}
}
