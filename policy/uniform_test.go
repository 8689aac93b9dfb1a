package policy

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUniformProbabilitiesAndExclusion(t *testing.T) {
	tests := []struct {
		name      string
		excluded  []bool
		wantProbs []float64
	}{
		{"no exclusions give every arm a quarter", nil, []float64{0.25, 0.25, 0.25, 0.25}},
		{"an all-false list is no exclusion", []bool{false, false, false, false}, []float64{0.25, 0.25, 0.25, 0.25}},
		{"two excluded arms leave a half each", []bool{true, false, true, false}, []float64{0, 0.5, 0, 0.5}},
		{"one allowed arm is certain", []bool{true, true, false, true}, []float64{0, 0, 1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := NewUniform(4, 2, rand.New(rand.NewPCG(1, 1)))
			if err != nil {
				t.Fatal(err)
			}
			const n = 40000
			var counts [4]int
			for range n {
				d, err := u.Decide(context.Background(), []float64{1, 2}, tt.excluded)
				if err != nil {
					t.Fatal(err)
				}
				if d.Sample != SampleNone || len(d.Scores) != 4 {
					t.Fatalf("Sample %q, %d scores; want %q and 4", d.Sample, len(d.Scores), SampleNone)
				}
				for a, p := range d.Probabilities {
					if p != tt.wantProbs[a] {
						t.Fatalf("Probabilities = %v, want %v", d.Probabilities, tt.wantProbs)
					}
				}
				counts[d.Arm]++
			}
			// The choices follow the stated probabilities: 5 binomial
			// standard errors (a fixed seed, so this never flakes).
			for a, c := range counts {
				p := tt.wantProbs[a]
				if got, se := float64(c)/n, math.Sqrt(p*(1-p)/n); math.Abs(got-p) > 5*se {
					t.Errorf("arm %d chosen %.4f of the time, want %.4f", a, got, p)
				}
			}
		})
	}
}

func TestUniformRejectsBadInput(t *testing.T) {
	u, err := NewUniform(3, 2, rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"excluding every arm is ErrAllExcluded", func() error { _, err := u.Decide(ctx, []float64{0, 0}, []bool{true, true, true}); return err }(), "every arm is excluded"},
		{"a short context is refused", func() error { _, err := u.Decide(ctx, []float64{0}, nil); return err }(), "1 features, want 2"},
		{"a NaN context is refused", func() error { _, err := u.Decide(ctx, []float64{0, math.NaN()}, nil); return err }(), "NaN"},
		{"a wrong-length exclusion list is refused", func() error { _, err := u.Decide(ctx, []float64{0, 0}, []bool{true}); return err }(), "1 exclusion flags for 3 arms"},
		{"observing an unknown arm is refused", u.Observe(ctx, []float64{0, 0}, 3, 1), "arm 3 out of range [0, 3)"},
		{"observing an infinite reward is refused", u.Observe(ctx, []float64{0, 0}, 0, math.Inf(1)), "reward +Inf is not finite"},
		{"observing a long context is refused", u.Observe(ctx, []float64{0, 0, 0}, 0, 1), "3 features, want 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", tt.err, tt.want)
			}
		})
	}
	if _, err := u.Decide(ctx, []float64{0, 0}, []bool{true, true, true}); !errors.Is(err, ErrAllExcluded) {
		t.Errorf("errors.Is(%v, ErrAllExcluded) = false", err)
	}
	if _, err := NewUniform(0, 2, rand.New(rand.NewPCG(1, 1))); err == nil {
		t.Error("NewUniform(0 arms) succeeded, want an error")
	}
}
