package bandit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/refinery-bandits/refinery/bandit"
)

// propensityAgent is a step-mode agent of kind on a three-arm toy bandit
// (three arms: mf-ts and diagonal laplace-ts then estimate their groups'
// probabilities from draws), trained on 20 rewarded decisions so that
// its posterior is still uncertain, and then told nothing more: its
// posterior is fixed. Its service is closed when the test ends.
func propensityAgent(t *testing.T, name string, cfg *bandit.Config) *bandit.Agent {
	t.Helper()
	ctx := context.Background()
	cfg.Arms = []string{"a", "b", "c"}
	a := stepAgent(t, 3, 5, cfg)
	env := rand.New(rand.NewPCG(7, 8))
	for i := range 20 {
		color := []string{"red", "blue"}[env.IntN(2)]
		raw, _ := json.Marshal(map[string]any{"color": color, "size": env.NormFloat64()})
		o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("train", i), Context: raw})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Reward(ctx, o.Decision.EventID, toyReward(color, a.Config().Arms[o.Decision.Arm])); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.TrainNow(ctx); err != nil {
		t.Fatal(err)
	}
	return a
}

// propensityKinds are the configurations of every policy kind, by a
// name that says which estimator it exercises.
func propensityKinds() map[string]*bandit.Config {
	out := map[string]*bandit.Config{}
	for _, k := range bandit.PolicyKinds() {
		out[string(k)] = smallConfig(k)
	}
	eps := 0.2
	out["eps-greedy"].Policy.Epsilon = &eps
	for name, c := range laplaceConfigs() {
		out[name] = c
	}
	delete(out, string(bandit.LaplaceTS)) // laplace-diagonal is it
	return out
}

// ownDrawBound is the least probability the estimator of prop may give
// the arm a decision chose: what the decision's own draw implies (one of
// prop.Groups groups, or of the OutputDraws+1 draws of its group), mixed
// with the uniform distribution as bandit.MinPropensity's floor does;
// for the exact rules and computations the floor itself (eps-greedy: eps/m).
func ownDrawBound(prop *bandit.Propensity, arms int, eps float64) float64 {
	f := prop.Floor
	mix := func(p float64) float64 { return (1-float64(arms)*f)*p + f }
	switch {
	case prop.Estimator == "exact":
		return eps / float64(arms)
	case prop.Estimator == "linear-posterior":
		return f
	case prop.OutputDraws > 0:
		return mix(1 / float64(prop.Groups*(prop.OutputDraws+1)))
	}
	return mix(1 / float64(prop.Groups))
}

// Every policy kind's logged propensities are the probabilities of the
// arms it then plays (issue 30, finding 1): on a fixed context and a
// fixed posterior, over 20,000 decisions, each arm's mean logged
// propensity equals its frequency. With p̂_i the logged propensity of
// the arm k in decision i and d_i = 1{arm_i = k} - p̂_i, E[d_i] = 0 when
// p̂ is unbiased for the probability the decision was drawn from; the
// tolerance is 4.5 standard errors of the mean of d (the binomial error
// of the frequency and the estimator's own, from the data) plus the
// floor's shift, at most m x 1e-4. No chosen arm's logged propensity is
// below what its own draw implies (ownDrawBound), and the exact ones
// (uniform, greedy, eps-greedy, linear-ts, neural-linear) log the same
// probabilities in every decision.
func TestLoggedPropensityIsTheFrequencyOfTheArm(t *testing.T) {
	const n = 20000
	ctx := context.Background()
	for name, cfg := range propensityKinds() {
		t.Run(name, func(t *testing.T) {
			eps := 0.0
			if cfg.Policy.Epsilon != nil {
				eps = *cfg.Policy.Epsilon
			}
			if cfg.Policy.Kind == bandit.Uniform {
				eps = 1
			}
			a := propensityAgent(t, name, cfg)
			raw := json.RawMessage(`{"color": "red", "size": 0.5}`)
			var sum, sum2, mean [3]float64
			var freq [3]float64
			below := 0
			var est string
			var first []float64
			for i := range n {
				o, err := a.Decide(ctx, bandit.DecideRequest{EventID: fmt.Sprint("e", i), Context: raw})
				if err != nil {
					t.Fatal(err)
				}
				d := o.Decision
				est = o.Propensity.Estimator
				if pr := o.Propensity; pr.Exact || est == "exact" {
					if pr.StdError != 0 {
						t.Fatalf("decision %d: exact propensities %+v state a standard error", i, *pr)
					}
				} else if want := 0.5 / math.Sqrt(float64(pr.Groups)); pr.StdError != want {
					t.Fatalf("decision %d: Monte Carlo propensities %+v, want std_error 1/(2 sqrt(groups)) = %g", i, *pr, want)
				}
				// The exact rules and computations give the same
				// probabilities at the same context and posterior.
				if est == "exact" || est == "linear-posterior" {
					if i == 0 {
						first = d.Propensities
					} else if !slices.Equal(first, d.Propensities) || !o.Propensity.Exact && est != "exact" {
						t.Fatalf("decision %d: %s propensities %v (%+v), the first decision's %v: not computed exactly", i, est, d.Propensities, *o.Propensity, first)
					}
				}
				if p, b := d.Propensities[d.Arm], ownDrawBound(o.Propensity, 3, eps); p < b*(1-1e-12) {
					if below++; below <= 3 {
						t.Errorf("decision %d: arm %d logged at %g, below the %g its own draw implies (%+v)", i, d.Arm, p, b, *o.Propensity)
					}
				}
				for k := range 3 {
					hit := 0.0
					if d.Arm == k {
						hit = 1
					}
					x := hit - d.Propensities[k]
					sum[k] += x
					sum2[k] += x * x
					mean[k] += d.Propensities[k] / n
					freq[k] += hit / n
				}
			}
			for k := range 3 {
				m := sum[k] / n
				se := math.Sqrt((sum2[k]/n - m*m) / n)
				if tol := 4.5*se + 3*bandit.MinPropensity; math.Abs(m) > tol {
					t.Errorf("arm %d: mean logged propensity %.4f, frequency %.4f over %d decisions: differ by %.4f, more than %.4f", k, mean[k], freq[k], n, m, tol)
				}
			}
			t.Logf("%s (%s): mean logged propensities %.4f, frequencies %.4f", name, est, mean, freq)
		})
	}
}
