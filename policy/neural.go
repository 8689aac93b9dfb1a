package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// NeuralConfig configures the Bayesian neural network behind the neural
// policies (refined and mean-field Thompson sampling, greedy and
// epsilon-greedy). Zero values mean the defaults of the paper's bandit
// experiment (Havasi et al. 2021, Section 4.3) unless a field says
// otherwise.
type NeuralConfig struct {
	// Hidden lists the widths of the ReLU hidden layers; nil means
	// {100, 100}. Use an empty non-nil slice for a linear model.
	Hidden []int `json:"hidden"`
	// PriorVar is the variance of the Gaussian prior on every weight and
	// bias, in standardized reward units; zero means 1 (standard normal).
	PriorVar float64 `json:"prior_var"`
	// InitSigma is the initial standard deviation of every factor of
	// the mean-field posterior; zero means 0.01. Means start He-style.
	InitSigma float64 `json:"init_sigma"`
	// Estimator of the ELBO's data term; the zero value is the local
	// reparameterization trick.
	Estimator nn.Estimator `json:"estimator"`
	// TrainEvery retrains after this many observations; zero means 1
	// (after every reward, as in the paper).
	TrainEvery int `json:"train_every"`
	// TrainIters is the number of Adam iterations per retraining; zero
	// means 500.
	TrainIters int `json:"train_iters"`
	// BatchSize of the minibatches; zero means 64.
	BatchSize int `json:"batch_size"`
	// LR is Adam's learning rate; zero means 1e-3.
	LR float64 `json:"lr"`
	// Samples is the number S of posterior samples whose predictions are
	// averaged for one decision; zero means 3 (the paper's refined
	// sampler; the mean-field sampler uses the same S so that the two
	// differ only in the quality of the samples).
	Samples int `json:"samples"`
	// Refine configures local refinement for refined Thompson sampling;
	// its zero value is completed with Fractions {0.7, 0.3} and 500
	// iterations (Section 4.3).
	Refine posterior.RefineConfig `json:"refine"`
	// Epsilon is the exploration rate of epsilon-greedy.
	Epsilon float64 `json:"epsilon,omitempty"`
	// Propensity is the number M of extra draws of the decision rule
	// used to estimate the mean-field policy's arm probabilities by
	// Monte Carlo; zero disables the estimate (Decision.Probabilities is
	// nil). Greedy, epsilon-greedy and uniform report exact
	// probabilities regardless.
	Propensity int `json:"propensity,omitempty"`
}

func (c NeuralConfig) withDefaults() NeuralConfig {
	if c.Hidden == nil {
		c.Hidden = []int{100, 100}
	}
	if c.PriorVar == 0 {
		c.PriorVar = 1
	}
	if c.InitSigma == 0 {
		c.InitSigma = 0.01
	}
	if c.TrainEvery == 0 {
		c.TrainEvery = 1
	}
	if c.TrainIters == 0 {
		c.TrainIters = 500
	}
	if c.BatchSize == 0 {
		c.BatchSize = posterior.DefaultBatchSize
	}
	if c.LR == 0 {
		c.LR = posterior.DefaultLR
	}
	if c.Samples == 0 {
		c.Samples = 3
	}
	if c.Refine.Fractions == nil && c.Refine.K == 0 {
		c.Refine.Fractions = []float64{0.7, 0.3}
	}
	if c.Refine.Iterations == 0 {
		c.Refine.Iterations = posterior.DefaultRefineIterations
	}
	if c.Refine.BatchSize == 0 {
		c.Refine.BatchSize = c.BatchSize
	}
	if c.Refine.LR == 0 {
		c.Refine.LR = c.LR
	}
	return c
}

func (c NeuralConfig) validate() error {
	for i, h := range c.Hidden {
		if h < 1 || h > 4096 {
			return fmt.Errorf("policy: hidden layer %d has width %d, want 1..4096", i, h)
		}
	}
	switch {
	case len(c.Hidden) > 16:
		return fmt.Errorf("policy: %d hidden layers, want at most 16", len(c.Hidden))
	case !(c.PriorVar > 0) || math.IsInf(c.PriorVar, 0):
		return fmt.Errorf("policy: prior variance %g, want > 0", c.PriorVar)
	case !(c.InitSigma > 0) || math.IsInf(c.InitSigma, 0):
		return fmt.Errorf("policy: initial sigma %g, want > 0", c.InitSigma)
	case c.TrainEvery < 1:
		return fmt.Errorf("policy: train every %d, want >= 1", c.TrainEvery)
	case c.TrainIters < 0:
		return fmt.Errorf("policy: train iterations %d, want >= 0", c.TrainIters)
	case c.Samples < 1 || c.Samples > 1000:
		return fmt.Errorf("policy: samples %d, want 1..1000", c.Samples)
	case !(c.Epsilon >= 0 && c.Epsilon <= 1):
		return fmt.Errorf("policy: epsilon %g, want in [0, 1]", c.Epsilon)
	case c.Propensity < 0:
		return fmt.Errorf("policy: propensity draws %d, want >= 0", c.Propensity)
	}
	if _, err := c.Refine.Schedule(); err != nil {
		return err
	}
	return nil
}

// model is the reward model shared by the neural policies: a Bayesian
// MLP with one output per arm, a mean-field posterior trained on the
// ELBO, and the rewards standardized inside the model.
//
// Reward scale: the network fits standardized rewards t = (y - shift) /
// scale, with shift and scale the mean and standard deviation of the
// rewards seen so far, refitted before every retraining. When they change
// the output layer is rewritten by nn.Restandardize so that the posterior's
// predictions in reward units are unchanged; the noise variance is learned
// (in reward units) and starts at one standardized unit. So +5 / -35
// rewards train like any others without the caller tuning anything.
type model struct {
	cfg   NeuralConfig
	arch  nn.Arch
	data  *nn.Data
	std   nn.Standardization
	q     *posterior.MeanField
	tr    *posterior.Trainer
	pred  *nn.Predictor
	rng   *rand.Rand
	sigma []float64
	out   []float64 // one prediction, one entry per arm
	sum   []float64 // running sum of predictions
	seen  int
	fit   bool // trained at least once
}

func newModel(dim, arms int, cfg NeuralConfig, rng *rand.Rand) (*model, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if dim < 1 || arms < 1 {
		return nil, fmt.Errorf("policy: %d features and %d arms, want at least 1 of each", dim, arms)
	}
	arch := nn.NewArch(dim, cfg.Hidden, arms)
	data := nn.NewData(dim, arms)
	n := arch.NumParams()
	prior := make([]float64, n)
	for i := range prior {
		prior[i] = cfg.PriorVar
	}
	q := posterior.NewMeanField(n, 1, prior, cfg.InitSigma)
	arch.InitHe(q.Mu, rng)
	m := &model{
		cfg:   cfg,
		arch:  arch,
		data:  data,
		std:   nn.Standardization{Scale: 1},
		q:     q,
		pred:  nn.NewPredictor(arch, 1),
		rng:   rng,
		sigma: make([]float64, n),
		out:   make([]float64, arms),
		sum:   make([]float64, arms),
	}
	tr, err := posterior.NewTrainer(m.likelihood(), posterior.TrainConfig{
		BatchSize: cfg.BatchSize, LR: cfg.LR,
		Point: cfg.Estimator == nn.Deterministic,
	})
	if err != nil {
		return nil, err
	}
	m.tr = tr
	return m, nil
}

func (m *model) likelihood() *nn.Likelihood {
	return nn.NewLikelihood(m.arch, m.data.View(), nn.Options{
		Estimator:       m.cfg.Estimator,
		LearnNoise:      true,
		Standardization: m.std,
	})
}

// observe appends a row and retrains on schedule. It returns whether it
// retrained.
func (m *model) observe(ctx context.Context, x []float64, arm int, reward float64) (bool, error) {
	if err := checkContext(x, m.arch.In()); err != nil {
		return false, err
	}
	if arm < 0 || arm >= m.arch.Out() {
		return false, fmt.Errorf("policy: arm %d out of range [0, %d)", arm, m.arch.Out())
	}
	if math.IsNaN(reward) || math.IsInf(reward, 0) {
		return false, fmt.Errorf("policy: reward %g is not finite", reward)
	}
	m.data.Append(x, arm, reward)
	m.seen++
	if m.seen%m.cfg.TrainEvery != 0 {
		return false, nil
	}
	return true, m.train(ctx)
}

// train refits the standardization, rewrites the posterior for it and
// runs the configured number of ELBO iterations on every row so far.
func (m *model) train(ctx context.Context) error {
	std := nn.FitStandardization(m.data.View())
	if std != m.std {
		m.q.Sigma(m.sigma)
		nn.Restandardize(m.arch, m.q.Mu, m.sigma, m.std, std)
		m.q.SetSigma(m.sigma)
		m.std = std
	}
	if !m.fit {
		// The noise starts at one standardized unit.
		m.q.Hyper[0] = 2 * math.Log(std.Scale)
		m.fit = true
	}
	m.tr.SetLikelihood(m.likelihood())
	_, err := m.tr.Run(ctx, m.q, m.cfg.TrainIters, m.rng)
	var nf *posterior.NonFiniteError
	if errors.As(err, &nf) {
		return fmt.Errorf("policy: training diverged after %d rows: %w", m.data.Len(), err)
	}
	return err
}

// predict writes the rewards of every arm at weights w into m.out.
func (m *model) predict(w, x []float64) []float64 {
	return m.pred.Predict(m.out, w, x, m.std)
}

// meanFieldScores averages the predictions of S mean-field samples into
// m.sum and returns it.
func (m *model) meanFieldScores(x []float64) []float64 {
	clear(m.sum)
	m.q.Sigma(m.sigma)
	for range m.cfg.Samples {
		m.pred.Sample(m.out, m.q.Mu, m.sigma, x, m.std, m.rng)
		for a, v := range m.out {
			m.sum[a] += v
		}
	}
	for a := range m.sum {
		m.sum[a] /= float64(m.cfg.Samples)
	}
	return m.sum
}

func checkContext(x []float64, dim int) error {
	if len(x) != dim {
		return fmt.Errorf("policy: context has %d features, want %d", len(x), dim)
	}
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("policy: feature %d is %g", i, v)
		}
	}
	return nil
}

// ErrAllExcluded is returned when a decision excludes every arm.
var ErrAllExcluded = errors.New("policy: every arm is excluded")

func checkExcluded(excluded []bool, arms int) error {
	if excluded == nil {
		return nil
	}
	if len(excluded) != arms {
		return fmt.Errorf("policy: %d exclusion flags for %d arms", len(excluded), arms)
	}
	for _, e := range excluded {
		if !e {
			return nil
		}
	}
	return ErrAllExcluded
}

// Argmax returns the allowed arm with the highest score, breaking ties
// uniformly at random with rng (which it calls only on ties). excluded
// may be nil; -1 means every arm is excluded.
func Argmax(scores []float64, excluded []bool, rng *rand.Rand) int {
	best, ties := -1, 0
	for a, s := range scores {
		if excluded != nil && excluded[a] {
			continue
		}
		switch {
		case best < 0 || s > scores[best]:
			best, ties = a, 1
		case s == scores[best]:
			ties++
			if rng.IntN(ties) == 0 {
				best = a
			}
		}
	}
	return best
}

// MeanFieldTS is Thompson sampling with plain samples from the
// mean-field posterior: each decision averages the predictions of S
// weight samples w ~ q(w) and plays the argmax (Havasi et al. 2021,
// Section 4.3, steps 1-3).
type MeanFieldTS struct{ m *model }

var _ Policy = (*MeanFieldTS)(nil)

// NewMeanFieldTS returns mean-field Thompson sampling for contexts of dim
// features and the given number of arms.
func NewMeanFieldTS(dim, arms int, cfg NeuralConfig, rng *rand.Rand) (*MeanFieldTS, error) {
	m, err := newModel(dim, arms, cfg, rng)
	if err != nil {
		return nil, err
	}
	return &MeanFieldTS{m: m}, nil
}

func (p *MeanFieldTS) Name() string { return "mf-ts" }

// Decide implements Policy. With NeuralConfig.Propensity = M > 0 the
// probabilities are the frequencies of each arm as the argmax of M more
// independent draws of the same rule (standard error at most
// 0.5/sqrt(M)).
func (p *MeanFieldTS) Decide(_ context.Context, x []float64, excluded []bool) (Decision, error) {
	m := p.m
	if err := checkContext(x, m.arch.In()); err != nil {
		return Decision{}, err
	}
	if err := checkExcluded(excluded, m.arch.Out()); err != nil {
		return Decision{}, err
	}
	scores := m.meanFieldScores(x)
	d := Decision{
		Arm:    Argmax(scores, excluded, m.rng),
		Scores: append([]float64(nil), scores...),
		Sample: SampleMeanField,
	}
	if mm := m.cfg.Propensity; mm > 0 {
		d.Probabilities = make([]float64, len(scores))
		for range mm {
			d.Probabilities[Argmax(m.meanFieldScores(x), excluded, m.rng)] += 1 / float64(mm)
		}
	}
	return d, nil
}

func (p *MeanFieldTS) Observe(ctx context.Context, x []float64, arm int, reward float64) error {
	_, err := p.m.observe(ctx, x, arm, reward)
	return err
}

// RefinedTS is Thompson sampling on locally refined posterior samples
// (Havasi et al. 2021, Algorithm 1 and Section 4.3): each decision draws
// S refined samples from the current mean-field posterior, averages their
// predictions and plays the argmax. The refined samples are discarded
// after the decision.
type RefinedTS struct {
	m   *model
	ref *posterior.Refiner
	w   []float64
}

var _ Policy = (*RefinedTS)(nil)

// NewRefinedTS returns refined Thompson sampling.
func NewRefinedTS(dim, arms int, cfg NeuralConfig, rng *rand.Rand) (*RefinedTS, error) {
	m, err := newModel(dim, arms, cfg, rng)
	if err != nil {
		return nil, err
	}
	ref, err := posterior.NewRefiner(m.likelihood(), m.cfg.Refine)
	if err != nil {
		return nil, err
	}
	return &RefinedTS{m: m, ref: ref, w: make([]float64, m.arch.NumParams())}, nil
}

func (p *RefinedTS) Name() string { return "refined-ts" }

// Decide implements Policy. Before the first reward there is no data to
// refine against and the samples are mean-field ones (Sample says so).
// Probabilities are the frequencies with which each arm is the argmax of
// a single one of the S refined samples: an estimate from the samples at
// hand, of the probability that a refined sample prefers each arm.
func (p *RefinedTS) Decide(ctx context.Context, x []float64, excluded []bool) (Decision, error) {
	m := p.m
	if err := checkContext(x, m.arch.In()); err != nil {
		return Decision{}, err
	}
	if err := checkExcluded(excluded, m.arch.Out()); err != nil {
		return Decision{}, err
	}
	if m.data.Len() == 0 {
		scores := m.meanFieldScores(x)
		return Decision{Arm: Argmax(scores, excluded, m.rng), Scores: append([]float64(nil), scores...), Sample: SampleMeanField}, nil
	}
	arms := m.arch.Out()
	probs := make([]float64, arms)
	clear(m.sum)
	for range m.cfg.Samples {
		if _, _, err := p.ref.Refine(ctx, p.w, m.q, m.rng); err != nil {
			return Decision{}, fmt.Errorf("policy: refine: %w", err)
		}
		out := m.predict(p.w, x)
		for a, v := range out {
			m.sum[a] += v
		}
		probs[Argmax(out, excluded, m.rng)] += 1 / float64(m.cfg.Samples)
	}
	for a := range m.sum {
		m.sum[a] /= float64(m.cfg.Samples)
	}
	return Decision{
		Arm:           Argmax(m.sum, excluded, m.rng),
		Scores:        append([]float64(nil), m.sum...),
		Probabilities: probs,
		Sample:        SampleRefined,
	}, nil
}

func (p *RefinedTS) Observe(ctx context.Context, x []float64, arm int, reward float64) error {
	trained, err := p.m.observe(ctx, x, arm, reward)
	if trained {
		p.ref.SetLikelihood(p.m.tr.Likelihood())
	}
	return err
}

// EpsilonGreedy plays the arm with the highest predicted reward under a
// point-estimate network with probability 1 - epsilon and a uniformly
// random arm otherwise (Havasi et al. 2021, Section 4.3, baseline). The
// point estimate is the MAP of the same network and prior, trained on the
// same schedule as the Bayesian policies (the deterministic estimator:
// the prior acts as weight decay). With Epsilon = 0 it is Greedy.
type EpsilonGreedy struct {
	m   *model
	eps float64
}

var _ Policy = (*EpsilonGreedy)(nil)

// NewEpsilonGreedy returns epsilon-greedy with cfg.Epsilon; the estimator
// setting is ignored (the network is a point estimate).
func NewEpsilonGreedy(dim, arms int, cfg NeuralConfig, rng *rand.Rand) (*EpsilonGreedy, error) {
	cfg.Estimator = nn.Deterministic
	m, err := newModel(dim, arms, cfg, rng)
	if err != nil {
		return nil, err
	}
	return &EpsilonGreedy{m: m, eps: m.cfg.Epsilon}, nil
}

func (p *EpsilonGreedy) Name() string {
	if p.eps == 0 {
		return "greedy"
	}
	return fmt.Sprintf("eps-greedy-%g", p.eps)
}

// Decide implements Policy; the probabilities are exact: 1 - eps + eps/K
// for the greedy arm and eps/K for the others, K the number of allowed
// arms.
func (p *EpsilonGreedy) Decide(_ context.Context, x []float64, excluded []bool) (Decision, error) {
	m := p.m
	if err := checkContext(x, m.arch.In()); err != nil {
		return Decision{}, err
	}
	if err := checkExcluded(excluded, m.arch.Out()); err != nil {
		return Decision{}, err
	}
	scores := append([]float64(nil), m.predict(m.q.Mu, x)...)
	greedy := Argmax(scores, excluded, m.rng)
	allowed := 0
	for a := range scores {
		if excluded == nil || !excluded[a] {
			allowed++
		}
	}
	probs := make([]float64, len(scores))
	for a := range probs {
		if excluded == nil || !excluded[a] {
			probs[a] = p.eps / float64(allowed)
		}
	}
	probs[greedy] += 1 - p.eps
	arm := greedy
	if p.eps > 0 && m.rng.Float64() < p.eps {
		k := m.rng.IntN(allowed)
		for a := range scores {
			if excluded != nil && excluded[a] {
				continue
			}
			if k == 0 {
				arm = a
				break
			}
			k--
		}
	}
	return Decision{Arm: arm, Scores: scores, Probabilities: probs, Sample: SamplePoint}, nil
}

func (p *EpsilonGreedy) Observe(ctx context.Context, x []float64, arm int, reward float64) error {
	_, err := p.m.observe(ctx, x, arm, reward)
	return err
}
