package bandit

import (
	"math"
	"time"
)

// Status is an agent's live state.
type Status struct {
	// ModelVersion counts the posteriors the trainer has published.
	ModelVersion int64 `json:"model_version"`
	// TrainedRows is the number of rewarded decisions the current
	// posterior was trained on.
	TrainedRows int `json:"trained_rows"`
	// ELBO is the trainer's last minibatch ELBO estimate (mean of the
	// last tenth of its iterations); null before any training.
	ELBO      *float64   `json:"elbo"`
	TrainedAt *time.Time `json:"trained_at"`
	// Bank is the refined-sample bank (refined-ts only).
	Bank *BankStatus `json:"bank,omitempty"`
	// TrainerError is the error of the last training attempt, while the
	// trainer has not succeeded since (it retries every second); absent
	// when training is well.
	TrainerError string `json:"trainer_error,omitempty"`
	// Posterior is the posterior laplace-ts, flow-ts and neural-linear
	// fitted at the network's MAP; absent for the other kinds.
	Posterior *PosteriorStatus `json:"posterior,omitempty"`
	// Trainer is whether this replica trains the bandit: always on a
	// service alone on its store; with replicas (Fleet), on the one that
	// holds the bandit's trainer lock, while the others install the
	// versions it persists.
	Trainer bool `json:"trainer"`
	// Health is the published posterior's health (Agent.Health).
	Health *Health `json:"health"`
}

// BankStatus describes a bank of refined samples.
type BankStatus struct {
	// Depth is the number of usable samples banked; InFlight the
	// number being refined.
	Depth    int `json:"depth"`
	InFlight int `json:"in_flight"`
	Capacity int `json:"capacity"`
	// Produced counts samples banked, Discarded samples that went stale
	// before use, Used uses of samples by decisions, Reused those uses
	// beyond a sample's first.
	Produced  int64 `json:"produced"`
	Discarded int64 `json:"discarded"`
	Used      int64 `json:"used"`
	Reused    int64 `json:"reused"`
	// BeyondBounds counts the decisions that found fewer usable samples
	// than they need and acted on samples past their bounds.
	BeyondBounds int64 `json:"beyond_bounds"`
}

// Status returns the agent's live state.
func (a *Agent) Status() Status {
	m := a.model.Load()
	st := Status{ModelVersion: m.version, TrainedRows: m.rows, Posterior: a.posteriorStatus(m), Trainer: a.Leading(), Health: a.Health()}
	if e := a.trainErr.Load(); e != nil {
		st.TrainerError = *e
	}
	if !math.IsNaN(m.elbo) && !math.IsInf(m.elbo, 0) {
		e := m.elbo
		st.ELBO = &e
	}
	if !m.trainedAt.IsZero() {
		t := m.trainedAt.UTC()
		st.TrainedAt = &t
	}
	if a.bank != nil {
		b := a.bank.status()
		st.Bank = &BankStatus{Depth: b.Depth, InFlight: b.InFlight, Capacity: a.cfg.Refinement.BankSize, Produced: b.Produced, Discarded: b.Discarded, Used: b.Used, Reused: b.Reused, BeyondBounds: b.Beyond}
	}
	return st
}

// LayerSpread is the spread of the published mean-field posterior over
// one affine layer of the network.
type LayerSpread struct {
	// Layer numbers the affine layers from 1 (the first hidden layer) to
	// the output layer.
	Layer int `json:"layer"`
	In    int `json:"in"`
	Out   int `json:"out"`
	// MeanSigma is the mean posterior standard deviation, softplus(rho),
	// over the layer's weights and biases; MaxSigma their largest.
	MeanSigma float64 `json:"mean_sigma"`
	MaxSigma  float64 `json:"max_sigma"`
}

// Spread returns the posterior spread per layer of the published
// posterior, or nil for the policies without a network (uniform,
// linear-ts). For the point-estimate policies (greedy, eps-greedy) the
// trainer does not move sigma, so it stays at its initial value.
func (a *Agent) Spread() []LayerSpread {
	m := a.model.Load()
	if m.sig2 == nil || a.arch.NumLayers() == 0 {
		return nil
	}
	out := make([]LayerSpread, a.arch.NumLayers())
	for l := range out {
		ly := a.arch.Layer(l)
		var sum, mx float64
		for _, v := range m.sig2[ly.W:ly.End()] {
			s := math.Sqrt(v)
			sum += s
			mx = max(mx, s)
		}
		out[l] = LayerSpread{Layer: l + 1, In: ly.In, Out: ly.Out, MeanSigma: sum / float64(ly.Size()), MaxSigma: mx}
	}
	return out
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

// Name returns the bandit's name.
func (a *Agent) Name() string { return a.name }

// Config returns the bandit's configuration, defaults filled in.
func (a *Agent) Config() Config { return a.cfg }

// CreatedAt returns when the bandit was created.
func (a *Agent) CreatedAt() time.Time { return a.createdAt }

// ArchivedAt returns when the bandit was archived, or the zero time while
// it is live.
func (a *Agent) ArchivedAt() time.Time {
	if at := a.archivedAt.Load(); at != 0 {
		return time.Unix(0, at).UTC()
	}
	return time.Time{}
}

// rewardPending records that a reward was accepted (TrainerLag); the
// policies without a model have no trainer and no lag.
func (a *Agent) rewardPending() {
	if a.caps.Model {
		a.pendingSince.CompareAndSwap(0, a.clock.Now().UnixNano())
	}
}

// TrainerLag returns how long the oldest reward that the published
// posterior has not seen has waited since it was accepted, 0 when the
// posterior has seen every accepted reward (always for uniform, which
// has no model). A reward accepted while a retraining reads the rows
// counts as pending until the next retraining publishes, which it wakes.
func (a *Agent) TrainerLag() time.Duration {
	since := a.pendingSince.Load()
	if since == 0 {
		return 0
	}
	return max(time.Duration(a.clock.Now().UnixNano()-since), 0)
}
