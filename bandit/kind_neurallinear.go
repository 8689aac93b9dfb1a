package bandit

import (
	"context"
	"fmt"
	mrand "math/rand/v2"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
)

// NeuralLinear is linear Thompson sampling (policy.Linear's exact
// Normal-inverse-gamma posterior per arm) on the last hidden layer's
// features of the network's MAP, rebuilt after every retraining
// (Riquelme, Tucker & Snoek 2018).
const NeuralLinear = spec.NeuralLinear

// neuralLinear is the decider of NeuralLinear.
type neuralLinear struct{ noFit }

func (neuralLinear) kind() PolicyKind { return NeuralLinear }

func (neuralLinear) caps(PolicyConfig) Capabilities {
	return Capabilities{Model: true, Network: true, MAP: true, Posterior: true, LinearHead: true, FitsAtMAP: true, FixedLikelihood: true, PosteriorInRows: true, Cost: 1}
}

func (neuralLinear) sampleKinds() []SampleKind { return []SampleKind{SampleExact} }

// choose decides with m.lin (policy.Linear) on the MAP's last hidden
// features of x.
// With arm features, the features of every arm's pair, one draw of the
// head scoring them all (linearArmThompson).
func (neuralLinear) choose(ctx context.Context, a *Agent, pd *policy.Decision, _ *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	p := a.predictor()
	phi := p.Features(nil, m.q.Mu, a.scoreInput(x))
	a.predictors.Put(p)
	if a.pairs != nil {
		return a.linearArmThompson(pd, m.lin, phi, excluded, rng)
	}
	return a.linearThompson(ctx, pd, m.lin, phi, excluded)
}

// rank is linearRanking on the network's features of x (of every arm's
// pair with arm features: linearArmRanking).
func (neuralLinear) rank(ctx context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, _ *mrand.Rand) (*ranking, error) {
	p := a.predictor()
	phi := p.Features(nil, m.q.Mu, a.scoreInput(x))
	a.predictors.Put(p)
	if a.pairs != nil {
		return a.linearArmRanking(m.lin, phi, excluded, k)
	}
	return a.linearRanking(ctx, m.lin, phi, excluded, k)
}

// fit sets m.lin, policy.Linear's exact posterior on the MAP's last
// hidden features of every row of lik (O(rows x features^2)). It is not
// persisted: load rebuilds it from the MAP and the rows.
func (neuralLinear) fit(a *Agent, m *model, lik *nn.Likelihood) error {
	h := a.arch.Layer(a.arch.NumLayers() - 1).In
	lin, err := policy.NewLinear(policy.LinearConfig{Arms: a.arch.Out(), Features: h, ProbabilitySamples: a.cfg.Policy.PropensitySamples},
		mrand.New(mrand.NewPCG(a.seed, uint64(m.version)^1<<59)))
	if err != nil {
		return err
	}
	view := lik.Data()
	x, arms, y := view.Rows()
	feat := nn.NewPredictor(a.arch, 256).Features(nil, m.q.Mu, x)
	for i, arm := range arms {
		if err := lin.Observe(context.Background(), feat[i*h:(i+1)*h], arm, y[i]); err != nil {
			return fmt.Errorf("neural-linear row %d: %w", i, err)
		}
	}
	m.lin = lin
	return nil
}

func (neuralLinear) status(*Agent, *model) *PosteriorStatus {
	return &PosteriorStatus{Kind: "neural-linear"}
}
