package bandit

import (
	"math"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// Status is an agent's live state (spec.Status), BankStatus its bank of
// refined samples and PosteriorStatus the posterior fitted at the MAP.
type (
	Status          = spec.Status
	BankStatus      = spec.BankStatus
	PosteriorStatus = spec.PosteriorStatus
)

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

// Name returns the bandit's name.
func (a *Agent) Name() string { return a.name }

// Config returns the bandit's configuration, defaults filled in, as
// last changed in place (Agent.reconfigure), with its candidate's
// (Config.Shadow) when it has one.
func (a *Agent) Config() Config {
	c := *a.current.Load()
	c.Shadow = nil // the candidate agent's configuration is the one
	if sh := a.shadow.Load(); sh != nil {
		c.Shadow = ShadowOf(&sh.cfg, sh.shadowSince)
	}
	return c
}

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
