package bandit

import (
	"context"
	"fmt"
	"math"
	mrand "math/rand/v2"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
	"github.com/refinery-bandits/refinery/posterior"
)

// FlowTS is Thompson sampling on the last-layer Laplace posterior
// refined by a radial flow fitted once per model version on the ELBO
// of Kristiadi et al. 2022, Eq. 4 (posterior.FitFlow): each sample is a Gaussian
// draw pushed through the flow.
const FlowTS = spec.FlowTS

// FlowConfig is flow-ts's radial flow (spec.FlowConfig).
type FlowConfig = spec.FlowConfig

// flowTargetShape is a0 of the noise prior InvGamma(a0, b0) of the flow's
// target (posterior.LastLayer.Target): a0 = 1 is a weak prior; b0 is the
// MAP's noise variance, so that the prior's scale is the network's own
// estimate.
const flowTargetShape = 1.0

// flowTS is the decider of FlowTS: the MAP as for laplace-ts
// "last-layer", whose last-layer posterior a radial flow refines after
// every retraining (fit).
type flowTS struct{}

func (flowTS) kind() PolicyKind { return FlowTS }

func (flowTS) caps(PolicyConfig) Capabilities {
	return Capabilities{Model: true, Network: true, MAP: true, Posterior: true, LastLayer: true, FitsAtMAP: true, FixedLikelihood: true, Cost: 1}
}

func (flowTS) sampleKinds() []SampleKind { return []SampleKind{SampleFlow} }

func (flowTS) options() []string { return []string{"flow"} }

func (flowTS) setDefaults(p *PolicyConfig) {
	if p.Flow == nil {
		p.Flow = &FlowConfig{}
	}
	if p.Flow.Length == 0 {
		p.Flow.Length = posterior.DefaultFlowLength
	}
	if p.Flow.Iterations == 0 {
		p.Flow.Iterations = posterior.DefaultFlowIterations
	}
	if p.Flow.LR == 0 {
		p.Flow.LR = posterior.DefaultFlowLR
	}
}

func (flowTS) validate(p PolicyConfig, v *validator) {
	if p.Flow == nil {
		return
	}
	v.intRange("policy.flow.length", p.Flow.Length, 1, 50)
	v.intRange("policy.flow.iterations", p.Flow.Iterations, 1, 100000)
	v.positive("policy.flow.lr", p.Flow.LR, 1)
}

func (flowTS) construct(*Agent, uint64) error { return nil }

func (flowTS) choose(_ context.Context, a *Agent, pd *policy.Decision, _ *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	return a.lastLayerThompson(pd, m, x, excluded, rng, SampleFlow, "flow"), nil
}

func (flowTS) rank(_ context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	return a.lastLayerRanking(m, x, excluded, k, rng, SampleFlow, "flow"), nil
}

// fit fits the last layer's posterior at m's MAP (fitLastLayer) and,
// once there are rows, m.flow on it with the noise integrated out
// (posterior.FitFlow, policy.flow's length, iterations and step).
func (flowTS) fit(a *Agent, m *model, lik *nn.Likelihood) error {
	if err := a.fitLastLayer(m, lik); err != nil {
		return err
	}
	if lik.NumRows() == 0 {
		return nil
	}
	ll, f := m.ll, a.cfg.Policy.Flow
	fc := posterior.FlowConfig{Length: f.Length, Iterations: f.Iterations, LR: f.LR}
	flow, st, err := posterior.FitFlow(ll.Base, ll.Target(flowTargetShape, ll.NoiseVar), fc, a.trng)
	if err != nil {
		return fmt.Errorf("fit the flow on %d rows: %w", lik.NumRows(), err)
	}
	m.flow, m.flowELBO = flow, st.MeanELBO
	return nil
}

func (flowTS) encode(meta *snapshotMeta, m *model) error {
	if m.ll != nil {
		if err := encodeLastLayer(meta, m); err != nil {
			return err
		}
	}
	if m.flow != nil {
		b, err := m.flow.MarshalBinary()
		if err != nil {
			return err
		}
		meta.Flow = b
		meta.FlowELBO = finiteOrNil(m.flowELBO)
	}
	return nil
}

func (flowTS) restore(a *Agent, m *model, meta *snapshotMeta) (bool, error) {
	ll, err := a.restoreLastLayer(meta)
	if ll == nil || err != nil {
		return false, err
	}
	if meta.Flow == nil {
		return false, nil // written before the flow was stored: refit
	}
	f, err := posterior.UnmarshalFlow(meta.Flow, ll.Base)
	if err != nil {
		return false, err
	}
	elbo := math.NaN()
	if meta.FlowELBO != nil {
		elbo = *meta.FlowELBO
	}
	m.ll, m.flow, m.flowELBO = ll, f, elbo
	return true, nil
}

func (flowTS) status(a *Agent, m *model) *PosteriorStatus {
	st := lastLayerStatus(m)
	if st != nil {
		st.Kind = "flow"
		st.FlowLength = a.cfg.Policy.Flow.Length
		st.FlowELBO = finiteOrNil(m.flowELBO)
	}
	return st
}
