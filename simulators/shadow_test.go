package simulators_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	mrand "math/rand/v2"
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

// cascadeAttraction is the click probability of each arm of the cascade
// model of TestEstimateShadowOfARanking: the user reads the slots top
// down and clicks (reward 1) the first arm that attracts them, reading no
// further.
var cascadeAttraction = []float64{1, 0.5, 0.4, 0.3}

// uniformCascadeValue is the mean reward per slot of a uniformly random
// ranking of k of the arms under the cascade model, by brute force over
// every ordered choice of k arms: slot j pays attr(a_j) Π_{i<j} (1 - attr(a_i)).
func uniformCascadeValue(k int) float64 {
	var sum float64
	var n int
	var walk func(used []bool, depth int, reach, total float64)
	walk = func(used []bool, depth int, reach, total float64) {
		if depth == k {
			sum += total / float64(k)
			n++
			return
		}
		for b, p := range cascadeAttraction {
			if used[b] {
				continue
			}
			used[b] = true
			walk(used, depth+1, reach*(1-p), total+reach*p)
			used[b] = false
		}
	}
	walk(make([]bool, len(cascadeAttraction)), 0, 1, 0)
	return sum / float64(n)
}

// TestEstimateShadowOfARanking: a bandit ranks 3 of 4 arms by eps-greedy
// (epsilon 0.3, learning as it goes) with a uniformly random candidate,
// on a cascade model whose slot j pays only when no slot above was
// clicked, so that a slot's value depends on the arms above it. On 20
// logs of 700 rankings (seeds 1 to 20), the candidate's estimate over
// each log's newest ShadowWindow slots must be its value, known by brute
// force (uniformCascadeValue): their mean within 3 standard errors of
// the mean (from the 20 estimates' spread), and the 95% interval of at
// least 16 of them covering it (19 expected; 15 or fewer has probability
// 0.003). Weighing each slot by the candidate's probability given slots
// above other than the live ones estimates a page the candidate does not
// show (the live arms above, the candidate's below): here the live
// policy soon puts the arm that is always clicked first, leaving the
// slots below nothing to pay.
func TestEstimateShadowOfARanking(t *testing.T) {
	const logs = 20
	want := uniformCascadeValue(3)
	var sum, sum2 float64
	covered := 0
	for seed := range uint64(logs) {
		est := rankedShadowLog(t, seed+1)
		v := est.Candidate.Value
		sum += v
		sum2 += v * v
		if est.Candidate.Lo <= want && want <= est.Candidate.Hi {
			covered++
		}
	}
	mean := sum / logs
	se := math.Sqrt((sum2/logs - mean*mean) / (logs - 1))
	t.Logf("the candidate's estimate: mean %.4f (se %.4f) over %d logs, truth %.4f; intervals covering it %d of %d", mean, se, logs, want, covered, logs)
	if math.Abs(mean-want) > 3*se || covered < 16 {
		t.Errorf("the uniform candidate's estimates average %.4f (se %.4f), %d of %d intervals covering its value %.4f; want within 3 se and at least 16",
			mean, se, covered, logs, want)
	}
}

// rankedShadowLog plays 700 rankings of TestEstimateShadowOfARanking on
// the cascade model with seed and returns EstimateShadow of the log.
func rankedShadowLog(t *testing.T, seed uint64) *bandit.ShadowEstimate {
	t.Helper()
	const k, requests = 3, 700 // 2,100 slots, the newest ShadowWindow of them estimated
	ctx := context.Background()
	st := store.NewMemory()
	clock := bandit.NewManualClock(time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC))
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: seed, Step: &bandit.StepConfig{Clock: clock, TrainEvery: 30}})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	eps := 0.3
	cfg := &bandit.Config{
		Name:     "page",
		Arms:     []string{"a", "b", "c", "d"},
		Features: []bandit.Feature{{Name: "x", Type: bandit.Numeric}},
		Policy:   bandit.PolicyConfig{Kind: bandit.EpsGreedy, Epsilon: &eps},
		Model:    bandit.ModelConfig{Hidden: []int{4}},
		Training: bandit.TrainingConfig{Iterations: 50, IterationsPerReward: 50},
		Shadow:   &bandit.ShadowConfig{Policy: bandit.PolicyConfig{Kind: bandit.Uniform}},
	}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	env := mrand.New(mrand.NewPCG(seed, 1))
	for range requests {
		outs, err := a.Rank(ctx, bandit.RankRequest{Context: json.RawMessage(`{"x": 0}`), Slots: k})
		if err != nil {
			t.Fatal(err)
		}
		clicked := false
		for _, o := range outs {
			r := 0.0
			if !clicked && env.Float64() < cascadeAttraction[o.Decision.Arm] {
				r, clicked = 1, true
			}
			if err := a.Reward(ctx, o.Decision.EventID, r); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(time.Millisecond)
	}
	est, err := simulators.EstimateShadow(ctx, st, "page", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if est.Candidate == nil || est.Live == nil || est.Decisions != simulators.ShadowWindow {
		t.Fatalf("seed %d: EstimateShadow = %+v, want an estimate of both policies over %d slots", seed, est, simulators.ShadowWindow)
	}
	return est
}
