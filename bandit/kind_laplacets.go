package bandit

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
	"github.com/refinery-bandits/refinery/posterior"
)

// LaplaceTS is Thompson sampling on Laplace's approximation at the
// network's MAP (Khan 2018, Section 1): the diagonal generalized
// Gauss-Newton of the whole network (policy.laplace "diagonal",
// posterior.LaplaceDiag) or the exact full-covariance posterior of
// the output layer (policy.laplace "last-layer",
// posterior.FitLastLayer).
const LaplaceTS = spec.LaplaceTS

// Laplace structures of laplace-ts (PolicyConfig.Laplace).
const (
	LaplaceDiagonal  = "diagonal"
	LaplaceLastLayer = "last-layer"
)

// laplaceTS is the decider of LaplaceTS. The trainer trains the MAP as
// for greedy (TrainConfig.Point, nn.Deterministic); after every
// retraining fit fits the Laplace posterior at it, published with the
// model version and persisted with its snapshot (snapshotMeta).
type laplaceTS struct{}

func (laplaceTS) kind() PolicyKind { return LaplaceTS }

func (laplaceTS) caps(p PolicyConfig) Capabilities {
	c := Capabilities{Model: true, Network: true, MAP: true, Posterior: true, FitsAtMAP: true,
		Structures: []string{LaplaceDiagonal, LaplaceLastLayer}, Cost: 1}
	if p.Laplace == LaplaceLastLayer {
		c.LastLayer, c.FixedLikelihood = true, true
	} else {
		c.WeightSpread = true
	}
	return c
}

func (laplaceTS) sampleKinds() []SampleKind { return []SampleKind{SampleLaplace} }

func (laplaceTS) options() []string { return []string{"laplace"} }

func (laplaceTS) setDefaults(p *PolicyConfig) {
	if p.Laplace == "" {
		p.Laplace = LaplaceDiagonal
	}
}

func (laplaceTS) validate(p PolicyConfig, v *validator) {
	if p.Laplace != LaplaceDiagonal && p.Laplace != LaplaceLastLayer {
		v.add("policy.laplace", fmt.Sprintf("%q, want \"diagonal\" or \"last-layer\"", p.Laplace))
	}
}

func (laplaceTS) construct(*Agent, uint64) error { return nil }

// choose is Thompson sampling on the diagonal Laplace posterior as mf-ts
// on its mean-field one (a mean-field Gaussian too), or on the
// last-layer posterior (lastLayerThompson).
func (laplaceTS) choose(_ context.Context, a *Agent, pd *policy.Decision, _ *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	if a.cfg.Policy.Laplace == LaplaceLastLayer {
		return a.lastLayerThompson(pd, m, x, excluded, rng, SampleLaplace, "laplace"), nil
	}
	prop := a.meanFieldThompson(pd, m, x, excluded, rng)
	pd.Sample = SampleLaplace
	prop.Estimator = "laplace"
	return prop, nil
}

// rank is choose's ranking: lastLayerRanking, or meanFieldRanking on the
// diagonal Laplace posterior.
func (laplaceTS) rank(_ context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error) {
	if a.cfg.Policy.Laplace == LaplaceLastLayer {
		return a.lastLayerRanking(m, x, excluded, k, rng, SampleLaplace, "laplace"), nil
	}
	r := a.meanFieldRanking(m, x, excluded, k, rng)
	r.sample = SampleLaplace
	for _, p := range r.props {
		p.Estimator = "laplace"
	}
	return r, nil
}

// fit fits the Laplace posterior at m's MAP (m.q.Mu and its noise
// m.q.Hyper) on lik's rows, lik being the trainer's likelihood (the
// MAP's standardization m.std):
//
//   - "diagonal": m.mu = the MAP, m.sig2 = the diagonal Laplace
//     variances (posterior.LaplaceDiag). Before any training (m.version
//     0) the prior, as setPosterior gives the other Thompson kinds: the
//     MAP without data is the prior's mode, and the trainer's He-style
//     starting point is not it.
//   - "last-layer": m.ll (fitLastLayer).
func (laplaceTS) fit(a *Agent, m *model, lik *nn.Likelihood) error {
	if a.cfg.Policy.Laplace == LaplaceLastLayer {
		return a.fitLastLayer(m, lik)
	}
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
	return nil
}

// fitLastLayer sets m.ll, the last layer's posterior at m's MAP with the
// prior precision by marginal likelihood (posterior.FitLastLayer;
// without rows, the prior 1/model.prior_variance), and clears m.flow.
func (a *Agent) fitLastLayer(m *model, lik *nn.Likelihood) error {
	var cfg posterior.LastLayerConfig
	if lik.NumRows() == 0 {
		cfg.PriorPrecision = 1 / a.cfg.Model.PriorVariance
	}
	ll, err := posterior.FitLastLayer(nn.NewPredictor(a.arch, 256), lik, m.q.Mu, m.q.Hyper, cfg)
	if err != nil {
		return err
	}
	m.ll, m.flow = ll, nil
	return nil
}

func (laplaceTS) encode(meta *snapshotMeta, m *model) error {
	if m.ll != nil {
		return encodeLastLayer(meta, m)
	}
	if m.version > 0 {
		b := make([]byte, 8*len(m.sig2))
		for i, v := range m.sig2 {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
		}
		meta.LaplaceVar = b
	}
	return nil
}

// encodeLastLayer puts m.ll into a snapshot's meta.
func encodeLastLayer(meta *snapshotMeta, m *model) error {
	b, err := m.ll.MarshalBinary()
	if err != nil {
		return err
	}
	meta.LastLayer = b
	return nil
}

func (laplaceTS) restore(a *Agent, m *model, meta *snapshotMeta) (bool, error) {
	if a.cfg.Policy.Laplace == LaplaceLastLayer {
		ll, err := a.restoreLastLayer(meta)
		if ll == nil || err != nil {
			return false, err
		}
		m.ll, m.flow, m.flowELBO = ll, nil, math.NaN()
		return true, nil
	}
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
}

// restoreLastLayer decodes and checks the last layer's posterior of a
// snapshot's meta; nil, nil when it has none.
func (a *Agent) restoreLastLayer(meta *snapshotMeta) (*posterior.LastLayer, error) {
	if meta.LastLayer == nil {
		return nil, nil
	}
	ll := new(posterior.LastLayer)
	if err := ll.UnmarshalBinary(meta.LastLayer); err != nil {
		return nil, err
	}
	if h := a.arch.Layer(a.arch.NumLayers() - 1).In; ll.Arms != a.arch.Out() || ll.Dim != h+1 {
		return nil, fmt.Errorf("snapshot last layer of %d arms x %d, want %d x %d", ll.Arms, ll.Dim, a.arch.Out(), h+1)
	}
	if !bounded(ll.Base.Mean, maxSnapshotParam) || !bounded(ll.Base.Root, maxSnapshotParam) {
		return nil, fmt.Errorf("snapshot last layer has parameters beyond %g", maxSnapshotParam)
	}
	return ll, nil
}

func (laplaceTS) status(a *Agent, m *model) *PosteriorStatus {
	if a.cfg.Policy.Laplace == LaplaceLastLayer {
		return lastLayerStatus(m)
	}
	var s float64
	for _, v := range m.sig2 {
		s += math.Sqrt(v)
	}
	return &PosteriorStatus{Kind: "laplace-diagonal", MeanSigma: finiteOrNil(s / float64(max(len(m.sig2), 1)))}
}

// lastLayerStatus describes m.ll, nil before it is fitted.
func lastLayerStatus(m *model) *PosteriorStatus {
	if m.ll == nil {
		return nil
	}
	return &PosteriorStatus{Kind: "laplace-last-layer", PriorPrecision: finiteOrNil(m.ll.Alpha), NoiseVariance: finiteOrNil(m.ll.NoiseVar), LogEvidence: finiteOrNil(m.ll.LogEvidence)}
}

// finiteOrNil returns &v, or nil when v is not finite.
func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// lastLayerThompson is Thompson sampling (policy.ThompsonVote) on M
// groups of S independent draws of the output layer from m.ll, pushed
// through m.flow when there is one (flow-ts), each scored on the MAP's
// last hidden features of x: the decision acts on group 0, the others
// estimate the propensities (unbiased, as for mf-ts). The decision's
// sample kind is sample, the propensity's estimator estimator.
func (a *Agent) lastLayerThompson(pd *policy.Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand, sample SampleKind, estimator string) *Propensity {
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	policy.ThompsonVote(pd, policy.Votes{Pool: a.lastLayerPool(m, x, M*S, rng), Arms: arms, S: S, M: M}, excluded, rng)
	pd.Sample = sample
	return &Propensity{Estimator: estimator, Samples: M * S, Groups: M}
}

// lastLayerRanking is Rank on lastLayerThompson's draws: group 0 of M
// groups of S fresh draws ranks, and the M groups count the slots'
// probabilities (voteRanking).
func (a *Agent) lastLayerRanking(m *model, x []float64, excluded []bool, k int, rng *mrand.Rand, sample SampleKind, estimator string) *ranking {
	arms := len(a.cfg.Arms)
	S, M := a.cfg.Policy.Samples, a.cfg.Policy.PropensitySamples
	groups, _ := policy.GroupMeans(policy.Votes{Pool: a.lastLayerPool(m, x, M*S, rng), Arms: arms, S: S, M: M}, nil)
	r := voteRanking(groups[:arms], groups, arms, excluded, k, Propensity{Estimator: estimator, Samples: M * S})
	r.sample = sample
	return r
}

// lastLayerPool returns n draws of every arm's score at x from the last
// layer's posterior (through m.flow when there is one), rows of arms.
func (a *Agent) lastLayerPool(m *model, x []float64, n int, rng *mrand.Rand) []float64 {
	arms := len(a.cfg.Arms)
	p := a.predictor()
	phi := p.Features(nil, m.q.Mu, a.scoreInput(x))
	a.predictors.Put(p)
	pool := make([]float64, n*arms)
	theta, eps := make([]float64, m.ll.Base.Dim()), make([]float64, m.ll.Base.Dim())
	for i := range n {
		if m.flow != nil {
			m.flow.Sample(theta, eps, rng)
		} else {
			m.ll.Base.Sample(theta, eps, rng)
		}
		a.lastLayerScores(pool[i*arms:(i+1)*arms], m, theta, phi)
	}
	return pool
}

// lastLayerScores writes every arm's score under the output layer theta
// (m.ll.Scores) on the last hidden features phi: of the context (one
// output per arm), or with arm features of every arm's pair, rows of
// arms, each scored by the one output.
func (a *Agent) lastLayerScores(dst []float64, m *model, theta, phi []float64) {
	if a.pairs == nil {
		m.ll.Scores(dst, theta, phi, m.std)
		return
	}
	h := len(phi) / len(dst)
	for k := range dst {
		m.ll.Scores(dst[k:k+1], theta, phi[k*h:(k+1)*h], m.std)
	}
}
