package api

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
