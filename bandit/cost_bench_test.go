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
			benchmarkDecision(b, cfg)
			b.ReportMetric(allowed, "allowed")
		})
	}
}

// benchmarkDecision measures Agent.Decide of cfg's bandit, stored as a
// bandit created before the budgets (it loads whatever its size) and
// loaded with no reward (version 0).
func benchmarkDecision(b *testing.B, cfg *bandit.Config) {
	ctx := context.Background()
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
}

// BenchmarkHeaviestLastLayerDecision measures one decision of the
// policies whose budget counts last-layer inputs instead of parameters
// (laplace-ts "last-layer" and flow-ts: draws x arms x (inputs+1)^2 within
// MaxDecisionCost; neural-linear: propensity_samples x arms x
// (inputs+1)^2 within MaxLinearCost), at 100 arms and a last hidden
// layer of 100 with the most draws those budgets allow (the first size
// of each that Validate accepts), and one of 96 draws (the draws of
// policy.samples 3 x propensity_samples 32, the defaults), with "allowed"
// as in BenchmarkHeaviestDecision: `make bench-decision-cost`,
// bench/decision-cost.md.
func BenchmarkHeaviestLastLayerDecision(b *testing.B) {
	for _, kind := range []struct {
		name string
		set  func(*bandit.Config)
	}{
		{"laplace-ts-last-layer", func(c *bandit.Config) { c.Policy.Kind = bandit.LaplaceTS; c.Policy.Laplace = "last-layer" }},
		{"flow-ts", func(c *bandit.Config) { c.Policy.Kind = bandit.FlowTS }},
		{"neural-linear", func(c *bandit.Config) { c.Policy.Kind = bandit.NeuralLinear }},
	} {
		for _, draws := range []int{10000, 1000, 240, 96} {
			cfg := heavyConfig(100, 100, draws)
			cfg.Name = "heavy"
			kind.set(cfg)
			bandit.SetDefaults(cfg)
			if bandit.Validate(cfg) != nil {
				continue // past the budget: the next size down
			}
			b.Run(fmt.Sprintf("%s/arms=100/hidden=100/draws=%d", kind.name, draws), func(b *testing.B) {
				allowed := 1.0
				if bandit.DecisionBudget(cfg) != nil {
					allowed = 0
				}
				benchmarkDecision(b, cfg)
				b.ReportMetric(allowed, "allowed")
			})
			if draws != 96 {
				cfg := heavyConfig(100, 100, 96)
				cfg.Name = "heavy"
				kind.set(cfg)
				bandit.SetDefaults(cfg)
				b.Run(fmt.Sprintf("%s/arms=100/hidden=100/draws=96", kind.name), func(b *testing.B) {
					allowed := 1.0
					if bandit.DecisionBudget(cfg) != nil {
						allowed = 0
					}
					benchmarkDecision(b, cfg)
					b.ReportMetric(allowed, "allowed")
				})
			}
			break
		}
	}
}

// BenchmarkArmFeatureDecision measures one decision of a bandit with arm
// features (issue 32), whose every posterior draw is a forward pass over
// all arms' pairs: heavyConfig's mf-ts, refined-ts (on mean-field draws
// at version 0) and linear-ts with each arm described by one numeric
// arm feature, at 100 arms and a hidden layer of 100, on the one input
// of heavyConfig and on 97 (96 optional numeric features more, absent
// from the request): at 97 inputs and 100 draws the forward passes are
// draws x parameters x arms = 1.0e8 multiply-adds, MaxPairCost. With
// "allowed" as in BenchmarkHeaviestDecision: `make bench-decision-cost`.
func BenchmarkArmFeatureDecision(b *testing.B) {
	for _, sz := range []struct {
		kind          bandit.PolicyKind
		inputs, draws int
	}{
		{bandit.MeanFieldTS, 1, 32}, {bandit.MeanFieldTS, 1, 100}, {bandit.MeanFieldTS, 97, 32}, {bandit.MeanFieldTS, 97, 100}, {bandit.MeanFieldTS, 97, 200},
		{bandit.RefinedTS, 1, 32}, {bandit.RefinedTS, 97, 100},
		{bandit.LinearTS, 1, 32}, {bandit.LinearTS, 1, 100},
	} {
		kind, draws := sz.kind, sz.draws
		{
			b.Run(fmt.Sprintf("%s/arms=100/hidden=100/inputs=%d/draws=%d", kind, sz.inputs, draws), func(b *testing.B) {
				cfg := heavyConfig(100, 100, draws)
				cfg.Name = "heavy"
				cfg.Policy.Kind = kind
				for i := range sz.inputs - 1 {
					cfg.Features = append(cfg.Features, bandit.Feature{Name: fmt.Sprint("x", i), Type: bandit.Numeric, Optional: true})
				}
				cfg.ArmFeatures = []bandit.Feature{{Name: "w", Type: bandit.Numeric}}
				cfg.ArmValues = map[string]json.RawMessage{}
				for i, a := range cfg.Arms {
					cfg.ArmValues[a] = json.RawMessage(fmt.Sprintf(`{"w": %g}`, float64(i)/100))
				}
				bandit.SetDefaults(cfg)
				if err := bandit.Validate(cfg); err != nil {
					b.Skipf("refused: %v", err)
				}
				allowed := 1.0
				if bandit.DecisionBudget(cfg) != nil {
					allowed = 0
				}
				benchmarkDecision(b, cfg)
				b.ReportMetric(allowed, "allowed")
			})
		}
	}
}
