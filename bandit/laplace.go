package bandit

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
	"github.com/refinery-bandits/refinery/posterior"
)

// The posteriors that laplace-ts, flow-ts and neural-linear fit at the
// network's MAP after every retraining (the trainer trains the MAP as
// for greedy: TrainConfig.Point, nn.Deterministic), published with the
// model version and persisted with its snapshot (snapshotMeta).

// flowTargetShape is a0 of the noise prior InvGamma(a0, b0) of the flow's
// target (posterior.LastLayer.Target): a0 = 1 is a weak prior; b0 is the
// MAP's noise variance, so that the prior's scale is the network's own
// estimate.
const flowTargetShape = 1.0

// fitPosterior fits the posterior of the kind at m's MAP (m.q.Mu and its
// noise m.q.Hyper) on lik's rows, lik being the trainer's likelihood
// (the MAP's standardization m.std); the other kinds have none.
//
//   - laplace-ts "diagonal": m.mu = the MAP, m.sig2 = the diagonal
//     Laplace variances (posterior.LaplaceDiag). Before any training
//     (m.version 0) the prior, as setPosterior gives the other
//     Thompson kinds: the MAP without data is the prior's mode, and
//     the trainer's He-style starting point is not it.
//   - laplace-ts "last-layer" and flow-ts: m.ll, the last layer's
//     posterior with the prior precision by marginal likelihood
//     (posterior.FitLastLayer; without rows, the prior
//     1/model.prior_variance); flow-ts also fits m.flow
//     (posterior.FitFlow, policy.flow's length, iterations and step)
//     on the last layer's posterior with the noise integrated out.
//   - neural-linear: m.lin, policy.Linear's exact posterior on the
//     MAP's last hidden features of every row (O(rows x features^2)).
func (a *Agent) fitPosterior(m *model, lik *nn.Likelihood) error {
	p := a.cfg.Policy
	m.flowELBO = math.NaN()
	switch {
	case p.Kind == LaplaceTS && p.Laplace == LaplaceDiagonal:
		if m.version == 0 {
			m.mu = make([]float64, len(m.q.Mu))
			if m.q.PriorMean != nil {
				copy(m.mu, m.q.PriorMean)
			}
			m.sig2 = slices.Clone(m.q.PriorVar)
			return nil
		}
		m.mu = m.q.Mu
		m.sig2 = posterior.LaplaceDiag(nil, lik, m.q.Mu, m.q.Hyper, m.q.PriorVar)
	case p.lastLayer():
		var cfg posterior.LastLayerConfig
		if lik.NumRows() == 0 {
			cfg.PriorPrecision = 1 / a.cfg.Model.PriorVariance
		}
		ll, err := posterior.FitLastLayer(nn.NewPredictor(a.arch, 256), lik, m.q.Mu, m.q.Hyper, cfg)
		if err != nil {
			return err
		}
		m.ll, m.flow = ll, nil
		if p.Kind == FlowTS && lik.NumRows() > 0 {
			fc := posterior.FlowConfig{Length: p.Flow.Length, Iterations: p.Flow.Iterations, LR: p.Flow.LR}
			f, st, err := posterior.FitFlow(ll.Base, ll.Target(flowTargetShape, ll.NoiseVar), fc, a.trng)
			if err != nil {
				return fmt.Errorf("fit the flow on %d rows: %w", lik.NumRows(), err)
			}
			m.flow, m.flowELBO = f, st.MeanELBO
		}
	case p.Kind == NeuralLinear:
		h := a.arch.Layer(a.arch.NumLayers() - 1).In
		lin, err := policy.NewLinear(policy.LinearConfig{Arms: a.arch.Out(), Features: h, ProbabilitySamples: p.PropensitySamples},
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
	}
	return nil
}

// lastLayerThompson is Thompson sampling (policy.ThompsonVote) on M
// groups of S independent draws of the output layer from m.ll, pushed
// through m.flow when there is one (flow-ts), each scored on the MAP's
// last hidden features of x: the decision acts on group 0, the others
// estimate the propensities (unbiased, as for mf-ts).
func (a *Agent) lastLayerThompson(pd *policy.Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) *Propensity {
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	p := a.predictor()
	phi := p.Features(nil, m.q.Mu, x)
	a.predictors.Put(p)
	pool := make([]float64, M*S*arms)
	theta, eps := make([]float64, m.ll.Base.Dim()), make([]float64, m.ll.Base.Dim())
	for i := range M * S {
		if m.flow != nil {
			m.flow.Sample(theta, eps, rng)
		} else {
			m.ll.Base.Sample(theta, eps, rng)
		}
		m.ll.Scores(pool[i*arms:(i+1)*arms], theta, phi, m.std)
	}
	policy.ThompsonVote(pd, policy.Votes{Pool: pool, Arms: arms, S: S, M: M}, excluded, rng)
	if a.cfg.Policy.Kind == FlowTS {
		pd.Sample = SampleFlow
		return &Propensity{Estimator: "flow", Samples: M * S, Groups: M}
	}
	pd.Sample = SampleLaplace
	return &Propensity{Estimator: "laplace", Samples: M * S, Groups: M}
}

// neuralLinear decides with m.lin (policy.Linear) on the MAP's last
// hidden features of x.
func (a *Agent) neuralLinear(ctx context.Context, pd *policy.Decision, m *model, x []float64, excluded []bool) (*Propensity, error) {
	p := a.predictor()
	phi := p.Features(nil, m.q.Mu, x)
	a.predictors.Put(p)
	a.linMu.Lock()
	d, err := m.lin.Decide(ctx, phi, excluded)
	a.linMu.Unlock()
	if err != nil {
		return nil, err
	}
	*pd = d
	return &Propensity{Estimator: "linear-posterior", Exact: true}, nil
}

// encodePosterior puts m's fitted posterior into a snapshot's meta.
func encodePosterior(meta *snapshotMeta, m *model) error {
	if m.ll != nil {
		b, err := m.ll.MarshalBinary()
		if err != nil {
			return err
		}
		meta.LastLayer = b
	}
	if m.flow != nil {
		b, err := m.flow.MarshalBinary()
		if err != nil {
			return err
		}
		meta.Flow = b
		if !math.IsNaN(m.flowELBO) && !math.IsInf(m.flowELBO, 0) {
			e := m.flowELBO
			meta.FlowELBO = &e
		}
	}
	if meta.Kind == LaplaceTS && m.ll == nil && m.version > 0 {
		b := make([]byte, 8*len(m.sig2))
		for i, v := range m.sig2 {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		}
		meta.LaplaceVar = b
	}
	return nil
}

// restorePosterior sets m's posterior from a snapshot's meta and reports
// whether it did; false with a nil error means there is nothing to
// restore (no snapshot, a kind without one, neural-linear, whose linear
// posterior is rebuilt, or a snapshot written before the field existed):
// the caller fits it. A stored posterior that does not fit the
// configuration is an error.
func (a *Agent) restorePosterior(m *model, meta *snapshotMeta) (bool, error) {
	p := a.cfg.Policy
	if meta == nil || m.version == 0 {
		return false, nil
	}
	switch {
	case p.Kind == LaplaceTS && p.Laplace == LaplaceDiagonal:
		if meta.LaplaceVar == nil {
			return false, nil
		}
		n := len(m.q.Mu)
		if len(meta.LaplaceVar) != 8*n {
			return false, fmt.Errorf("snapshot has %d bytes of Laplace variances for %d parameters", len(meta.LaplaceVar), n)
		}
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(binary.LittleEndian.Uint64(meta.LaplaceVar[8*i:]))
			if !(v[i] > 0 && v[i] <= 1e6) {
				return false, fmt.Errorf("snapshot Laplace variance %g, want (0, 1e6]", v[i])
			}
		}
		m.mu, m.sig2 = m.q.Mu, v
		return true, nil
	case p.lastLayer():
		if meta.LastLayer == nil {
			return false, nil
		}
		ll := new(posterior.LastLayer)
		if err := ll.UnmarshalBinary(meta.LastLayer); err != nil {
			return false, err
		}
		if h := a.arch.Layer(a.arch.NumLayers() - 1).In; ll.Arms != a.arch.Out() || ll.Dim != h+1 {
			return false, fmt.Errorf("snapshot last layer of %d arms x %d, want %d x %d", ll.Arms, ll.Dim, a.arch.Out(), h+1)
		}
		if !bounded(ll.Base.Mean, maxSnapshotParam) || !bounded(ll.Base.Root, maxSnapshotParam) {
			return false, fmt.Errorf("snapshot last layer has parameters beyond %g", maxSnapshotParam)
		}
		var f *posterior.Flow
		elbo := math.NaN()
		if p.Kind == FlowTS {
			if meta.Flow == nil {
				return false, nil // written before the flow was stored: refit
			}
			var err error
			if f, err = posterior.UnmarshalFlow(meta.Flow, ll.Base); err != nil {
				return false, err
			}
			if meta.FlowELBO != nil {
				elbo = *meta.FlowELBO
			}
		}
		m.ll, m.flow, m.flowELBO = ll, f, elbo
		return true, nil
	}
	return false, nil
}

// PosteriorStatus describes the posterior that laplace-ts, flow-ts and
// neural-linear fit at the network's MAP after each retraining.
type PosteriorStatus struct {
	// Kind is "laplace-diagonal", "laplace-last-layer", "flow" or
	// "neural-linear".
	Kind string `json:"kind"`
	// For the last layer (laplace-last-layer, flow): PriorPrecision is
	// the prior precision the marginal likelihood chose, NoiseVariance
	// the MAP's noise variance in standardized units, LogEvidence the
	// log marginal likelihood of the standardized rewards.
	PriorPrecision *float64 `json:"prior_precision,omitempty"`
	NoiseVariance  *float64 `json:"noise_variance,omitempty"`
	LogEvidence    *float64 `json:"log_evidence,omitempty"`
	// For flow: FlowLength radial layers, FlowELBO the mean
	// single-sample ELBO of the last tenth of the fit's iterations
	// (absent before any data: the flow is fitted once there are rows).
	FlowLength int      `json:"flow_length,omitempty"`
	FlowELBO   *float64 `json:"flow_elbo,omitempty"`
	// For laplace-diagonal: MeanSigma is the mean posterior standard
	// deviation over all parameters (Agent.Spread has it per layer).
	MeanSigma *float64 `json:"mean_sigma,omitempty"`
}

// posteriorStatus returns m's PosteriorStatus, or nil for the kinds
// without one.
func (a *Agent) posteriorStatus(m *model) *PosteriorStatus {
	p := a.cfg.Policy
	fin := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	switch {
	case p.Kind == LaplaceTS && p.Laplace == LaplaceDiagonal:
		var s float64
		for _, v := range m.sig2 {
			s += math.Sqrt(v)
		}
		return &PosteriorStatus{Kind: "laplace-diagonal", MeanSigma: fin(s / float64(max(len(m.sig2), 1)))}
	case p.lastLayer() && m.ll != nil:
		st := &PosteriorStatus{Kind: "laplace-last-layer", PriorPrecision: fin(m.ll.Alpha), NoiseVariance: fin(m.ll.NoiseVar), LogEvidence: fin(m.ll.LogEvidence)}
		if p.Kind == FlowTS {
			st.Kind = "flow"
			st.FlowLength = p.Flow.Length
			st.FlowELBO = fin(m.flowELBO)
		}
		return st
	case p.Kind == NeuralLinear:
		return &PosteriorStatus{Kind: "neural-linear"}
	}
	return nil
}
