package bandit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// TestDecisionBudget: issue 31, finding 4's configuration (mf-ts, 100
// arms, a hidden layer of 240, 10,000 propensity draws), valid under the
// older budgets, is refused at creation naming policy.propensity_samples,
// and so is a PATCH that makes a bandit's decisions heavier past the
// budget; one just within the budgets is created; a bandit stored before
// the budgets that exceeds them still loads, decides and takes a PATCH
// that does not make it heavier.
func TestDecisionBudget(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: testLogger(t)})
	if err := svc.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer svc.Close(ctx)
	refused := func(t *testing.T, err error) {
		t.Helper()
		var ve *bandit.ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) == 0 || ve.Errors[0].Field != "policy.propensity_samples" {
			t.Fatalf("err = %v, want a validation error naming policy.propensity_samples", err)
		}
	}
	lastLayer := func(c *bandit.Config) { c.Policy.Kind = bandit.LaplaceTS; c.Policy.Laplace = "last-layer" }
	flow := func(c *bandit.Config) { c.Policy.Kind = bandit.FlowTS }
	for _, tc := range []struct {
		name                string
		arms, hidden, draws int
		samples             int
		ok                  bool
		kind                func(*bandit.Config) // nil: mf-ts
	}{
		{"finding 4's heaviest decision is refused", 100, 240, 10000, 1, false, nil},
		{"ten times fewer draws are still refused", 100, 240, 1000, 1, false, nil},
		{"draws x parameters just within the budget are accepted", 100, 240, 200, 1, true, nil},
		{"samples count as draws", 100, 240, 100, 3, false, nil},
		{"the defaults on a small bandit are accepted", 2, 100, 32, 3, true, nil},
		// draws x arms x 101^2: 2.45e8 (the older budget's most) and 9.8e7.
		{"the last-layer Laplace's heaviest older decision is refused", 100, 100, 240, 1, false, lastLayer},
		{"flow-ts's heaviest older decision is refused", 100, 100, 240, 1, false, flow},
		{"the last-layer Laplace's defaults on 100 arms are accepted", 100, 100, 32, 3, true, lastLayer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := heavyConfig(tc.arms, tc.hidden, tc.draws)
			if tc.kind != nil {
				tc.kind(cfg)
			}
			cfg.Policy.Samples = tc.samples
			cfg.Name = fmt.Sprintf("b%d-%d-%d-%d-%s", tc.arms, tc.hidden, tc.draws, tc.samples, cfg.Policy.Kind)
			_, err := svc.Create(ctx, cfg)
			if tc.ok && err != nil {
				t.Fatalf("Create: %v, want it created", err)
			}
			if !tc.ok {
				refused(t, err)
			}
		})
	}

	// A bandit stored before the budgets.
	old := heavyConfig(100, 240, 1000)
	old.Name = "old"
	bandit.SetDefaults(old)
	if err := bandit.Validate(old); err != nil {
		t.Fatalf("the old configuration is invalid under Validate: %v", err)
	}
	raw, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBandit(ctx, &bandit.Bandit{Name: "old", Config: raw}); err != nil {
		t.Fatal(err)
	}
	svc2 := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1, Logger: testLogger(t)})
	if err := svc2.Load(ctx); err != nil {
		t.Fatalf("loading a bandit stored before the budgets: %v", err)
	}
	defer svc2.Close(ctx)
	a, err := svc2.Agent("old")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Decide(ctx, bandit.DecideRequest{Context: json.RawMessage(`{"size": 1}`)}); err != nil {
		t.Fatalf("a decision of the old bandit: %v", err)
	}
	if _, _, err := svc2.Update(ctx, "old", &bandit.Patch{Policy: json.RawMessage(`{"propensity_samples": 500}`)}); err != nil {
		t.Fatalf("a PATCH that makes the old bandit lighter: %v", err)
	}
	_, _, err = svc2.Update(ctx, "old", &bandit.Patch{Policy: json.RawMessage(`{"propensity_samples": 2000}`)})
	refused(t, err)
}
