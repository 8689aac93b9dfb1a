package bandit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// TestBackgroundCoresBoundTrainingAndRefinement: with one background
// core (what a 2-core machine gets by default), a retraining and a
// refined sample each wait while that core is taken, and decisions
// never do; once it is free the trainer publishes and the bank fills.
func TestBackgroundCoresBoundTrainingAndRefinement(t *testing.T) {
	ctx := context.Background()
	svc := bandit.NewService(store.NewMemory(), bandit.ServiceConfig{Workers: 2, BackgroundCores: 1, Seed: 1, Logger: testLogger(t)})
	defer svc.Close(ctx)
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	release := svc.HoldBackgroundCore()
	a, err := svc.Create(ctx, smallConfig(bandit.RefinedTS))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		color := []string{"red", "blue"}[i%2]
		start := time.Now()
		out, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(fmt.Sprintf(`{"color": %q, "size": 1}`, color))})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("decision %d took %v with the background core taken, want no wait", i, d)
		}
		if err := a.Reward(ctx, out.Decision.EventID, toyReward(color, a.Config().Arms[out.Decision.Arm])); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // the trainer (min_interval 0) and the workers would have run by now
	if st := a.Status(); st.ModelVersion != 0 || st.Bank.Produced != 0 {
		t.Fatalf("with the only background core taken: model version %d, %d refined samples; want 0 and 0 (training and refinement wait for the core)", st.ModelVersion, st.Bank.Produced)
	}
	release()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := a.Status()
		if st.ModelVersion > 0 && st.Bank.Produced > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30s after the background core was freed: model version %d, %d refined samples; want both > 0", st.ModelVersion, st.Bank.Produced)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
