package bandit

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// HoldBackgroundCore takes one of the service's background cores
// (ServiceConfig.BackgroundCores) until release is called, as a
// retraining or a refinement would.
func (s *Service) HoldBackgroundCore() (release func()) {
	release, _ = s.pool.background(nil)
	return release
}

// PosteriorOf is the published mean-field posterior of an agent, for
// tests: version, means, standard deviations, prior variances, the noise
// hyperparameter and the standardization.
type PosteriorOf struct {
	Version             int64
	Mu, Sigma, PriorVar []float64
	Noise               []float64 // the log noise variances (none under the Bernoulli likelihood)
	Std                 nn.Standardization
	Arch                nn.Arch
	Inputs              []int // where each input lands in Grown's network
	Encode              func(json.RawMessage) ([]float64, error)
}

func (a *Agent) Posterior() PosteriorOf {
	m := a.model.Load()
	return PosteriorOf{Version: m.version, Mu: m.q.Mu, Sigma: m.q.Sigma(nil), PriorVar: m.q.PriorVar, Noise: slices.Clone(m.q.Hyper), Std: m.std, Arch: a.arch, Encode: a.enc.Encode}
}

// InputMap is inputMap of two agents' encoders.
func InputMap(old, grown *Agent) []int { return inputMap(old.enc, grown.enc) }

// RefinementPrior is the prior mean and variance per parameter that
// refinement of the published posterior uses (refineFrom).
func (a *Agent) RefinementPrior() (mean, variance []float64) {
	q := a.refineFrom(a.model.Load())
	mean = make([]float64, q.Len())
	if q.PriorMean != nil {
		copy(mean, q.PriorMean)
	}
	return mean, q.PriorVar
}

// TrainingData is the agent's training rows so far, in the order it
// read them: encoded contexts, arms and rewards.
func (a *Agent) TrainingData() nn.View { return a.data.View() }

// Family is the likelihood family of the published posterior.
func (a *Agent) Family() nn.Family { return a.model.Load().fam }

// RefineOnce draws one refined sample from the published posterior with
// the agent's refinement configuration, as the bank would.
func (a *Agent) RefineOnce(ctx context.Context, seed uint64) ([]float64, error) {
	m := a.model.Load()
	ref, err := posterior.NewRefiner(m.lik, a.refineCfg)
	if err != nil {
		return nil, err
	}
	w, _, err := ref.Refine(ctx, nil, a.refineFrom(m), rand.New(rand.NewPCG(seed, seed)))
	return w, err
}
