package simulators

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestWheelExpectedRewardsAtKnownPoints(t *testing.T) {
	w, err := NewWheel(DefaultWheelConfig()) // δ = 0.95
	if err != nil {
		t.Fatal(err)
	}
	const r = 0.98 / math.Sqrt2 // ‖(r, r)‖ = 0.98 > δ
	tests := []struct {
		name string
		x    []float64
		want []float64
	}{
		{"the centre pays a1 best", []float64{0, 0}, []float64{1.2, 1, 1, 1, 1}},
		{"inside the ring every quadrant arm pays mu2", []float64{0.6, 0.6}, []float64{1.2, 1, 1, 1, 1}},
		{"outside, x1 > 0 and x2 > 0 is a2's", []float64{r, r}, []float64{1.2, 50, 1, 1, 1}},
		{"outside, x1 > 0 and x2 < 0 is a3's", []float64{r, -r}, []float64{1.2, 1, 50, 1, 1}},
		{"outside, x1 < 0 and x2 > 0 is a4's", []float64{-r, r}, []float64{1.2, 1, 1, 50, 1}},
		{"outside, x1 < 0 and x2 < 0 is a5's", []float64{-r, -r}, []float64{1.2, 1, 1, 1, 50}},
		{"the ring's edge belongs to the outside", []float64{0.95, 0}, []float64{1.2, 1, 50, 1, 1}},
		{"just inside the edge is inside", []float64{0.9499, 0}, []float64{1.2, 1, 1, 1, 1}},
		{"the positive x2 axis belongs to a4", []float64{0, 0.99}, []float64{1.2, 1, 1, 50, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := w.Expected(tt.x, nil)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Expected(%v) = %v, want %v", tt.x, got, tt.want)
			}
		})
	}
}

func TestWheelDrawsUniformlyFromTheDisk(t *testing.T) {
	w, err := NewWheel(WheelConfig{Delta: 0.5, Mu1: 1.2, Mu2: 1, Mu3: 50, Sigma: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 100000
	outside := 0
	var quadrant [5]int
	var noise, noise2 float64
	for range n {
		s := w.Next(rng)
		if norm := math.Hypot(s.X[0], s.X[1]); norm > 1 {
			t.Fatalf("context %v outside the unit disk", s.X)
		}
		if s.Best != argmax(s.Expected) {
			t.Fatalf("Best = %d, want %d", s.Best, argmax(s.Expected))
		}
		if s.Expected[s.Best] == 50 {
			outside++
			quadrant[s.Best]++
		}
		for a := range s.Expected {
			e := s.Realized[a] - s.Expected[a]
			noise += e
			noise2 += e * e
		}
	}
	// P(‖x‖ ≥ δ) = 1 − δ² for x uniform on the disk; allow 5 standard
	// errors.
	p := 1 - 0.5*0.5
	if got, se := float64(outside)/n, math.Sqrt(p*(1-p)/n); math.Abs(got-p) > 5*se {
		t.Errorf("fraction outside the ring = %.4f, want %.4f ± %.4f", got, p, 5*se)
	}
	for a := 1; a <= 4; a++ {
		q := 0.25
		if got, se := float64(quadrant[a])/float64(outside), math.Sqrt(q*(1-q)/float64(outside)); math.Abs(got-q) > 5*se {
			t.Errorf("share of the outside owned by arm %d = %.4f, want %.4f ± %.4f", a, got, q, 5*se)
		}
	}
	// The noise is N(0, σ²) with σ = 0.01: its mean's standard error is
	// σ/√(5n) and the sample standard deviation is within 1% of σ.
	m := noise / (5 * n)
	sd := math.Sqrt(noise2/(5*n) - m*m)
	if math.Abs(m) > 5*0.01/math.Sqrt(5*n) || math.Abs(sd-0.01) > 0.0001 {
		t.Errorf("noise mean %.2e, sd %.5f; want 0 and 0.01", m, sd)
	}
}

func TestNewWheelValidates(t *testing.T) {
	tests := []struct {
		name string
		cfg  func(*WheelConfig)
	}{
		{"delta above 1 is refused", func(c *WheelConfig) { c.Delta = 1.5 }},
		{"a negative delta is refused", func(c *WheelConfig) { c.Delta = -0.1 }},
		{"a negative sigma is refused", func(c *WheelConfig) { c.Sigma = -1 }},
		{"a NaN mean is refused", func(c *WheelConfig) { c.Mu3 = math.NaN() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultWheelConfig()
			tt.cfg(&cfg)
			if _, err := NewWheel(cfg); err == nil {
				t.Errorf("NewWheel(%+v) succeeded, want an error", cfg)
			}
		})
	}
}
