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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
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
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second+warmup)
	defer cancel()

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
