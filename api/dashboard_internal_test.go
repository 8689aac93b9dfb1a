package api

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

func TestRingKeepsTheNewest(t *testing.T) {
	r := newRing[int](3)
	if got := r.all(); len(got) != 0 {
		t.Errorf("empty ring: all() = %v, want []", got)
	}
	for i := range 7 {
		r.push(i)
	}
	if got, want := r.all(), []int{4, 5, 6}; !slices.Equal(got, want) {
		t.Errorf("all() = %v, want %v", got, want)
	}
}

func TestChartsAreSVGAndEscaped(t *testing.T) {
	c := chart{title: `<b>&"`, w: 200, h: 100}
	got := c.lines([]series{{name: "<x>", colour: "#000", x: []float64{0, 1, 2}, y: []float64{1, nan(), 3}}})
	if !strings.HasPrefix(got, "<svg") || strings.Contains(got, "<b>") || strings.Contains(got, "<x>") {
		t.Errorf("lines() = %s, want SVG with the text escaped", got)
	}
	if got := c.lines(nil); !strings.Contains(got, "waiting for data") {
		t.Errorf("lines(nil) = %s, want the empty chart", got)
	}
}

func nan() float64 { var z float64; return z / z }

// The dashboard averages what Sampled reports per bandit.
func TestDashboardAveragesSampleUse(t *testing.T) {
	d := NewDashboard(DashboardConfig{})
	defer d.Close()
	d.Sampled("b", 10, 2*time.Second, 1, false)
	d.Sampled("b", 30, 4*time.Second, 3, true)
	d.Sampled("other", 1000, time.Hour, 9, false)
	d.mu.Lock()
	uses, age, behind := d.history("b").use.means()
	d.mu.Unlock()
	if uses != 20 || age != 3 || behind != 2 {
		t.Errorf("means = %g uses, %g s, %g versions; want 20, 3, 2", uses, age, behind)
	}
	if u, a, v := (sampleUse{}).means(); u != 0 || a != 0 || v != 0 {
		t.Errorf("means before any decision = %g, %g, %g; want zeros", u, a, v)
	}
}

// The uniform bandit has no model and no trainer: its trainer-lag chart
// stays at 0 however many rewards it gets (issue 18, finding 7: it
// climbed to 315 while the card said 0).
func TestDashboardUniformHasNoTrainerLag(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Workers: 1})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := svc.Create(ctx, &bandit.Config{Name: "u", Arms: []string{"a", "b"},
		Features: []bandit.Feature{{Name: "x", Type: bandit.Numeric}}, Policy: bandit.PolicyConfig{Kind: bandit.Uniform}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("e", i), Context: json.RawMessage(`{"x": 1}`)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Reward(ctx, o.Decision.EventID, 1); err != nil {
			t.Fatal(err)
		}
	}
	d := NewDashboard(DashboardConfig{})
	defer d.Close()
	s, err := d.measure(ctx, st, a)
	if err != nil {
		t.Fatal(err)
	}
	if s.rewards != 5 || s.lag != 0 {
		t.Errorf("uniform after 5 rewards: rewards %d, lag %d; want 5 and 0", s.rewards, s.lag)
	}
}

// parseTick reads a tick label back: a number with an optional SI
// prefix (tickFormat).
func parseTick(t *testing.T, s string) float64 {
	t.Helper()
	mult := 1.0
	for p, g := range map[string]float64{"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "µ": 1e-6, "n": 1e-9, "p": 1e-12} {
		if strings.HasSuffix(s, p) {
			s, mult = strings.TrimSuffix(s, p), g
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("tick label %q is not a number: %v", s, err)
	}
	return v * mult
}

// isNice reports whether step is 1, 2 or 5 times a power of ten.
func isNice(step float64) bool {
	e := math.Floor(math.Log10(step))
	f := step / math.Pow(10, e)
	for _, n := range []float64{1, 2, 5, 10} {
		if math.Abs(f-n) < 1e-9 {
			return true
		}
	}
	return false
}

// TestNiceTicks: the y axis of any range gets 3 to 7 round ticks (1, 2
// or 5 times a power of ten apart) that enclose the data, labelled with
// the same, fewest decimals that tell them apart, none on an integer
// axis (issue 18, finding 7: ticks such as 2011/1005 and "1, 32.0,
// 63.0").
func TestNiceTicks(t *testing.T) {
	for _, tt := range []struct {
		name    string
		lo, hi  float64
		integer bool
		// want, when set, are the labels exactly.
		want []string
	}{
		{name: "a count up to 2011", lo: 0, hi: 2011, integer: true, want: []string{"0", "500", "1000", "1500", "2000", "2500"}},
		{name: "versions 1 to 63", lo: 1, hi: 63, integer: true, want: []string{"0", "20", "40", "60", "80"}},
		{name: "a rate between 0 and 1", lo: 0, hi: 1, want: []string{"0", "0.5", "1.0"}},
		{name: "rewards in [0.12, 0.31]", lo: 0.12, hi: 0.31, want: []string{"0.10", "0.15", "0.20", "0.25", "0.30", "0.35"}},
		{name: "a single value", lo: 5, hi: 5, want: []string{"4.5", "5.0", "5.5"}},
		{name: "a single whole value", lo: 7, hi: 7, integer: true, want: []string{"6", "7", "8"}},
		{name: "a single zero", lo: 0, hi: 0, want: []string{"-1.0", "-0.5", "0", "0.5", "1.0"}},
		{name: "negative ELBOs", lo: -1234.5, hi: -1200.1, want: []string{"-1240", "-1230", "-1220", "-1210", "-1200"}},
		{name: "across zero", lo: -3.2, hi: 4.1},
		{name: "huge", lo: 0, hi: 3.7e9, want: []string{"0", "1G", "2G", "3G", "4G"}},
		{name: "large, in thousands", lo: 12_000, hi: 58_000, want: []string{"0", "20k", "40k", "60k"}},
		{name: "tiny", lo: 1e-7, hi: 3e-7, want: []string{"100n", "150n", "200n", "250n", "300n"}},
		{name: "tiny around a large offset", lo: 1000.001, hi: 1000.004},
		{name: "a small integer range", lo: 0, hi: 2, integer: true, want: []string{"0", "1", "2"}},
		{name: "huge negative", lo: -8e12, hi: -1e12},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi, step := niceRange(tt.lo, tt.hi, yTicks, tt.integer)
			if !isNice(step) || (tt.integer && step < 1) {
				t.Errorf("step %g, want 1, 2 or 5 x 10^k (and >= 1 on an integer axis)", step)
			}
			if lo > tt.lo || hi < tt.hi {
				t.Errorf("range [%g, %g] does not enclose the data [%g, %g]", lo, hi, tt.lo, tt.hi)
			}
			ticks := ticksWithin(lo, hi, step)
			if len(ticks) < 3 || len(ticks) > 7 {
				t.Errorf("%d ticks %v, want 3 to 7", len(ticks), ticks)
			}
			format := tickFormat(step, math.Max(math.Abs(lo), math.Abs(hi)))
			var labels []string
			for i, v := range ticks {
				l := format(v)
				labels = append(labels, l)
				if got := parseTick(t, l); math.Abs(got-v) > step*1e-6 {
					t.Errorf("tick %g labelled %q, which reads %g", v, l, got)
				}
				if i > 0 && labels[i-1] == l {
					t.Errorf("two ticks labelled %q", l)
				}
				if tt.integer && strings.Contains(l, ".") {
					t.Errorf("integer axis labelled %q", l)
				}
				if d := strings.IndexByte(l, '.'); d >= 0 && i > 0 {
					if p := strings.IndexByte(labels[0], '.'); p >= 0 && len(strings.TrimRight(l, "kMGTmµnp"))-d != len(strings.TrimRight(labels[0], "kMGTmµnp"))-p {
						t.Errorf("labels %q and %q have different decimals", labels[0], l)
					}
				}
			}
			if tt.want != nil && !slices.Equal(labels, tt.want) {
				t.Errorf("labels %q, want %q", labels, tt.want)
			}
		})
	}
}

// The x axis keeps the data's range (a time axis up to now) and puts
// round ticks inside it; a time axis steps in whole seconds or minutes.
func TestAxisTicksInsideTheData(t *testing.T) {
	label := func(c chart, x []float64) []string {
		f, ok := c.frame([]series{{x: x, y: make([]float64, len(x))}})
		if !ok {
			t.Fatal("no frame")
		}
		var out []string
		hi := x[len(x)-1]
		if c.xTime {
			hi = 0 // a time axis ends now
		}
		for _, v := range f.xticks {
			if v < x[0] || v > hi {
				t.Errorf("x tick %g outside [%g, %g]", v, x[0], hi)
			}
			out = append(out, f.xfmt(v))
		}
		return out
	}
	for _, tt := range []struct {
		name string
		c    chart
		x    []float64
		want []string
	}{
		{"versions 1 to 63", chart{w: 290, h: 150, xInt: true}, []float64{1, 63}, []string{"20", "40", "60"}},
		{"versions 1 to 3", chart{w: 290, h: 150, xInt: true}, []float64{1, 3}, []string{"1", "2", "3"}},
		{"five minutes ago to now", chart{w: 290, h: 150, xTime: true}, []float64{-299.5, 0}, []string{"-4m", "-2m", "now"}},
		{"a minute and a half", chart{w: 290, h: 150, xTime: true}, []float64{-90, -0.2}, []string{"-90s", "-60s", "-30s", "now"}},
		{"a single sample", chart{w: 290, h: 150, xTime: true}, []float64{-0.3}, []string{"now"}},
		{"eight seconds", chart{w: 290, h: 150, xTime: true}, []float64{-8, 0}, []string{"-5s", "now"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := label(tt.c, tt.x); !slices.Equal(got, tt.want) {
				t.Errorf("x labels %q, want %q", got, tt.want)
			}
		})
	}
}

// The legend never covers the title: it goes beside it when it fits and
// in rows below it otherwise, each entry inside the chart and clear of
// the others; the chart grows by the rows (26 arms named by letters).
func TestLegendClearsTheTitle(t *testing.T) {
	letters := make([]series, 26)
	for i := range letters {
		letters[i] = series{name: string(rune('a' + i)), colour: colour(i), x: []float64{0, 1}, y: []float64{0.5, 0.5}}
	}
	three := []series{{name: "edible"}, {name: "poisonous"}, {name: "unknown"}}
	for _, tt := range []struct {
		name     string
		title    string
		ss       []series
		wantRows int
	}{
		{"two series beside a short title", "per second", []series{{name: "decisions"}, {name: "rewards"}}, 0},
		{"three arms", "arm mix, last 10s", three, 1},
		{"26 arms", "arm mix, last 10s", letters, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const w = 290
			es, rows := layoutLegend(tt.title, w, tt.ss)
			if rows != tt.wantRows {
				t.Errorf("%d rows, want %d", rows, tt.wantRows)
			}
			titleEnd := 4 + titleCharW*float64(len(tt.title))
			for i, e := range es {
				right := e.x + 18 + legendCharW*float64(len(e.name))
				if e.x < 0 || right > w-padRight+1e-9 {
					t.Errorf("entry %q spans [%g, %g], outside the chart's [0, %d]", e.name, e.x, right, w-padRight)
				}
				if e.y < 16 && e.x < titleEnd {
					t.Errorf("entry %q at (%g, %g) covers the title, which ends at x %g", e.name, e.x, e.y, titleEnd)
				}
				if i > 0 && es[i-1].y == e.y && es[i-1].x+18+legendCharW*float64(len(es[i-1].name)) > e.x+1e-9 {
					t.Errorf("entries %q and %q overlap", es[i-1].name, e.name)
				}
			}
		})
	}
	c := chart{title: "arm mix, last 10s", w: 290, h: 150, xTime: true}
	svg := c.stacked(letters)
	if !strings.Contains(svg, `height="192"`) {
		t.Errorf("the 26-arm chart is %.120s..., want it 3 legend rows (42 px) taller than 150", svg)
	}
	seen := map[string]bool{}
	for i := range letters {
		if seen[colour(i)] {
			t.Errorf("arm %d's colour %s is taken", i, colour(i))
		}
		seen[colour(i)] = true
	}
}
