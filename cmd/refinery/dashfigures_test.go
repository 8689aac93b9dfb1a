package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// figures is what the browser reads of the page at one moment (one
// Evaluate, so one rendering of one poll's answer).
type figures struct {
	Main      string              // the text of the bandits' area
	Cards     map[string][]string // per bandit, the data-field names of its cards
	Lag       map[string]string   // the trainer-lag card's text
	LagLast   map[string]string   // the lag chart's last drawn value
	AvgReward map[string]string
	ELBO      map[string]string   // the card's ELBO per reward
	ELBOTitle map[string]string   // the elbo chart's title
	BankLast  map[string][]string // the bank chart's last drawn values
	BankTicks map[string][]string // its y tick labels
	ArmAreas  map[string]int      // polygons of the arm mix
	Spread    map[string][][]float64
	Labels    map[string][]string
}

const readFigures = `(() => {
  const out = {Main: document.getElementById("bandits").textContent, Cards: {}, Lag: {}, LagLast: {}, AvgReward: {}, ELBO: {}, ELBOTitle: {},
    BankLast: {}, BankTicks: {}, ArmAreas: {}, Spread: {}, Labels: {}};
  for (const card of document.querySelectorAll(".card")) {
    const n = card.dataset.bandit, q = (s) => card.querySelector(s), text = (s) => (q(s) || {}).textContent || "";
    out.Cards[n] = [...card.querySelectorAll(".kpi [data-field]")].map((e) => e.dataset.field);
    out.Lag[n] = text('[data-field="trainer_lag"]');
    const lag = q('[data-chart="lag"] [data-last]');
    out.LagLast[n] = lag ? lag.getAttribute("data-last") : "";
    out.AvgReward[n] = text('[data-field="avg_reward"]');
    out.ELBO[n] = text('[data-field="elbo-per-reward"]');
    out.ELBOTitle[n] = text('[data-chart="elbo"] text.ct');
    out.BankLast[n] = [...card.querySelectorAll('[data-chart="bank"] [data-last]')].map((e) => e.getAttribute("data-last"));
    out.BankTicks[n] = [...card.querySelectorAll('[data-chart="bank"] text.yt')].map((e) => e.textContent);
    out.ArmAreas[n] = card.querySelectorAll('[data-chart="arms"] polygon').length;
    const spread = q('[data-chart="spread"] svg');
    if (spread) {
      const bar = spread.querySelector("rect");
      const x = bar ? bar.x.baseVal.value : 0;
      const labels = [...spread.querySelectorAll("text.tk")].filter((e) => /^(layer|out)/.test(e.textContent));
      out.Labels[n] = labels.map((e) => e.textContent);
      out.Spread[n] = labels.map((e) => { const b = e.getBBox(); return [b.x + b.width, x]; });
    }
  }
  return out;
})()`

// TestDashboardFiguresInBrowser drives the dashboard in chromium through
// what issue 30 (finding 8) saw wrong, and checks the figures the page
// draws against its cards and the JSON: "Loading" rather than "No bandits
// yet" before the first answer; a trainer-lag card that shows the value
// its chart draws last; no negative rate on the bank chart after a PATCH
// resets the bank's counters; an arm mix with a gap, not a diagonal,
// where a bandit had no decisions; the average of the newest rewards
// when the newest decisions wait for theirs; the ELBO per reward, so
// labelled; σ labels not covered by their bars; and no "cum. regret"
// card on bandits the simulator does not drive.
func TestDashboardFiguresInBrowser(t *testing.T) {
	chromium := chromiumPath(t)
	m := startMain(t, func(m *Main) { m.DashboardEvery = 200 * time.Millisecond })
	c := newClient(t, m.URL())
	arms := []string{"left", "middle", "right"}
	feat := []map[string]any{{"name": "x", "type": "numeric"}}
	for _, b := range []map[string]any{
		{"name": "refined", "policy": map[string]any{"kind": "refined-ts"}, "model": map[string]any{"hidden": []int{8}},
			"training": map[string]any{"iterations": 5, "min_interval": "1ms"}, "refinement": map[string]any{"iterations": 10, "bank_size": 4}},
		{"name": "mf", "policy": map[string]any{"kind": "mf-ts"}, "model": map[string]any{"hidden": []int{100, 100}},
			"training": map[string]any{"iterations": 5, "min_interval": "1ms"}},
		{"name": "lin", "policy": map[string]any{"kind": "linear-ts"}},
	} {
		b["arms"], b["features"] = arms, feat
		c.must(201, "POST", "/v1/bandits", b)
	}

	ctx, errs := startBrowser(t, chromium, 90*time.Second)
	// Before the first answer (the JSON blocked): loading, not "no
	// bandits".
	block := []*network.BlockPattern{{URLPattern: "*://*:*/v1/dashboard", Block: true}}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: block}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(m.URL()+"/"), chromedp.WaitVisible(chromedp.CSS(`#status.err`))); err != nil {
		t.Fatalf("the page did not try its first poll: %v", err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[figures](readFigures))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(first.Main, "Loading") || strings.Contains(first.Main, "No bandits") {
		t.Errorf("before the first answer the page says %q, want Loading", first.Main)
	}
	if _, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: []*network.BlockPattern{}}); err != nil {
		t.Fatal(err)
	}
	blockedErrs := len(errs()) // the blocked polls' errors

	// Traffic on all three; lin's stops for 3 s (15 samples) and starts
	// again: a gap in its arm mix. The rewards each bandit got, in order.
	var (
		mu      sync.Mutex
		rewards = map[string][]float64{}
		linOff  atomic.Bool
		stop    = make(chan struct{})
		done    = make(chan struct{})
		paused  atomic.Bool // all traffic
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			for _, name := range []string{"refined", "mf", "lin"} {
				select {
				case <-stop:
					return
				default:
				}
				if paused.Load() || name == "lin" && linOff.Load() {
					continue
				}
				code, out, _, err := c.do("POST", "/v1/bandits/"+name+"/decisions", fmt.Sprintf(`{"context": {"x": %d}}`, i%7))
				var d struct {
					EventID string `json:"event_id"`
				}
				if err != nil || code != 201 || json.Unmarshal(out, &d) != nil {
					continue
				}
				v := float64(i%5) / 2
				if code, _, _, err := c.do("POST", "/v1/bandits/"+name+"/events/"+d.EventID+"/reward", fmt.Sprintf(`{"value": %g}`, v)); err == nil && code == 204 {
					mu.Lock()
					rewards[name] = append(rewards[name], v)
					mu.Unlock()
				}
			}
			time.Sleep(3 * time.Millisecond)
		}
	}()
	stopTraffic := sync.OnceFunc(func() { close(stop); <-done })
	t.Cleanup(stopTraffic)

	type view struct {
		Bandits []struct {
			Name              string   `json:"name"`
			AvgReward         *float64 `json:"avg_reward"`
			ELBO              *float64 `json:"elbo"`
			ELBOPerReward     *float64 `json:"elbo_per_reward"`
			TrainerLagMean    float64  `json:"trainer_lag_mean"`
			TrainerLagSeconds float64  `json:"trainer_lag_seconds"`
			Bank              *struct {
				Used              int64   `json:"used"`
				UsedPerSecond     float64 `json:"used_per_second"`
				ProducedPerSecond float64 `json:"produced_per_second"`
			} `json:"bank"`
		} `json:"bandits"`
	}
	readView := func() view {
		var v view
		if err := json.Unmarshal(c.must(200, "GET", "/v1/dashboard", nil), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	find := func(v view, name string) int {
		for i, b := range v.Bandits {
			if b.Name == name {
				return i
			}
		}
		t.Fatalf("no bandit %s in the dashboard's JSON", name)
		return -1
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 30 s for %s", what)
			}
		}
	}
	// Some bank use before the PATCH, and the gap in lin's traffic.
	time.Sleep(time.Second)
	linOff.Store(true)
	waitFor("refined's bank to serve 30 samples", func() bool {
		v := readView()
		b := v.Bandits[find(v, "refined")]
		return b.Bank != nil && b.Bank.Used >= 30
	})
	time.Sleep(3 * time.Second)
	linOff.Store(false)

	// The trainer lag: the card shows what its chart draws last, in
	// every rendering while traffic flows.
	parse := func(s string) float64 {
		f, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
		if err != nil {
			return math.NaN()
		}
		return f
	}
	for range 5 {
		f, err := chromedp.Run(ctx, chromedp.Evaluate[figures](readFigures))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"refined", "mf", "lin"} {
			card, _, _ := strings.Cut(f.Lag[name], " · ")
			if drawn := parse(f.LagLast[name]); math.IsNaN(drawn) || math.Abs(parse(card)-drawn) > 0.05+1e-9 {
				t.Errorf("%s: the trainer-lag card says %q, its chart's last value is %q", name, f.Lag[name], f.LagLast[name])
			}
		}
		time.Sleep(500 * time.Millisecond)
	}

	// A PATCH replaces refined's agent, whose bank counts from zero
	// again: the rates over the next seconds stay >= 0, in the JSON and
	// on the chart.
	c.must(200, "PATCH", "/v1/bandits/refined", map[string]any{"training": map[string]any{"iterations": 6}})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		v := readView()
		if b := v.Bandits[find(v, "refined")]; b.Bank != nil && (b.Bank.UsedPerSecond < 0 || b.Bank.ProducedPerSecond < 0) {
			t.Errorf("after the PATCH: used/s %g, made/s %g", b.Bank.UsedPerSecond, b.Bank.ProducedPerSecond)
		}
		f, err := chromedp.Run(ctx, chromedp.Evaluate[figures](readFigures))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range append(f.BankLast["refined"], f.BankTicks["refined"]...) {
			if parse(s) < 0 {
				t.Errorf("after the PATCH the bank chart draws %q (last values %q, ticks %q)", s, f.BankLast["refined"], f.BankTicks["refined"])
			}
		}
	}

	// Then refined gets 250 decisions and no rewards: the average is of
	// its newest 200 rewards.
	paused.Store(true)
	time.Sleep(100 * time.Millisecond) // the loop's requests in flight
	for i := range 250 {
		c.must(201, "POST", "/v1/bandits/refined/decisions", fmt.Sprintf(`{"context": {"x": %d}}`, i%7))
	}
	stopTraffic()
	mu.Lock()
	got := rewards["refined"]
	var want float64
	for _, v := range got[len(got)-200:] {
		want += v / 200
	}
	mu.Unlock()
	// Settled: the trainer has caught up and the page shows a poll
	// taken after it.
	waitFor("the trainers to catch up", func() bool {
		v := readView()
		for _, b := range v.Bandits {
			if b.TrainerLagMean != 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(2500 * time.Millisecond) // one more poll of the page
	f, err := chromedp.Run(ctx, chromedp.Evaluate[figures](readFigures))
	if err != nil {
		t.Fatal(err)
	}
	v := readView()
	r := v.Bandits[find(v, "refined")]
	if r.AvgReward == nil || math.Abs(*r.AvgReward-want) > 1e-9 {
		t.Errorf("refined: avg_reward %v, want %g, the mean of its newest 200 rewards", r.AvgReward, want)
	}
	if card := parse(f.AvgReward["refined"]); math.Abs(card-want) > 0.005+1e-9 {
		t.Errorf("refined: the avg reward card says %q, want %.2f", f.AvgReward["refined"], want)
	}

	// The ELBO per reward: the card's figure is the JSON's, which is the
	// status's ELBO over its trained rows, and the chart says "per
	// reward".
	var st struct {
		Status struct {
			ELBO        *float64 `json:"elbo"`
			TrainedRows int      `json:"trained_rows"`
		} `json:"status"`
	}
	if err := json.Unmarshal(c.must(200, "GET", "/v1/bandits/mf", nil), &st); err != nil {
		t.Fatal(err)
	}
	mfv := v.Bandits[find(v, "mf")]
	switch {
	case st.Status.ELBO == nil || st.Status.TrainedRows == 0 || mfv.ELBOPerReward == nil:
		t.Errorf("mf: no ELBO per reward (status %+v, dashboard %v)", st.Status, mfv.ELBOPerReward)
	case math.Abs(*mfv.ELBOPerReward-*st.Status.ELBO/float64(st.Status.TrainedRows)) > 1e-9*math.Abs(*st.Status.ELBO):
		t.Errorf("mf: elbo_per_reward %g, want the ELBO %g over %d rows", *mfv.ELBOPerReward, *st.Status.ELBO, st.Status.TrainedRows)
	case math.Abs(parse(f.ELBO["mf"])-*mfv.ELBOPerReward) > 1e-3*math.Abs(*mfv.ELBOPerReward):
		t.Errorf("mf: the card's ELBO per reward %q, the JSON's %g", f.ELBO["mf"], *mfv.ELBOPerReward)
	}
	for _, name := range []string{"refined", "mf"} {
		if !strings.Contains(f.ELBOTitle[name], "per reward") {
			t.Errorf("%s: the objective chart is titled %q, want per reward", name, f.ELBOTitle[name])
		}
	}

	// The arm mix of lin drew its gap: each arm's area in two parts at
	// least.
	if f.ArmAreas["lin"] < 2*len(arms) {
		t.Errorf("lin: %d areas in the arm mix after 3 s without decisions, want at least %d (a gap)", f.ArmAreas["lin"], 2*len(arms))
	}
	// σ labels in full, left of their bars.
	if want := []string{"layer 1 (1×100)", "layer 2 (100×100)", "out (100×3)"}; strings.Join(f.Labels["mf"], "|") != strings.Join(want, "|") {
		t.Errorf("mf: σ labels %q, want %q", f.Labels["mf"], want)
	}
	for i, b := range f.Spread["mf"] {
		if b[0] > b[1] {
			t.Errorf("mf: σ label %q ends at x=%.1f, under its bar from x=%.1f", f.Labels["mf"][i], b[0], b[1])
		}
	}
	// No simulator, no regret card.
	for name, fields := range f.Cards {
		for _, k := range fields {
			if k == "regret" {
				t.Errorf("%s: a cum. regret card without a simulator (cards %q)", name, fields)
			}
		}
	}
	for _, e := range errs()[blockedErrs:] {
		t.Errorf("browser: %s", e)
	}
}
