package simulators

import (
	"strings"
	"testing"
)

func TestRegretAccumulatesAndThins(t *testing.T) {
	// A two-arm step where arm 0 is best in expectation but arm 1 paid
	// more this time (as when a poisonous mushroom is eaten and the coin
	// falls well).
	lucky := Step{Expected: []float64{0, -15}, Realized: []float64{0, 5}, Best: 0}
	r := NewRegret(2)
	steps := []struct {
		arm               int
		wantExp, wantReal float64
	}{
		{0, 0, 0},
		{1, 15, -5},
		{1, 15, -5},
	}
	for i, s := range steps {
		e, q := r.Record(lucky, s.arm)
		if e != s.wantExp || q != s.wantReal {
			t.Errorf("step %d: Record = %g, %g; want %g, %g", i+1, e, q, s.wantExp, s.wantReal)
		}
	}
	if e, q := r.Cumulative(); e != 30 || q != -10 || r.Steps() != 3 {
		t.Errorf("Cumulative() = %g, %g after %d steps; want 30, -10 after 3", e, q, r.Steps())
	}
	want := []RegretPoint{{2, 15, -5}, {3, 30, -10}}
	got := r.Points()
	if len(got) != len(want) {
		t.Fatalf("Points() = %v, want %v (every second step and the last)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Points()[%d] = %v, want %v", i, got[i], want[i])
		}
	}

	var b strings.Builder
	if err := r.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	wantCSV := "step,cumulative_expected_regret,cumulative_realized_regret\n2,15,-5\n3,30,-10\n"
	if b.String() != wantCSV {
		t.Errorf("WriteCSV wrote %q, want %q", b.String(), wantCSV)
	}
}

func TestRegretPanicsOnMisuse(t *testing.T) {
	tests := []struct {
		name string
		f    func()
	}{
		{"thinning by zero", func() { NewRegret(0) }},
		{"an arm out of range", func() { NewRegret(1).Record(Step{Expected: []float64{1}, Realized: []float64{1}}, 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r == nil || !strings.HasPrefix(r.(string), "simulators: ") {
					t.Errorf("recovered %v, want a panic starting with \"simulators: \"", r)
				}
			}()
			tt.f()
		})
	}
}
