package bandit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// heavyConfig is an mf-ts bandit of arms arms, one hidden layer of
// hidden units and one numeric input, deciding with propensity draws
// (policy.samples 1): issue 31, finding 4's heaviest decision is
// heavyConfig(100, 240, 10000).
func heavyConfig(arms, hidden, draws int) *bandit.Config {
	cfg := smallConfig(bandit.MeanFieldTS)
	cfg.Arms = nil
	for i := range arms {
		cfg.Arms = append(cfg.Arms, fmt.Sprintf("a%d", i))
	}
	cfg.Features = []bandit.Feature{{Name: "size", Type: bandit.Numeric}}
	cfg.Model.Hidden = []int{hidden}
	cfg.Policy.Samples = 1
	cfg.Policy.PropensitySamples = draws
	return cfg
}

// BenchmarkHeaviestDecision measures one mf-ts decision (time, bytes and
// allocations) at sizes the older budgets (MaxDecisionCost,
// MaxDecisionFloats) allow, the heaviest first, and reports as
// "allowed" whether DecisionBudget (MaxSampledCost, MaxSampledFloats)
// allows a new bandit of that size: `make bench-decision-cost`, figures in
// bench/decision-cost.md.
func BenchmarkHeaviestDecision(b *testing.B) {
	for _, sz := range []struct{ arms, hidden, draws int }{
		{100, 240, 10000}, // issue 31, finding 4
		{100, 240, 1000},
		{100, 240, 200}, // at MaxSampledCost
		{100, 240, 100},
		{10, 100, 1000},
		{2, 100, 32}, // about the defaults
	} {
		b.Run(fmt.Sprintf("arms=%d/hidden=%d/draws=%d", sz.arms, sz.hidden, sz.draws), func(b *testing.B) {
			cfg := heavyConfig(sz.arms, sz.hidden, sz.draws)
			cfg.Name = "heavy"
			bandit.SetDefaults(cfg)
			if err := bandit.Validate(cfg); err != nil {
				b.Skipf("refused by the older budgets: %v", err)
			}
			allowed := 1.0
			if bandit.DecisionBudget(cfg) != nil {
				allowed = 0
			}
			ctx := context.Background()
			// Stored as a bandit created before the budgets: it loads.
			st := store.NewMemory()
			raw, err := json.Marshal(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if err := st.CreateBandit(ctx, &bandit.Bandit{Name: cfg.Name, Config: raw}); err != nil {
				b.Fatal(err)
			}
			svc := bandit.NewService(st, bandit.ServiceConfig{Workers: 1, Seed: 1})
			defer svc.Close(ctx)
			if err := svc.Load(ctx); err != nil {
				b.Fatal(err)
			}
			a, err := svc.Agent(cfg.Name)
			if err != nil {
				b.Fatal(err)
			}
			req := bandit.DecideRequest{Context: json.RawMessage(`{"size": 1}`)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Decide(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(allowed, "allowed")
		})
	}
}
