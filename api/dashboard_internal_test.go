package api

import (
	"slices"
	"strings"
	"testing"
	"time"
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
