package simulators_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
	"github.com/refinery-bandits/refinery/store"
)

// TestEstimateShadowIsSNIPS: on a log of four rewarded decisions with the
// shadow's probabilities (and one without a reward, one without a
// shadow choice, both left out), EstimateShadow is SNIPS computed by
// hand: the candidate's Σ w r / Σ w with w = π/μ of the logged arm, the
// live policy's the mean reward.
func TestEstimateShadowIsSNIPS(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	if err := st.CreateBandit(ctx, &bandit.Bandit{Name: "b", Config: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	// arm, live propensities, shadow propensities, reward (NaN: none).
	rows := []struct {
		arm    int
		mu, pi []float64
		r      float64
	}{
		{0, []float64{0.5, 0.5}, []float64{0.9, 0.1}, 1},
		{1, []float64{0.25, 0.75}, []float64{0.5, 0.5}, 0},
		{1, []float64{0.2, 0.8}, []float64{0.2, 0.8}, 1},
		{0, []float64{0.8, 0.2}, []float64{0.1, 0.9}, 0},
		{0, []float64{0.5, 0.5}, []float64{0.5, 0.5}, math.NaN()},
		{0, []float64{0.5, 0.5}, nil, 1},
	}
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for i, r := range rows {
		id := fmt.Sprint("e", i)
		d := &bandit.Decision{Bandit: "b", EventID: id, Context: json.RawMessage(`{}`), Arm: r.arm, Propensities: r.mu, ShadowPropensities: r.pi,
			CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		if _, _, err := st.InsertDecision(ctx, d); err != nil {
			t.Fatal(err)
		}
		if !math.IsNaN(r.r) {
			if err := st.InsertReward(ctx, &bandit.Reward{Bandit: "b", EventID: id, Value: r.r}); err != nil {
				t.Fatal(err)
			}
		}
	}
	est, err := simulators.EstimateShadow(ctx, st, "b", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// w = 0.9/0.5, 0.5/0.75, 0.8/0.8, 0.1/0.8 on rewards 1, 0, 1, 0.
	w := []float64{1.8, 2.0 / 3, 1, 0.125}
	want := (w[0] + w[2]) / (w[0] + w[1] + w[2] + w[3])
	const tol = 1e-12 // the same sums in another order
	if est.Decisions != 4 || est.Scanned != 6 || est.Candidate == nil || math.Abs(est.Candidate.Value-want) > tol ||
		est.Live == nil || est.Live.Value != 0.5 || !(est.Candidate.Lo < want && want < est.Candidate.Hi) {
		t.Errorf("EstimateShadow = %+v (candidate %+v, live %+v), want 4 of 6 decisions, the candidate at %g, the live policy at 0.5",
			est, est.Candidate, est.Live, want)
	}

	// Since the third decision (a candidate set then): the third and
	// fourth rewarded rows only, w = 1 and 0.125 on rewards 1 and 0.
	est, err = simulators.EstimateShadow(ctx, st, "b", t0.Add(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if want := 1 / 1.125; est.Decisions != 2 || est.Scanned != 4 || est.Candidate == nil || math.Abs(est.Candidate.Value-want) > tol {
		t.Errorf("EstimateShadow since the third decision = %+v (candidate %+v), want 2 of 4 decisions, the candidate at %g", est, est.Candidate, want)
	}
}
