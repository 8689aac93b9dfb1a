package bandit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// waitRows waits up to 20 s for a's published posterior to have seen
// rows rows.
func waitRows(t *testing.T, a *bandit.Agent, rows int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for a.Status().TrainedRows < rows {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the posterior has seen %d rows, want %d", a.Status().TrainedRows, rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShadowTrainsBesideTheLiveAgent: a bandit with a candidate (greedy
// beside a live eps-greedy) runs a second agent, asked at every decision
// (its choice and probabilities logged with it), which learns the toy
// problem from the live policy's rewards; the snapshots stored are the
// live policy's only; a PATCH of the candidate keeps the live agent,
// a restart builds the candidate again, and a PATCH removes it (no
// shadow choice logged after).
func TestShadowTrainsBesideTheLiveAgent(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: testLogger(t)})
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := smallConfig(bandit.EpsGreedy)
	tc := cfg.Training
	tc.Iterations, tc.IterationsPerReward = 2000, 2000 // one retraining may see every row
	cfg.Shadow = &bandit.ShadowConfig{Policy: bandit.PolicyConfig{Kind: bandit.Greedy}, Model: cfg.Model, Training: tc}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Shadow() == nil || a.Shadow().Config().Policy.Kind != bandit.Greedy {
		t.Fatalf("the candidate agent is %v, want a greedy one", a.Shadow())
	}
	const n = 200
	playToy(t, a, n, 1)
	recs, err := st.Decisions(ctx, "toy", bandit.DecisionQuery{Limit: 2 * n})
	if err != nil || len(recs) != n {
		t.Fatalf("the log has %d decisions (%v), want %d", len(recs), err, n)
	}
	for i, d := range recs {
		if p := d.ShadowPropensities; len(p) != 2 || math.Abs(p[0]+p[1]-1) > 1e-9 || p[d.ShadowArm] <= 0 {
			t.Fatalf("decision %d logged the shadow arm %d, propensities %v; want a distribution over 2 arms giving the arm > 0", i, d.ShadowArm, p)
		}
	}
	waitRows(t, a.Shadow(), n)
	for _, tc := range []struct {
		color string
		arm   int
	}{{"red", 0}, {"blue", 1}} {
		x, err := bandit.NewEncoder(cfg.Features).Encode(json.RawMessage(fmt.Sprintf(`{"color": %q, "size": 3}`, tc.color)))
		if err != nil {
			t.Fatal(err)
		}
		pi, _, err := a.Shadow().Probabilities(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		if pi[tc.arm] != 1 {
			t.Errorf("the trained greedy candidate on %s: probabilities %v, want arm %d surely", tc.color, pi, tc.arm)
		}
	}
	liveVersion := a.Status().ModelVersion

	patch, err := bandit.ParsePatch([]byte(`{"shadow": {"policy": {"kind": "uniform"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := svc.Update(ctx, "toy", patch)
	if err != nil {
		t.Fatal(err)
	}
	if b != a || a.Status().ModelVersion < liveVersion || a.Shadow().Config().Policy.Kind != bandit.Uniform || a.Config().Shadow.Policy.Kind != bandit.Uniform {
		t.Fatalf("after a PATCH of the shadow: agent replaced %v, version %d (was %d), shadow %+v; want the same agent with a uniform candidate",
			b != a, a.Status().ModelVersion, liveVersion, a.Config().Shadow)
	}
	out, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if p := out.Decision.ShadowPropensities; len(p) != 2 || p[0] != 0.5 || p[1] != 0.5 {
		t.Errorf("the uniform candidate's propensities %v, want [0.5 0.5]", p)
	}

	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	snap, err := st.LatestSnapshot(ctx, "toy")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct{ Kind string }
	if err := json.Unmarshal(snap.Metrics, &meta); err != nil || meta.Kind != string(bandit.EpsGreedy) {
		t.Errorf("the latest snapshot is of %q (%v), want the live eps-greedy's: the candidate persists none", meta.Kind, err)
	}

	// A restart builds the candidate again and trains it on every
	// stored reward; removing it leaves decisions without its choice.
	svc2, a2 := reopen(t, st, bandit.ServiceConfig{Workers: 1, Seed: 2, Logger: testLogger(t)})
	if a2.Shadow() == nil || a2.Shadow().Config().Policy.Kind != bandit.Uniform {
		t.Fatalf("after a restart the candidate is %v, want the uniform one", a2.Shadow())
	}
	patch, err = bandit.ParsePatch([]byte(`{"shadow": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc2.Update(ctx, "toy", patch); err != nil {
		t.Fatal(err)
	}
	out, err = a2.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Shadow() != nil || a2.Config().Shadow != nil || out.Decision.ShadowPropensities != nil {
		t.Errorf("after removing the candidate: agent %v, config %+v, decision's shadow propensities %v; want none", a2.Shadow(), a2.Config().Shadow, out.Decision.ShadowPropensities)
	}
}

// TestPromoteRefinedShadow: promoting a refined-ts candidate beside a
// live eps-greedy makes the bandit refined-ts on the candidate's trained
// posterior (its means, standard deviations, prior variances and noise,
// stored as the bandit's newest snapshot version), which then decides on
// samples refined from it, trains on new rewards and is what a restart
// loads. In step mode, so that nothing trains between the reads.
func TestPromoteRefinedShadow(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	step := &bandit.StepConfig{TrainEvery: 10}
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Logger: testLogger(t), Step: step})
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	cfg := smallConfig(bandit.EpsGreedy)
	cand := smallConfig(bandit.RefinedTS)
	cfg.Shadow = &bandit.ShadowConfig{Policy: cand.Policy, Model: cand.Model, Training: cand.Training, Refinement: cand.Refinement}
	a, err := svc.Create(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	playToy(t, a, n, 1)
	learned := a.Shadow().Posterior()
	if a.Shadow().Status().TrainedRows != n || learned.Version == 0 {
		t.Fatalf("the refined-ts candidate trained on %d rows (version %d), want %d", a.Shadow().Status().TrainedRows, learned.Version, n)
	}
	liveVersion := a.Status().ModelVersion

	promote := true
	if _, _, err := svc.Update(ctx, "toy", &bandit.Patch{PromoteShadow: &promote}); err != nil {
		t.Fatal(err)
	}
	p, err := svc.Agent("toy")
	if err != nil {
		t.Fatal(err)
	}
	samePosterior := func(what string, got bandit.PosteriorOf) {
		t.Helper()
		if got.Version <= liveVersion || !slices.Equal(got.Mu, learned.Mu) || !slices.Equal(got.Sigma, learned.Sigma) ||
			!slices.Equal(got.PriorVar, learned.PriorVar) || !slices.Equal(got.Noise, learned.Noise) {
			t.Fatalf("%s: posterior version %d (noise %v), want a version after the live policy's %d with the candidate's means, deviations, prior variances and noise (%v)",
				what, got.Version, got.Noise, liveVersion, learned.Noise)
		}
	}
	if p.Config().Policy.Kind != bandit.RefinedTS || p.Config().Shadow != nil || p.Shadow() != nil {
		t.Fatalf("after promoting: policy %s, shadow %+v; want refined-ts without a shadow", p.Config().Policy.Kind, p.Config().Shadow)
	}
	promoted := p.Posterior()
	samePosterior("the promoted agent", promoted)
	out, err := p.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Decision; d.Policy != string(bandit.RefinedTS) || d.Sample != bandit.SampleRefined || d.ModelVersion != promoted.Version {
		t.Errorf("a decision after promoting: policy %s, sample %s, version %d; want refined-ts on a refined sample of version %d", d.Policy, d.Sample, d.ModelVersion, promoted.Version)
	}

	// A restart loads the promoted posterior (the snapshot promoting
	// stored), then the agent trains on.
	if err := svc.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, p2 := reopen(t, st, bandit.ServiceConfig{Seed: 2, Logger: testLogger(t), Step: step})
	samePosterior("after a restart", p2.Posterior())
	playToy(t, p2, 20, 2)
	if v := p2.Posterior().Version; v <= promoted.Version {
		t.Errorf("after 20 more rewards the promoted bandit is at version %d, want past %d", v, promoted.Version)
	}
}

// BenchmarkShadowDecision measures what asking a candidate adds to a
// decision: an mf-ts bandit (smallConfig, in-memory store, trained on
// 100 rewards) without a shadow and with an mf-ts one of the same
// model.
func BenchmarkShadowDecision(b *testing.B) {
	for _, tc := range []struct {
		name   string
		shadow bool
	}{{"without a shadow", false}, {"with an mf-ts shadow", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Workers: 1, Seed: 1})
			if err := svc.Load(ctx); err != nil {
				b.Fatal(err)
			}
			defer svc.Close(ctx)
			cfg := smallConfig(bandit.MeanFieldTS)
			if tc.shadow {
				cfg.Shadow = &bandit.ShadowConfig{Policy: bandit.PolicyConfig{Kind: bandit.MeanFieldTS}, Model: cfg.Model, Training: cfg.Training}
			}
			a, err := svc.Create(ctx, cfg)
			if err != nil {
				b.Fatal(err)
			}
			const n = 100
			playToy(b, a, n, 1)
			for a.Status().TrainedRows < n || (tc.shadow && a.Shadow().Status().TrainedRows < n) {
				time.Sleep(time.Millisecond)
			}
			req := bandit.DecideRequest{Context: json.RawMessage(`{"color": "red", "size": 3}`)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Decide(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
