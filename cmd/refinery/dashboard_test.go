package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/refinery-bandits/refinery/internal/keys"
)

// chromiumPath returns Debian's chromium (or $CHROMIUM). Without it the
// test is skipped, except under CI=true, where it fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p := os.Getenv("CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no chromium at %s (apt-get install -y chromium): %v", p, err)
		}
		t.Skipf("no chromium at %s: %v", p, err)
	}
	return p
}

// TestDashboardInBrowser starts serve with the mushroom simulator on the
// in-memory store, opens the dashboard in headless chromium at 1280x800
// and checks that it shows both simulated bandits with live charts, that
// its decision counts agree with the API's, and that the browser logs no
// error. It saves a screenshot to $ARTIFACTS_DIR (default
// api/testdata/artifacts/) and, when $DASHBOARD_SCREENSHOT names a file,
// there too, after $DASHBOARD_WARMUP (a duration; default: as soon as
// the charts hold data) -- `make screenshot` uses that for the README.
func TestDashboardInBrowser(t *testing.T) {
	start := time.Now()
	chromium := chromiumPath(t)
	dataDir := sharedMushroomDir(t)
	warmup := time.Duration(0)
	if s := os.Getenv("DASHBOARD_WARMUP"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("DASHBOARD_WARMUP=%q: %v", s, err)
		}
		warmup = d
	}

	const rate = 40 // decisions per second per bandit
	m := NewMain()
	m.Addr = "127.0.0.1:0"
	m.Logger = testLogger(t, slog.LevelWarn)
	m.Seed = 7
	m.Simulate, m.Rate, m.Data = "mushroom", rate, dataDir
	m.DashboardEvery = 500 * time.Millisecond
	if err := m.Run(context.Background()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	waitReady(t, m.URL())

	ctx, errs := startBrowser(t, chromium, 45*time.Second+warmup)

	const refined, eps = "mushroom-refined-ts", "mushroom-eps-greedy"
	card := func(name, rest string) chromedp.CSS { return chromedp.CSS(`.card[data-bandit="` + name + `"]` + rest) }
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(m.URL()+"/"),
		chromedp.WaitVisible(card(refined, "")),
		chromedp.WaitVisible(card(eps, "")),
		// Charts with lines: at least three samples of each bandit.
		chromedp.WaitReady(card(refined, ` [data-chart="throughput"] polyline`)),
		chromedp.WaitReady(card(eps, ` [data-chart="throughput"] polyline`)),
		chromedp.WaitReady(card(refined, ` [data-chart="arms"] polygon`)),
		chromedp.WaitReady(chromedp.CSS(`#regret polyline`)),
	); err != nil {
		t.Fatalf("the dashboard did not show both bandits with charts: %v (browser errors: %q)", err, errs())
	}
	banner, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#ephemeral")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(banner, "in-memory store") {
		t.Errorf("banner %q does not mention the in-memory store", banner)
	}
	if warmup > 0 {
		time.Sleep(warmup)
	}

	// The page's decision counts against the API's. The page is at most
	// one poll (2s) plus a request behind, so it may trail by up to
	// tolerance decisions, never lead.
	const tolerance = rate * 4
	for _, name := range []string{refined, eps} {
		shown, err := chromedp.Run(ctx, chromedp.Text(card(name, ` [data-field="decisions"]`)))
		if err != nil {
			t.Fatal(err)
		}
		page, err := strconv.ParseInt(strings.ReplaceAll(shown, ",", ""), 10, 64)
		if err != nil {
			t.Fatalf("%s: decisions on the page %q: %v", name, shown, err)
		}
		resp, err := http.Get(m.URL() + "/v1/bandits/" + name)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ Status struct{ Decisions int64 } }
		err = json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if api := v.Status.Decisions; page <= 0 || page > api || float64(api-page) > tolerance {
			t.Errorf("%s: the page shows %d decisions, the API %d; want 0 < page <= API within %d", name, page, api, int(tolerance))
		}
		regret, err := chromedp.Run(ctx, chromedp.Text(card(name, ` [data-field="regret"]`)))
		if err != nil {
			t.Fatal(err)
		}
		if r, err := strconv.ParseFloat(strings.ReplaceAll(regret, ",", ""), 64); err != nil || r < 0 || math.IsNaN(r) {
			t.Errorf("%s: cumulative regret on the page %q, want a number >= 0", name, regret)
		}
	}

	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "api", "testdata", "artifacts")
	}
	for _, p := range []string{filepath.Join(dir, "dashboard.png"), os.Getenv("DASHBOARD_SCREENSHOT")} {
		if p == "" {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", p)
	}

	for _, e := range errs() {
		t.Errorf("browser: %s", e)
	}
	t.Logf("wall time %.1fs", time.Since(start).Seconds())
}

// startBrowser starts headless chromium at 1280x800 for the test, for at
// most timeout, and returns its context and the errors its pages log
// (console errors, exceptions, log entries of level error).
func startBrowser(t *testing.T, chromium string, timeout time.Duration) (context.Context, func() []string) {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelCtx) // runs before m.Close: the page stops polling first
	ctx, cancel := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancel)

	var mu sync.Mutex
	var browserErrors []string
	if err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				msg = "console.error: " + strings.Join(args, " ")
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg = "exception: " + d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				msg = fmt.Sprintf("log %s: %s %s", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL)
			}
		}
		if msg != "" {
			mu.Lock()
			browserErrors = append(browserErrors, msg)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start the browser: %v", err)
	}
	errs := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), browserErrors...)
	}

	return ctx, errs
}

// chartLayout is what the browser measures of one drawn chart: boxes
// are [x0, y0, x1, y1] in the SVG's own units (getBBox).
type chartLayout struct {
	W, H   float64
	Title  []float64
	Legend [][]float64
	YTicks []string
	XTicks []string
	Text   string
}

// measureCharts returns, per bandit card and chart, the layout the
// browser drew.
const measureCharts = `(() => {
  const box = (el) => { const b = el.getBBox(); return [b.x, b.y, b.x + b.width, b.y + b.height]; };
  const out = {};
  for (const card of document.querySelectorAll(".card")) {
    const charts = {};
    for (const div of card.querySelectorAll(".chart")) {
      const svg = div.querySelector("svg");
      const vb = svg.viewBox.baseVal;
      charts[div.dataset.chart] = {
        W: vb.width, H: vb.height,
        Title: box(svg.querySelector("text.ct")),
        Legend: [...svg.querySelectorAll("g.lge")].map(box),
        YTicks: [...svg.querySelectorAll("text.yt")].map((e) => e.textContent),
        XTicks: [...svg.querySelectorAll("text.xt")].map((e) => e.textContent),
        Text: svg.textContent,
      };
    }
    out[card.dataset.bandit] = charts;
  }
  return out;
})()`

// TestDashboardPanelsInBrowser drives the dashboard in headless chromium
// with bandits that tripped it (issue 18, finding 7): a uniform bandit
// of 26 arms named by letters, a linear-ts bandit and an mf-ts bandit of
// three arms with long names. Each card shows its kind's panels and no
// other, none left waiting for data; no legend entry touches the title,
// another entry or the chart's edge, as the browser measures the drawn
// text; and every axis is labelled with round ticks: evenly spaced, 1, 2
// or 5 x 10^k apart, whole numbers on the integer axes.
func TestDashboardPanelsInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	m := startMain(t, func(m *Main) { m.DashboardEvery = 200 * time.Millisecond })
	c := newClient(t, m.URL())
	letters := make([]string, 26)
	for i := range letters {
		letters[i] = string(rune('a' + i))
	}
	three := []string{"left-of-centre", "middle-ground", "right-of-centre"}
	want := map[string][]string{
		"letters": {"throughput", "reward", "arms"},
		"lin":     {"throughput", "reward", "arms", "lag"},
		"mf":      {"throughput", "reward", "arms", "elbo", "lag", "spread"},
	}
	for _, b := range []struct {
		name, kind string
		arms       []string
	}{{"letters", "uniform", letters}, {"lin", "linear-ts", three}, {"mf", "mf-ts", three}} {
		cfg := map[string]any{"name": b.name, "arms": b.arms,
			"features": []map[string]any{{"name": "x", "type": "numeric"}}, "policy": map[string]any{"kind": b.kind},
			"model": map[string]any{"hidden": []int{4}}, "training": map[string]any{"iterations": 5, "min_interval": "1ms"}}
		if b.name == "mf" { // a candidate, whose estimate the card shows
			cfg["shadow"] = map[string]any{"policy": map[string]any{"kind": "eps-greedy"}, "model": map[string]any{"hidden": []int{4}}}
		}
		c.must(201, "POST", "/v1/bandits", cfg)
	}
	// Traffic until the test ends, so that the arm mix has data.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			for _, name := range []string{"letters", "lin", "mf"} {
				select {
				case <-stop:
					return
				default:
				}
				code, out, _, err := c.do("POST", "/v1/bandits/"+name+"/decisions", fmt.Sprintf(`{"context": {"x": %d}}`, i%7))
				var d struct {
					EventID string `json:"event_id"`
				}
				if err != nil || code != 201 || json.Unmarshal(out, &d) != nil {
					continue
				}
				c.do("POST", "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", fmt.Sprintf(`{"value": %d}`, i%3))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { close(stop); <-done })

	ctx, errs := startBrowser(t, chromium, 40*time.Second)
	if err := chromedp.Do(ctx, chromedp.Navigate(m.URL()+"/"),
		chromedp.WaitReady(chromedp.CSS(`.card[data-bandit="letters"] [data-chart="arms"] polygon`)),
		chromedp.WaitReady(chromedp.CSS(`.card[data-bandit="mf"] [data-chart="elbo"] polyline`)),
	); err != nil {
		t.Fatalf("the dashboard did not draw the bandits: %v (browser errors: %q)", err, errs())
	}
	// The shadow's line: the candidate's estimate against the live
	// policy's, each with its interval.
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`.card[data-bandit="mf"] [data-field="shadow-candidate"]`))); err != nil {
		t.Fatalf("the mf card shows no shadow estimate: %v (browser errors: %q)", err, errs())
	}
	if line, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.card[data-bandit="mf"] [data-field="shadow"]`))); err != nil ||
		!regexp.MustCompile(`^shadow eps-greedy · snips over [0-9,]+ decisions: candidate [0-9.]+ \[-?[0-9.]+, [0-9.]+\] vs live [0-9.]+ \[-?[0-9.]+, [0-9.]+\] \(95%\) · ESS [0-9,]+$`).MatchString(line) {
		t.Errorf("the mf card's shadow line is %q (%v), want the candidate's and the live policy's estimates with intervals", line, err)
	}
	if none, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('.card[data-bandit="lin"] [data-field="shadow"]') === null`)); err != nil || !none {
		t.Errorf("the lin card, whose bandit has no shadow, shows a shadow line (%v)", err)
	}
	var cards map[string]map[string]chartLayout
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		var err error
		if cards, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]map[string]chartLayout](measureCharts)); err != nil {
			t.Fatal(err)
		}
		// The ELBO chart's axis counts versions: wait for a few, however
		// long the trainer takes per version on a loaded machine.
		waiting := len(cards["mf"]["elbo"].XTicks) < 2
		for _, charts := range cards {
			for _, l := range charts {
				waiting = waiting || strings.Contains(l.Text, "waiting for data")
			}
		}
		if !waiting || time.Now().After(deadline) {
			break
		}
	}

	overlap := func(a, b []float64) bool { return a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3] }
	for name, panels := range want {
		charts := cards[name]
		if len(charts) != len(panels) {
			t.Errorf("%s: charts %v, want %v", name, mapKeys(charts), panels)
		}
		for _, p := range panels {
			l, ok := charts[p]
			if !ok {
				t.Errorf("%s: no %s chart", name, p)
				continue
			}
			if strings.Contains(l.Text, "waiting for data") {
				t.Errorf("%s: the %s chart waits for data", name, p)
			}
			for i, e := range l.Legend {
				if overlap(e, l.Title) {
					t.Errorf("%s/%s: legend entry %d %v covers the title %v", name, p, i, e, l.Title)
				}
				if e[0] < 0 || e[2] > l.W || e[1] < 0 || e[3] > l.H {
					t.Errorf("%s/%s: legend entry %d %v outside the chart %gx%g", name, p, i, e, l.W, l.H)
				}
				for j := range i {
					if overlap(e, l.Legend[j]) {
						t.Errorf("%s/%s: legend entries %d %v and %d %v overlap", name, p, j, l.Legend[j], i, e)
					}
				}
			}
			if p == "spread" {
				continue // bars: values, not an axis
			}
			checkTicks(t, name+"/"+p+" y", l.YTicks, p == "lag")
			if p == "elbo" {
				checkTicks(t, name+"/"+p+" x (versions)", l.XTicks, true)
			} else {
				checkTimeTicks(t, name+"/"+p+" x", l.XTicks)
			}
		}
	}
	if n := len(cards["letters"]["arms"].Legend); n != 26 {
		t.Errorf("the 26-arm mix has %d legend entries, want 26", n)
	}
	for _, e := range errs() {
		t.Errorf("browser: %s", e)
	}
}

func mapKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// checkTicks checks an axis's labels: at least two, numbers (with an SI
// prefix) evenly spaced 1, 2 or 5 x 10^k apart, with the same decimals,
// none on an integer axis.
func checkTicks(t *testing.T, axis string, labels []string, integer bool) {
	t.Helper()
	if len(labels) < 2 {
		t.Errorf("%s: tick labels %q, want at least two", axis, labels)
		return
	}
	vals := make([]float64, len(labels))
	for i, l := range labels {
		num, mult := l, 1.0
		for p, g := range map[string]float64{"k": 1e3, "M": 1e6, "G": 1e9, "m": 1e-3, "µ": 1e-6, "n": 1e-9} {
			if strings.HasSuffix(l, p) {
				num, mult = strings.TrimSuffix(l, p), g
			}
		}
		v, err := strconv.ParseFloat(num, 64)
		if err != nil {
			t.Errorf("%s: tick label %q is not a number", axis, l)
			return
		}
		vals[i] = v * mult
		if integer && strings.Contains(l, ".") {
			t.Errorf("%s: integer axis labelled %q", axis, l)
		}
		if d, d0 := strings.IndexByte(l, '.'), strings.IndexByte(labels[len(labels)-1], '.'); d >= 0 && d0 >= 0 && len(l)-d != len(labels[len(labels)-1])-d0 {
			t.Errorf("%s: labels %q with different decimals", axis, labels)
		}
	}
	step := math.Abs(vals[1] - vals[0])
	for i := 2; i < len(vals); i++ {
		if math.Abs(math.Abs(vals[i]-vals[i-1])-step) > step*1e-6 {
			t.Errorf("%s: ticks %q not evenly spaced", axis, labels)
		}
	}
	f := step / math.Pow(10, math.Floor(math.Log10(step)))
	if math.Abs(f-1) > 1e-9 && math.Abs(f-2) > 1e-9 && math.Abs(f-5) > 1e-9 {
		t.Errorf("%s: ticks %q are %g apart, want 1, 2 or 5 x 10^k", axis, labels, step)
	}
}

// checkTimeTicks checks a time axis: "now" or whole seconds ("-30s") or
// whole minutes ("-2m"), increasing.
func checkTimeTicks(t *testing.T, axis string, labels []string) {
	t.Helper()
	prev := math.Inf(-1)
	for _, l := range labels {
		v := 0.0
		if l != "now" {
			n, err := strconv.Atoi(strings.TrimRight(l, "sm"))
			if err != nil || !(strings.HasSuffix(l, "s") || strings.HasSuffix(l, "m")) {
				t.Errorf("%s: time tick %q, want now, -Ns or -Nm", axis, l)
				return
			}
			v = float64(n)
			if strings.HasSuffix(l, "m") {
				v *= 60
			}
		}
		if v <= prev {
			t.Errorf("%s: time ticks %q not increasing", axis, labels)
		}
		prev = v
	}
}

// TestDashboardLoginInBrowser: on a server that requires keys the
// dashboard is a login form; a read key typed into it opens the
// dashboard (the key kept in an HttpOnly cookie the page's script cannot
// read), which then polls its JSON; a decide key is refused. The Content
// Security Policy allows all of it: the browser logs no violation.
func TestDashboardLoginInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	m := startMain(t, func(m *Main) { m.RequireKeys, m.DashboardEvery = true, 200*time.Millisecond })
	ks := m.Store.(keys.Store)
	secret := func(scope keys.Scope) string {
		s, k, err := keys.New(nil, "browser "+string(scope), []keys.Scope{scope}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := ks.CreateKey(context.Background(), k); err != nil {
			t.Fatal(err)
		}
		return s
	}
	read, decide := secret(keys.Read), secret(keys.Decide)
	req, _ := http.NewRequest("POST", m.URL()+"/v1/bandits", strings.NewReader(`{"name": "shown", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+m.AdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 201 {
		t.Fatalf("create a bandit with the admin key: %v %v", resp, err)
	}
	resp.Body.Close()

	ctx, errs := startBrowser(t, chromium, 30*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(m.URL()+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#login input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`#login input[name="key"]`), decide),
		chromedp.Submit(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`#failure`)),
	); err != nil {
		t.Fatalf("the login form with a decide key: %v (browser errors %q)", err, errs())
	}
	failure, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#failure`)))
	if err != nil || !strings.Contains(failure, "read scope") {
		t.Errorf("failure %q (%v), want it to say the key lacks the read scope", failure, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#login input[name="key"]`), read),
		chromedp.Submit(chromedp.CSS(`#login`)),
		chromedp.WaitVisible(chromedp.CSS(`.card[data-bandit="shown"]`)),
	); err != nil {
		t.Fatalf("the dashboard after signing in with a read key: %v (browser errors %q)", err, errs())
	}
	cookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil || cookie != "" {
		t.Errorf("document.cookie = %q (%v), want the key out of the script's reach", cookie, err)
	}
	// Signed out behind the page's back (the cookie expired): its next
	// poll is a 401, and the page turns into the login form.
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#login input[name="key"]`))); err != nil {
		t.Errorf("the page after its cookie went: %v, want the login form", err)
	}
	// Browser errors: only the two refused logins' 401/403 answers,
	// which chromium logs as failed loads; no CSP violation.
	for _, e := range errs() {
		if !strings.Contains(e, "status of 401") && !strings.Contains(e, "status of 403") {
			t.Errorf("browser: %s", e)
		}
	}
}

// statusHealth is the part of GET /v1/bandits/{name} the health panel
// shows.
type statusHealth struct {
	Status struct {
		ModelVersion int64 `json:"model_version"`
		TrainedRows  int64 `json:"trained_rows"`
		Rewards      int64 `json:"rewards"`
		Health       struct {
			ModelVersion int64 `json:"model_version"`
			Layers       []struct {
				Layer         int     `json:"layer"`
				MedianSigma   float64 `json:"median_sigma"`
				AtPriorShare  float64 `json:"at_prior_share"`
				PointEstimate bool    `json:"point_estimate"`
			} `json:"layers"`
			Noise *struct {
				Likelihood string `json:"likelihood"`
				Variances  []struct {
					Arm            string   `json:"arm"`
					NoiseVariance  float64  `json:"noise_variance"`
					RewardVariance *float64 `json:"reward_variance"`
				} `json:"variances"`
			} `json:"noise"`
			HeldOut *struct {
				LogLikPerReward        float64  `json:"log_lik_per_reward"`
				CalibrationError       *float64 `json:"calibration_error"`
				RecentLogLikPerReward  float64  `json:"recent_log_lik_per_reward"`
				RecentCalibrationError *float64 `json:"recent_calibration_error"`
			} `json:"heldout"`
			LockIn struct {
				Decisions       int                `json:"decisions"`
				TopShare        float64            `json:"top_share"`
				BestProbability map[string]float64 `json:"best_probability"`
				Alarm           bool               `json:"alarm"`
			} `json:"lock_in"`
		} `json:"health"`
	} `json:"status"`
}

// TestDashboardHealthInBrowser: the health panel (issue 28) in headless
// chromium shows the figures of GET /v1/bandits/{name}'s status.health,
// and the lock-in badge appears on the bandit driven into a lock-in and
// on no other. "locked" is a greedy bandit whose arm b is excluded for
// its first 60 decisions (arm a pays 1 on seven in ten, b 1 on the
// right): it then plays a on all of 500 more (bandit
// .TestLockInAlarmFiresOnAGreedyLockIn is the same lock-in in step mode);
// each reward waits for the trainer to have trained on it, so that
// every decision acts on a posterior of all the rewards before it, as in
// step mode. "mf" is an mf-ts bandit on real rewards (a noise variance,
// its spread per layer). Once both have been idle for 10 s, the page's
// figures (four significant digits, shares as percentages to 0.1) must
// be the status's to their rounding.
func TestDashboardHealthInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	m := startMain(t, func(m *Main) { m.DashboardEvery = 200 * time.Millisecond })
	c := newClient(t, m.URL())
	// The greedy bandit's model is pinned to the one it locks in under
	// (the fan-in prior's strong pull on its MAP, and the Bernoulli
	// likelihood); the point-estimate kinds' defaults are the fixed prior
	// and the Gaussian likelihood.
	for _, b := range []struct {
		name, kind string
		model      map[string]any
	}{
		{"locked", "greedy", map[string]any{"hidden": []int{8}, "prior": "fan-in", "likelihood": "auto"}},
		{"mf", "mf-ts", map[string]any{"hidden": []int{8}}},
	} {
		c.must(201, "POST", "/v1/bandits", map[string]any{"name": b.name, "arms": []string{"a", "b"},
			"features": []map[string]any{{"name": "side", "type": "categorical", "values": []string{"left", "right"}}},
			"policy":   map[string]any{"kind": b.kind}, "model": b.model,
			"training": map[string]any{"iterations": 50, "iterations_per_reward": 50, "min_interval": "1ms", "cpu_share": 1}})
	}
	status := func(name string) statusHealth {
		t.Helper()
		var s statusHealth
		if err := json.Unmarshal(c.must(200, "GET", "/v1/bandits/"+name, nil), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	caughtUp := func(name string, rewards int64) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if s := status(name); s.Status.TrainedRows >= rewards {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the trainer has not trained on %d rewards after 10s", name, rewards)
			}
		}
	}
	for i := range 560 {
		side := []string{"left", "right"}[i%2]
		body := map[string]any{"event_id": fmt.Sprint("e", i), "context": map[string]any{"side": side}}
		if i < 60 {
			body["excluded_arms"] = []string{"b"}
		}
		var d struct {
			Arm string `json:"arm"`
		}
		if err := json.Unmarshal(c.must(201, "POST", "/v1/bandits/locked/decisions", body), &d); err != nil {
			t.Fatal(err)
		}
		r := 0
		if d.Arm == "a" && i%10 < 7 || d.Arm == "b" && side == "right" {
			r = 1
		}
		c.must(204, "POST", fmt.Sprintf("/v1/bandits/locked/events/e%d/reward", i), map[string]any{"value": r})
		caughtUp("locked", int64(i+1))
	}
	for i := range 40 {
		c.must(201, "POST", "/v1/bandits/mf/decisions", map[string]any{"event_id": fmt.Sprint("e", i), "context": map[string]any{"side": "left"}})
		c.must(204, "POST", fmt.Sprintf("/v1/bandits/mf/events/e%d/reward", i), map[string]any{"value": 0.5 + float64(i%3)})
		if i == 19 {
			// Two versions at least, so that the second scores the
			// rewards it trains on before it does (held-out figures),
			// however fast the trainer runs.
			caughtUp("mf", 20)
		}
	}
	caughtUp("mf", 40)
	// On a live service the probabilities of being best are recomputed
	// at most every 10 s (bandit.Agent.Health): after 10 s idle the next
	// status has those of the last posterior on the last decisions, which
	// stay as they are.
	time.Sleep(10*time.Second + 500*time.Millisecond)
	status("locked")
	want := map[string]statusHealth{"locked": status("locked"), "mf": status("mf")}
	if l := want["locked"].Status.Health.LockIn; !l.Alarm {
		t.Fatalf("the greedy bandit did not lock in: %+v", l)
	}
	if l := want["mf"].Status.Health.LockIn; l.Alarm {
		t.Fatalf("the mf-ts bandit raised the alarm: %+v", l)
	}

	ctx, errs := startBrowser(t, chromium, 40*time.Second)
	card := func(name, rest string) chromedp.CSS { return chromedp.CSS(`.card[data-bandit="` + name + `"]` + rest) }
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate(m.URL()+"/"),
		chromedp.WaitVisible(card("locked", ` [data-field="lockin-badge"]`)),
		chromedp.WaitVisible(card("locked", ` [data-field="lockin-alarm"]`)),
		chromedp.WaitVisible(card("mf", ` [data-field="health"]`)),
	); err != nil {
		t.Fatalf("the dashboard did not show the health panels and the lock-in badge: %v (browser errors: %q)", err, errs())
	}
	// The figures on the page: every data-field of each card's health
	// panel, by name, once the page shows the status's model version.
	const fields = `(() => {
  const out = {};
  for (const card of document.querySelectorAll(".card")) {
    const f = {};
    for (const el of card.querySelectorAll("[data-field]")) f[el.dataset.field] = el.textContent;
    out[card.dataset.bandit] = f;
  }
  return out;
})()`
	var page map[string]map[string]string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if page, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]map[string]string](fields)); err != nil {
			t.Fatal(err)
		}
		ok := true
		for name, s := range want {
			ok = ok && page[name]["model_version"] == strconv.FormatInt(s.Status.ModelVersion, 10)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page's model versions %q, %q never reached the status's %d, %d", page["locked"]["model_version"], page["mf"]["model_version"],
				want["locked"].Status.ModelVersion, want["mf"].Status.ModelVersion)
		}
	}
	// A figure to four significant digits is within half a unit of its
	// fourth digit; a percentage to 0.1 within 0.05.
	near := func(name, field string, want float64, percent bool) {
		t.Helper()
		text, ok := page[name][field]
		if !ok {
			t.Errorf("%s: no %s on the page", name, field)
			return
		}
		got, err := strconv.ParseFloat(strings.ReplaceAll(text, ",", ""), 64)
		if err != nil {
			t.Errorf("%s: %s = %q, not a number", name, field, text)
			return
		}
		tol := 0.5e-3 * math.Abs(want) * 1.0001
		if percent {
			got, tol = got/100, 0.0005
		}
		if math.Abs(got-want) > tol {
			t.Errorf("%s: the page's %s is %s, the status's %g", name, field, text, want)
		}
	}
	lk := want["locked"].Status.Health
	near("locked", "lockin-top-share", lk.LockIn.TopShare, true)
	for arm, p := range lk.LockIn.BestProbability {
		near("locked", "best-probability-"+arm, p, false)
	}
	if lk.HeldOut == nil || lk.HeldOut.CalibrationError == nil {
		t.Fatalf("locked: held-out figures %+v, want them with an ECE (0/1 rewards)", lk.HeldOut)
	}
	near("locked", "heldout-loglik", lk.HeldOut.LogLikPerReward, false)
	near("locked", "calibration-error", *lk.HeldOut.CalibrationError, false)
	near("locked", "recent-loglik", lk.HeldOut.RecentLogLikPerReward, false)
	near("locked", "recent-calibration-error", *lk.HeldOut.RecentCalibrationError, false)
	if _, ok := page["locked"]["noise"]; !ok {
		t.Errorf("locked: the page does not say the Bernoulli likelihood has no noise: %q", page["locked"])
	}

	mf := want["mf"].Status.Health
	if _, ok := page["mf"]["lockin-badge"]; ok {
		t.Error("mf: a lock-in badge on a bandit without the alarm")
	}
	// mf-ts's default model.noise "context": a noise variance per arm.
	if len(mf.Layers) != 2 || mf.Noise == nil || len(mf.Noise.Variances) != 2 || mf.HeldOut == nil {
		t.Fatalf("mf: health %+v, want 2 layers, a noise variance per arm and held-out figures", mf)
	}
	// mf-ts's default model.stochastic "output": the hidden layer is a
	// point estimate, whose held sigmas the page does not show as a
	// posterior's.
	if !mf.Layers[0].PointEstimate || mf.Layers[1].PointEstimate {
		t.Errorf("mf: point estimates %v and %v, want the hidden layer only", mf.Layers[0].PointEstimate, mf.Layers[1].PointEstimate)
	}
	for _, l := range mf.Layers {
		if l.PointEstimate {
			if got := page["mf"][fmt.Sprint("point-estimate-", l.Layer)]; got != "point estimate" {
				t.Errorf("mf: layer %d reads %q, want \"point estimate\"", l.Layer, got)
			}
			if _, ok := page["mf"][fmt.Sprint("sigma-median-", l.Layer)]; ok {
				t.Errorf("mf: layer %d, a point estimate, shows a median sigma", l.Layer)
			}
			continue
		}
		near("mf", fmt.Sprint("sigma-median-", l.Layer), l.MedianSigma, false)
		near("mf", fmt.Sprint("at-prior-", l.Layer), l.AtPriorShare, true)
	}
	for _, v := range mf.Noise.Variances {
		if v.Arm == "" {
			t.Errorf("mf: a noise variance %+v without its arm", v)
		}
		near("mf", "noise-variance-"+v.Arm, v.NoiseVariance, false)
		near("mf", "reward-variance-"+v.Arm, *v.RewardVariance, false)
	}
	near("mf", "heldout-loglik", mf.HeldOut.LogLikPerReward, false)
	near("mf", "recent-loglik", mf.HeldOut.RecentLogLikPerReward, false)
	near("mf", "lockin-top-share", mf.LockIn.TopShare, true)

	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "api", "testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard-health.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, e := range errs() {
		t.Errorf("browser: %s", e)
	}
}
