package bandit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/posterior"
)

// PolicyKind names a decision rule: one decider each (kinds.go).
type PolicyKind string

// FeatureType is the type of one context feature.
type FeatureType string

const (
	// Categorical features take one of their declared string values and
	// are one-hot encoded over them, in declared order.
	Categorical FeatureType = "categorical"
	// Numeric features take a JSON number x, encoded as (x - center) /
	// scale.
	Numeric FeatureType = "numeric"
)

// Duration is a time.Duration that reads and writes JSON strings such as
// "50ms" or "10m" (time.ParseDuration).
type Duration time.Duration

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: kindOf(b)[strings.Index(kindOf(b), " ")+1:], Type: reflect.TypeFor[Duration]()}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[Duration]()}
	}
	*d = Duration(v)
	return nil
}

// Config is a bandit's configuration as the API accepts it. Zero values
// are replaced by the defaults documented on each field (Defaults); the
// stored configuration has them filled in, so that what a bandit does is
// visible in what GET returns.
type Config struct {
	// Name identifies the bandit in URLs: 1 to 64 characters from
	// [A-Za-z0-9._-], starting with a letter or digit. Required.
	Name string `json:"name"`
	// Arms names the arms, 2 to 100 distinct non-empty names (a new
	// bandit needs 2: with one there is nothing to choose). Required.
	Arms []string `json:"arms"`
	// Features is the context schema, 1 to 1000 distinct features.
	// Required.
	Features []Feature `json:"features"`

	Policy     PolicyConfig     `json:"policy"`
	Model      ModelConfig      `json:"model"`
	Training   TrainingConfig   `json:"training"`
	Refinement RefinementConfig `json:"refinement"`
	Reward     RewardConfig     `json:"reward"`
}

// Feature is one context feature.
type Feature struct {
	// Name is the key of the feature in a decision's context object.
	Name string `json:"name"`
	// Type is "categorical" or "numeric".
	Type FeatureType `json:"type"`
	// Values lists the declared categories of a categorical feature, 1
	// to 1000 distinct strings; a context with any other value is
	// rejected. Not allowed for numeric features.
	Values []string `json:"values,omitempty"`
	// Center and Scale standardize a numeric feature: it is encoded as
	// (x - Center) / Scale. Defaults 0 and 1 (the value as given). Not
	// allowed for categorical features.
	Center *float64 `json:"center,omitempty"`
	Scale  *float64 `json:"scale,omitempty"`
	// Optional features may be missing from (or null in) a context: a
	// missing categorical encodes as all zeros, a missing numeric as
	// Center (zero after standardization). Default false: required.
	Optional bool `json:"optional"`
}

// PolicyConfig chooses the decision rule.
type PolicyConfig struct {
	// Kind is one of refined-ts (default), mf-ts, eps-greedy, greedy,
	// uniform, linear-ts, laplace-ts, flow-ts, neural-linear.
	Kind PolicyKind `json:"kind"`
	// Laplace is laplace-ts's structure: "diagonal" (default; the whole
	// network, diagonal generalized Gauss-Newton, prior variance
	// model.prior_variance) or "last-layer" (the output layer with full
	// covariance per arm, prior precision by marginal likelihood). Only
	// laplace-ts.
	Laplace string `json:"laplace,omitempty"`
	// Flow is flow-ts's radial flow, with the defaults of FlowConfig.
	// Only flow-ts.
	Flow *FlowConfig `json:"flow,omitempty"`
	// Samples is the number S of posterior samples whose predictions
	// are averaged for one Thompson-sampling decision; default 3 (the
	// paper's refined sampler, Havasi et al. 2021, Section 4.3), 1..100.
	Samples int `json:"samples"`
	// Epsilon is the exploration rate of eps-greedy, in [0, 1]; default
	// 0.05 (the larger of the paper's two baselines). Greedy has 0; the
	// other kinds have none.
	Epsilon *float64 `json:"epsilon,omitempty"`
	// MaxSampleUses is how many decisions one refined sample may
	// serve; default 1000, 1..1000000. A sample drawn independently of
	// the contexts stays a valid posterior draw for each of them
	// (batched Thompson sampling), so reuse costs diversity between
	// decisions, not validity: bench/mushroom-reuse measures its regret.
	// 1 is the paper's offline protocol, fresh samples for every
	// decision.
	MaxSampleUses int `json:"max_sample_uses"`
	// MaxSampleAge is how long after it was banked a refined sample may
	// serve decisions; default "30s", 1ms..24h.
	MaxSampleAge *Duration `json:"max_sample_age"`
	// MaxVersionsBehind is how many posterior versions older than the
	// newest published one a refined sample may be and still serve;
	// default 3, 0..1000 (0: only samples of the newest posterior).
	//
	// Decisions never wait for refinement: a refined-ts decision draws
	// its samples from those within these bounds, and when the bank has
	// fewer than Samples of them it acts on the freshest refined samples
	// past their bounds and says so (the decision's propensity block,
	// refinery_decisions_beyond_bounds_total). Mean-field samples serve
	// only before the bank's first refined samples.
	MaxVersionsBehind *int `json:"max_versions_behind"`
	// PropensitySamples is M, the number of groups of Samples draws
	// (the decision's own group included) from which the
	// Thompson-sampling policies estimate each arm's probability of
	// being chosen; default 32, 1..10000, and Samples x
	// PropensitySamples at most MaxDecisionDraws (with the budgets
	// MaxDecisionCost and MaxDecisionFloats). See Agent.Decide.
	PropensitySamples int `json:"propensity_samples"`
}

// ModelConfig is the Bayesian neural network of the neural policies.
type ModelConfig struct {
	// Hidden lists the ReLU hidden layer widths; default [100] (one
	// layer, DefaultThompsonHidden) for the mean-field Thompson samplers
	// (refined-ts, mf-ts) and [100, 100] (DefaultHidden, Havasi et al.
	// 2021, Section 4.3) for the other neural kinds. [] is a linear
	// model. At most 8 layers of 1..1024 units and 500,000 parameters
	// in all; see also the budgets (MaxDecisionCost, MaxTrainCost,
	// MaxRefineCost).
	Hidden []int `json:"hidden"`
	// Skip feeds the encoded context to the output layer beside the
	// last hidden layer (nn.Arch.WithSkip): each arm's output is a
	// linear model of the context plus the network, the "wide and deep"
	// network of Cheng et al. (2016). Default false. With no hidden
	// layer the model is linear already and Skip changes nothing. Under
	// the "fan-in" prior the output layer's weights on the context take
	// N(0, v) each, linear TS's prior, and those on the hidden units
	// N(0, v/H).
	Skip *bool `json:"skip"`
	// PriorVariance is v of the weight prior, in the network's output
	// units (standardized rewards, or logits); default 1. See Prior.
	PriorVariance float64 `json:"prior_variance"`
	// Prior is the zero-mean Gaussian prior of the weights: "fan-in"
	// (default for refined-ts and mf-ts; "fixed" for the kinds that fit
	// a point estimate, eps-greedy, greedy, laplace-ts, flow-ts and
	// neural-linear) scales each layer's weight variance by its fan-in,
	// N(0, g v/In) with g = 2 for the layers a ReLU follows and 1 for the
	// output layer (the scaling of He et al. 2015 that keeps a prior
	// network's outputs at about unit variance whatever the widths),
	// and biases N(0, v); "fixed" is N(0, v) on every weight and bias,
	// Havasi et al. (2021)'s N(0, 1) with the default v, under which a
	// prior draw of the 2x100 network has outputs of standard
	// deviation in the hundreds (the `paper` preset keeps it).
	Prior string `json:"prior"`
	// InitSigma is the initial standard deviation of every factor of
	// the mean-field posterior as a fraction of its prior standard
	// deviation (means start He-style); default 0.1. Under the "fixed"
	// N(0, 1) prior 0.01 is the paper's initialization.
	InitSigma float64 `json:"init_sigma"`
	// Likelihood is the reward model of the network: "bernoulli" (0/1
	// rewards, or rewards in [0, 1]: the output is a logit and
	// p(reward = 1) = sigmoid(output); nn.Bernoulli), "gaussian" (real
	// rewards, standardized, with Gaussian noise whose variance is
	// learned per Noise under NoisePrior) or "auto" (default for
	// refined-ts and mf-ts; "gaussian" for the point-estimate kinds):
	// bernoulli while every reward seen is 0 or 1, gaussian otherwise (a
	// bandit whose first rewards were 0/1 and which then sees another
	// value restarts its network from the prior under the Gaussian
	// likelihood and trains on every stored reward again). laplace-ts
	// "last-layer", flow-ts and neural-linear fit a Gaussian linear
	// model to the last layer and always use "gaussian".
	Likelihood Likelihood `json:"likelihood"`
	// Noise is how the Gaussian likelihood's noise variance is learned:
	// "shared" (default; one for all arms, as in the paper) or "per-arm"
	// (one per arm). Per arm is not the default because of the mushroom
	// bandit: its "pass" arm always pays 0, so that arm's learned noise
	// shrinks without bound and its sharp likelihood narrows the
	// posterior of the hidden layers every arm shares, which then stops
	// exploring; on 2,000 steps (seed 1, fast preset, mf-ts,
	// collapsed-mean) per-arm noise locked into passing at 5,240 regret
	// where shared noise learned at 1,540 (docs/model.md).
	Noise string `json:"noise"`
	// NoisePrior is the inverse-gamma prior of each learned noise
	// variance, in standardized reward units (nn.InvGamma); default
	// shape 2, rate 0.5 (prior mode 0.17, a quarter of the rewards'
	// variance at no data, worth four rewards; none for the
	// point-estimate kinds). Shape and rate both 0: no prior, the
	// maximum-likelihood noise of the paper.
	NoisePrior *NoisePrior `json:"noise_prior"`
}

// NoisePrior is an inverse-gamma prior on a noise variance.
type NoisePrior struct {
	Shape float64 `json:"shape"`
	Rate  float64 `json:"rate"`
}

// Weight priors of model.prior and noise structures of model.noise.
const (
	PriorFanIn  = "fan-in"
	PriorFixed  = "fixed"
	NoisePerArm = "per-arm"
	NoiseShared = "shared"
)

// TrainingConfig is the trainer: after new rewards arrive it runs
// Iterations Adam iterations of the ELBO on minibatches of all stored
// rewarded decisions, then publishes a new posterior version.
type TrainingConfig struct {
	// Iterations is the most Adam iterations of one retraining; default
	// 500, 1..100000.
	Iterations int `json:"iterations"`
	// IterationsPerReward: a retraining runs this many iterations per
	// reward that arrived since the last one, at most Iterations;
	// default 20, 1..100000. The posterior is warm-started from the
	// previous one, so the work follows the new data. The paper's
	// offline protocol (500 iterations after every reward) is 500 here
	// and in Iterations.
	IterationsPerReward int `json:"iterations_per_reward"`
	// StopTolerance stops a retraining early once the mean minibatch
	// ELBO of a tenth of its iterations changes by at most this
	// fraction of its magnitude from the previous tenth; default 0
	// (never stop early: run the iterations the rewards pay for), 0..1.
	// The ELBO's magnitude is dominated by the KL term and the
	// minibatch estimate is noisy, so the old default 0.001 stopped
	// most retrainings after their second tenth, far from converged:
	// on the new-user problem (TestNewUserBanditLearns) mean-field TS
	// ended at 6.8 to 73 times linear TS's regret on three streams
	// with it and 0.2 to 2.3 times without it (docs/model.md).
	StopTolerance *float64 `json:"stop_tolerance"`
	// CPUShare is the average share of one core the bandit's trainer
	// may take: after a retraining that took d, the next starts no
	// sooner than d (1/CPUShare - 1) later (and no sooner than
	// MinInterval after its start); default 0.25, (0, 1]. The
	// refinement workers (one per core less one, shared by every
	// refined-ts bandit) and the request path take the rest.
	CPUShare float64 `json:"cpu_share"`
	// BatchSize of the minibatches; default 64 (Section 4.3), 1..4096.
	BatchSize int `json:"batch_size"`
	// LR is Adam's learning rate; default 1e-3 (Section 4.3).
	LR float64 `json:"lr"`
	// SigmaLR is Adam's learning rate for the posterior standard
	// deviations of the mean-field policies (their softplus parameters)
	// when larger than LR; default 1e-3 (LR's), (0, 1]. Adam moves a
	// parameter by about its learning rate per iteration, so at 1e-3 a
	// standard deviation needs thousands of iterations to reach the
	// width the data give it, and the posterior's width follows the
	// iteration count (posterior.TrainConfig.SigmaLR). A larger rate
	// removes most of that, but on the showdown's problems it cost
	// regret (docs/model.md has the figures), so it is not the default.
	SigmaLR float64 `json:"sigma_lr"`
	// SnapshotEvery persists the posterior every this many versions
	// (and on shutdown); default 10, 1..1000000.
	SnapshotEvery int `json:"snapshot_every"`
	// MinInterval is the least time between the starts of two
	// retrainings; default "1s", 0..1h. Rewards that arrive meanwhile
	// are trained on together. It bounds the trainer's CPU use and how
	// often a new posterior makes the bank's refined samples stale.
	MinInterval *Duration `json:"min_interval"`
	// Estimator is how the trainer of the mean-field policies
	// (refined-ts, mf-ts) estimates the ELBO's expected log-likelihood
	// and its gradient: "local-reparam" (default; local
	// reparameterization, Kingma et al. 2015), "weight-reparam" (one
	// weight sample per minibatch, Blundell et al. 2015) or "ris"
	// (reparameterized importance sampling of each hidden layer's first
	// moment, Long et al. 2024; it optimizes the paper's
	// moment-propagation objective rather than the ELBO itself, with less
	// gradient variance: bench/ris.md; but on the mushroom bandit the
	// posterior it trains made mean-field TS pass almost always,
	// bench/ris-mushroom.md). eps-greedy, greedy, laplace-ts, flow-ts and
	// neural-linear train a point estimate (the MAP) and ignore it; refinement always uses local-reparam (its
	// ELBO_aux is the ELBO's).
	Estimator Estimator `json:"estimator"`
	// RISSamples is the number of importance samples per row and hidden
	// unit of "ris" (Algorithm 1's M); default 1, 1..16. Other
	// estimators ignore it.
	RISSamples int `json:"ris_samples"`
	// Bound is the objective the trainer of the mean-field policies
	// maximizes: "elbo" (the ELBO with the fixed prior
	// N(0, model.prior_variance)), "collapsed-mean" (default; CM-MF-VI,
	// Tomczak et al. 2021, Eq. 9: the prior means are learned in
	// closed form under a N(0, alpha) hyperprior and integrated out) or
	// "collapsed-mean-var" (CMV-MF-VI, Eq. 10: prior means and
	// variances, under a Gamma hyperprior on the prior precision whose
	// mean is 1/model.prior_variance). The trainer's reported ELBO is
	// then the collapsed bound. Under a collapsed bound refinement
	// targets the posterior under the prior the bound learned given q
	// (means (1 - collapsed_reg) mu, and under "collapsed-mean-var" its
	// learned variances; Agent.refineFrom, docs/model.md). The
	// default is collapsed-mean because on the mushroom bandit (5 seeds
	// x 10,000 steps, bench/mushroom-methods) mean-field TS with the
	// ELBO locked into one arm on 5 of 5 seeds (about 40% over 15) and
	// with collapsed-mean on none, ending at an eighth of the regret.
	// eps-greedy, greedy, laplace-ts, flow-ts and neural-linear train a
	// point estimate (the MAP) and ignore it.
	Bound Bound `json:"bound"`
	// CollapsedReg is alpha_reg = gamma/(gamma + alpha) of Eq. 9 and
	// delta of Eq. 10, the weight of the posterior means' regularization;
	// default 0.075 (Tomczak et al. 2021's), (0, 1]; 1 makes
	// "collapsed-mean" the ELBO. 0.02 plays letter and satellite better
	// but locks a new user's 4-arm problem into a wrong arm on more
	// streams (bench/collapsed-reg).
	CollapsedReg float64 `json:"collapsed_reg"`
	// CollapsedShape is the shape of Eq. 10's Gamma hyperprior on the
	// prior precisions; default 1, (0, 1000]. Other bounds ignore it.
	CollapsedShape float64 `json:"collapsed_shape"`
	// Optimizer is how the trainer of the mean-field policies steps the
	// posterior: "adam" (default; Adam on the means and the softplus
	// parameters of the standard deviations, at lr, Section 4.3) or
	// "ngvi" (natural-gradient VI, Khan 2018, Section 5:
	// natural-gradient steps of size ngvi_step in the Gaussian's natural
	// parameters, with the expected Hessian diagonal estimated from the
	// same gradient estimator; posterior.OptimizerNGVI). The noise
	// variance takes Adam steps at lr under both. Refinement always uses
	// Adam (Havasi et al. 2021, Section 3); eps-greedy and greedy train a
	// point estimate with Adam and ignore it.
	Optimizer Optimizer `json:"optimizer"`
	// NGVIStep is the natural-gradient step size beta of "ngvi";
	// default 0.01 (posterior.DefaultNGVIStep), (0, 1]. "adam" ignores it.
	NGVIStep float64 `json:"ngvi_step"`
}

// RefinementConfig is local refinement (Havasi et al. 2021, Algorithm 1)
// and the bank of refined samples.
type RefinementConfig struct {
	// Fractions are the auxiliary variances as fractions of the prior
	// variance, coarse to fine; default [0.7, 0.3] (Section 4.3). They
	// must be positive and sum to 1; at most 16.
	Fractions []float64 `json:"fractions"`
	// Iterations of Adam per conditional optimization; default 500
	// (Section 4.3), 1..100000.
	Iterations int `json:"iterations"`
	// LR of the first conditional optimization; default 1e-3 (Section
	// 4.3); step k uses LR * 0.3^(k/2).
	LR float64 `json:"lr"`
	// BatchSize of the minibatches; default 64.
	BatchSize int `json:"batch_size"`
	// BankSize is the most refined samples the bank keeps ready;
	// default 16, 1..1000.
	BankSize int `json:"bank_size"`
}

// RewardConfig says what happens to decisions that get no reward.
type RewardConfig struct {
	// Wait is how long a decision may wait for its reward; default
	// "10m" when absent or null (an explicit "0s" is kept, and is
	// invalid together with a default).
	Wait *Duration `json:"wait"`
	// Default, when a number, is stored as the reward of every decision
	// still unrewarded after Wait (a later reward with another value is
	// then a conflict, 409); when null (default), such decisions are
	// left out of training until their reward comes, however late.
	Default *float64 `json:"default"`
}

// Defaults of Config; see its fields for where they come from.
const (
	DefaultPolicyKind        = RefinedTS
	DefaultSamples           = 3
	DefaultEpsilon           = 0.05
	DefaultMaxSampleUses     = 1000
	DefaultMaxSampleAge      = 30 * time.Second
	DefaultMaxVersionsBehind = 3
	DefaultIterationsPerRew  = 20
	DefaultStopTolerance     = 0.0
	DefaultCPUShare          = 0.25
	DefaultEstimator         = EstimatorLocalReparam
	DefaultRISSamples        = 1
	DefaultBound             = BoundCollapsedMean
	DefaultCollapsedReg      = posterior.DefaultCollapsedReg
	DefaultCollapsedShape    = posterior.DefaultCollapsedShape
	DefaultOptimizer         = OptimizerAdam
	DefaultNGVIStep          = posterior.DefaultNGVIStep
	DefaultPropensitySamples = 32
	DefaultPriorVariance     = 1.0
	DefaultInitSigma         = 0.1
	DefaultSigmaLR           = posterior.DefaultLR
	DefaultNoiseShape        = 2.0
	DefaultNoiseRate         = 0.5
	DefaultTrainIterations   = 500
	DefaultSnapshotEvery     = 10
	DefaultMinInterval       = time.Second
	DefaultRefineIterations  = posterior.DefaultRefineIterations
	DefaultBankSize          = 16
	DefaultRewardWait        = 10 * time.Minute
)

// DefaultHidden and DefaultFractions are the paper's network and
// refinement schedule (Havasi et al. 2021, Section 4.3).
// DefaultThompsonHidden is the mean-field Thompson samplers' network:
// one hidden layer of 100. A mean-field posterior of the paper's two
// layers fitted the showdown's problems worse under the fan-in prior
// (docs/model.md, "One hidden layer").
var (
	DefaultHidden         = []int{100, 100}
	DefaultThompsonHidden = []int{100}
	DefaultFractions      = []float64{0.7, 0.3}
)

// Limits that keep one bandit from exhausting the service.
const (
	MaxArms = 100
	// MinArms is the fewest arms a new bandit may have. Validate lets a
	// stored configuration with one arm (accepted before issue 30) load;
	// Service.Create and Import refuse it.
	MinArms           = 2
	MaxFeatures       = 1000
	MaxValues         = 1000
	MaxNameLen        = 128
	MaxEncodedDim     = 10000
	MaxHiddenLayers   = 8
	MaxHiddenWidth    = 1024
	MaxParams         = 500_000
	MaxBanditNameLen  = 64
	MaxRISSamples     = 16
	maxDurationConfig = 10 * 365 * 24 * time.Hour
)

// Per-bandit compute and memory budgets (issue 16, finding 5: within the
// earlier limits one client could order a decision that allocated
// hundreds of MB, or a network no refinement finished in minutes). Each
// bounds a product of settings a client controls; the defaults use a
// small fraction of each (the paper's network on the mushroom features:
// 22,202 parameters).
const (
	// MaxDecisionDraws bounds policy.samples x policy.propensity_samples,
	// the posterior draws of one Thompson-sampling decision.
	MaxDecisionDraws = 10_000
	// MaxDecisionCost bounds draws x parameters, the multiply-adds of
	// one mf-ts decision (about 0.1 s on one core at the limit).
	MaxDecisionCost = 250_000_000
	// MaxDecisionFloats bounds draws x (hidden units + arms), the
	// activations one mf-ts decision holds (32 MiB at the limit).
	MaxDecisionFloats = 4 << 20
	// MaxTrainCost bounds training.iterations x training.batch_size x
	// parameters, the work of one retraining.
	MaxTrainCost = 20_000_000_000
	// MaxRefineCost bounds refinement.iterations x len(fractions) x
	// refinement.batch_size x parameters, the work of one refined sample.
	MaxRefineCost = 20_000_000_000
	// MaxLinearFloats bounds arms x inputs^2, the memory of linear-ts's
	// per-arm posteriors, and MaxLinearCost propensity_samples x arms x
	// inputs^2, the work of one linear-ts decision.
	MaxLinearFloats = 1 << 23
	MaxLinearCost   = 1_000_000_000
)

var banditNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// ParseConfig decodes a configuration strictly (unknown fields, trailing
// data and wrong types are errors), fills in the defaults and validates
// it. Every problem is reported as a *ValidationError naming the field.
func ParseConfig(data []byte) (*Config, error) {
	c, err := DecodeConfig(data)
	if err != nil {
		return nil, err
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeConfig decodes a configuration strictly, as ParseConfig does,
// without filling in the defaults or validating it: for a caller that
// hands it to Service.Create, which does both, once.
func DecodeConfig(data []byte) (*Config, error) {
	var c Config
	if err := DecodeStrict(data, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// DecodeStrict unmarshals one JSON value into v, rejecting unknown
// fields (at any depth, named by their path such as "policy.kindd") and
// keys that match a field only case-insensitively ("NAME" for "name"),
// and trailing data, and turns decoding errors into a
// *ValidationError naming the field (empty for the body as a whole:
// malformed JSON, including NaN and Infinity, which JSON does not have).
// CheckJSON runs first: duplicate keys, NUL characters, lone surrogates,
// invalid UTF-8 and deep nesting are rejected before anything is decoded.
func DecodeStrict(data []byte, v any) error {
	if err := CheckJSON(data); err != nil {
		return err
	}
	if err := checkFields(data, reflect.TypeOf(v)); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "unexpected data after the JSON value")
	}
	return nil
}

// jsonError turns an encoding/json error into a *ValidationError.
func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return invalid("", fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn))
	case errors.As(err, &typ):
		field := typ.Field
		detail := fmt.Sprintf("want %s, got JSON %s", typeName(typ.Type.String()), typ.Value)
		if typ.Value == "number" || strings.HasPrefix(typ.Value, "number ") {
			detail = fmt.Sprintf("want %s, got %s", typeName(typ.Type.String()), typ.Value)
		}
		return invalid(field, detail)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return invalid(name, "unknown field")
	case errors.Is(err, io.EOF):
		return invalid("", "empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("", "malformed JSON: unexpected end of input")
	}
	var fe *fieldErr
	if errors.As(err, &fe) {
		return invalid(fe.field, fe.detail)
	}
	return invalid("", "malformed JSON: "+err.Error())
}

// fieldErr is returned by custom UnmarshalJSON methods that know their
// field.
type fieldErr struct{ field, detail string }

func (e *fieldErr) Error() string { return e.field + ": " + e.detail }

func typeName(t string) string {
	switch {
	case strings.HasSuffix(t, "Duration"):
		return `a duration string such as "50ms" or "10m"`
	case strings.HasPrefix(t, "float"):
		return "a number"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case t == "string", strings.HasSuffix(t, "Kind"), strings.HasSuffix(t, "Type"):
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "bandit."):
		return "an object"
	}
	return t
}

// SetDefaults fills in zero fields with their defaults.
func (c *Config) SetDefaults() {
	p := &c.Policy
	if p.Kind == "" {
		p.Kind = DefaultPolicyKind
	}
	if p.Samples == 0 {
		p.Samples = DefaultSamples
	}
	if d := p.Kind.decider(); d != nil {
		d.setDefaults(p)
	}
	if p.MaxSampleUses == 0 {
		p.MaxSampleUses = DefaultMaxSampleUses
	}
	if p.MaxSampleAge == nil {
		d := Duration(DefaultMaxSampleAge)
		p.MaxSampleAge = &d
	}
	if p.MaxVersionsBehind == nil {
		v := DefaultMaxVersionsBehind
		p.MaxVersionsBehind = &v
	}
	if p.PropensitySamples == 0 {
		p.PropensitySamples = DefaultPropensitySamples
	}
	m := &c.Model
	if m.Hidden == nil {
		m.Hidden = append([]int(nil), DefaultHidden...)
		if p.Capabilities().MeanField {
			m.Hidden = append([]int(nil), DefaultThompsonHidden...)
		}
	}
	if m.Skip == nil {
		m.Skip = new(bool)
	}
	if m.PriorVariance == 0 {
		m.PriorVariance = DefaultPriorVariance
	}
	if m.InitSigma == 0 {
		m.InitSigma = DefaultInitSigma
	}
	// The mean-field Thompson samplers take the model of issue 28; the
	// kinds that fit a point estimate (the MAP) keep the model they had
	// (docs/model.md: under the fan-in prior their MAP is regularized 50
	// to 100 times more strongly and they played 2 to 3 times worse).
	if m.Prior == "" {
		m.Prior = PriorFanIn
		if p.Capabilities().MAP {
			m.Prior = PriorFixed
		}
	}
	if m.Likelihood == "" {
		m.Likelihood = LikelihoodAuto
		if p.Capabilities().MAP {
			m.Likelihood = LikelihoodGaussian
		}
	}
	if m.Noise == "" {
		m.Noise = NoiseShared
	}
	if m.NoisePrior == nil {
		m.NoisePrior = &NoisePrior{Shape: DefaultNoiseShape, Rate: DefaultNoiseRate}
		if p.Capabilities().MAP {
			m.NoisePrior = &NoisePrior{}
		}
	}
	t := &c.Training
	if t.Iterations == 0 {
		t.Iterations = DefaultTrainIterations
	}
	if t.BatchSize == 0 {
		t.BatchSize = posterior.DefaultBatchSize
	}
	if t.LR == 0 {
		t.LR = posterior.DefaultLR
	}
	if t.SigmaLR == 0 {
		t.SigmaLR = DefaultSigmaLR
	}
	if t.SnapshotEvery == 0 {
		t.SnapshotEvery = DefaultSnapshotEvery
	}
	if t.MinInterval == nil {
		d := Duration(DefaultMinInterval)
		t.MinInterval = &d
	}
	if t.IterationsPerReward == 0 {
		t.IterationsPerReward = DefaultIterationsPerRew
	}
	if t.StopTolerance == nil {
		v := DefaultStopTolerance
		t.StopTolerance = &v
	}
	if t.CPUShare == 0 {
		t.CPUShare = DefaultCPUShare
	}
	if t.Estimator == "" {
		t.Estimator = DefaultEstimator
	}
	if t.RISSamples == 0 {
		t.RISSamples = DefaultRISSamples
	}
	if t.Bound == "" {
		t.Bound = DefaultBound
	}
	if t.CollapsedReg == 0 {
		t.CollapsedReg = DefaultCollapsedReg
	}
	if t.CollapsedShape == 0 {
		t.CollapsedShape = DefaultCollapsedShape
	}
	if t.Optimizer == "" {
		t.Optimizer = DefaultOptimizer
	}
	if t.NGVIStep == 0 {
		t.NGVIStep = DefaultNGVIStep
	}
	r := &c.Refinement
	if r.Fractions == nil {
		r.Fractions = append([]float64(nil), DefaultFractions...)
	}
	if r.Iterations == 0 {
		r.Iterations = DefaultRefineIterations
	}
	if r.LR == 0 {
		r.LR = posterior.DefaultLR
	}
	if r.BatchSize == 0 {
		r.BatchSize = posterior.DefaultBatchSize
	}
	if r.BankSize == 0 {
		r.BankSize = DefaultBankSize
	}
	if c.Reward.Wait == nil {
		d := Duration(DefaultRewardWait)
		c.Reward.Wait = &d
	}
	for i := range c.Features {
		f := &c.Features[i]
		if f.Type == Numeric {
			if f.Center == nil {
				v := 0.0
				f.Center = &v
			}
			if f.Scale == nil {
				v := 1.0
				f.Scale = &v
			}
		}
	}
}

// Validate checks a configuration whose defaults are filled in and
// returns a *ValidationError listing every problem, or nil.
func (c *Config) Validate() error {
	var v validator
	switch {
	case c.Name == "":
		v.add("name", "required")
	case len(c.Name) > MaxBanditNameLen || !banditNameRE.MatchString(c.Name):
		v.add("name", fmt.Sprintf("want 1 to %d characters from [A-Za-z0-9._-], starting with a letter or digit", MaxBanditNameLen))
	}
	switch {
	case len(c.Arms) == 0:
		v.add("arms", fmt.Sprintf("want at least %d arms", MinArms))
	case len(c.Arms) > MaxArms:
		v.add("arms", fmt.Sprintf("%d arms, want at most %d", len(c.Arms), MaxArms))
	default:
		v.names("arms", c.Arms)
	}
	c.validateFeatures(&v)
	c.validatePolicy(&v)
	if c.Policy.Capabilities().Network {
		c.validateModel(&v)
	}
	if len(v.errs) == 0 {
		c.validateCost(&v)
	}
	r := c.Reward
	var wait Duration
	if r.Wait != nil {
		wait = *r.Wait
	}
	if wait < 0 || time.Duration(wait) > maxDurationConfig {
		v.add("reward.wait", "want a duration between 0s and 10 years")
	}
	if r.Default != nil {
		v.bounded("reward.default", *r.Default, MaxRewardAbs)
		if wait <= 0 {
			v.add("reward.wait", "want a positive duration when reward.default is set")
		}
	}
	return v.err()
}

func (c *Config) validateFeatures(v *validator) {
	switch {
	case len(c.Features) == 0:
		v.add("features", "want at least one feature")
		return
	case len(c.Features) > MaxFeatures:
		v.add("features", fmt.Sprintf("%d features, want at most %d", len(c.Features), MaxFeatures))
		return
	}
	names := make([]string, len(c.Features))
	dim := 0
	for i, f := range c.Features {
		names[i] = f.Name
		at := fmt.Sprintf("features[%d]", i)
		switch f.Type {
		case Categorical:
			switch {
			case len(f.Values) == 0:
				v.add(at+".values", "a categorical feature needs at least one declared value")
			case len(f.Values) > MaxValues:
				v.add(at+".values", fmt.Sprintf("%d values, want at most %d", len(f.Values), MaxValues))
			default:
				v.names(at+".values", f.Values)
			}
			if f.Center != nil || f.Scale != nil {
				v.add(at, "center and scale apply to numeric features only")
			}
			dim += len(f.Values)
		case Numeric:
			if f.Values != nil {
				v.add(at+".values", "values apply to categorical features only")
			}
			if f.Center != nil {
				v.bounded(at+".center", *f.Center, MaxNumericAbs)
			}
			if f.Scale != nil && !(*f.Scale >= 1/MaxNumericAbs && *f.Scale <= MaxNumericAbs) {
				v.add(at+".scale", fmt.Sprintf("want a number in [%g, %g]", 1/MaxNumericAbs, MaxNumericAbs))
			}
			dim++
		case "":
			v.add(at+".type", `required: "categorical" or "numeric"`)
		default:
			v.add(at+".type", fmt.Sprintf(`unknown type %q: want "categorical" or "numeric"`, f.Type))
		}
	}
	v.names("features", names)
	if dim > MaxEncodedDim {
		v.add("features", fmt.Sprintf("the features encode to %d inputs, want at most %d", dim, MaxEncodedDim))
	}
}

func (c *Config) validatePolicy(v *validator) {
	p := c.Policy
	d := p.Kind.decider()
	if d == nil {
		v.add("policy.kind", fmt.Sprintf("unknown policy %q: want one of %s", p.Kind, kindList()))
	}
	// The options only some kinds take: given to another kind, they are
	// an error naming the kind that takes them.
	for _, o := range []struct {
		name string
		set  bool
	}{{"laplace", p.Laplace != ""}, {"flow", p.Flow != nil}} {
		if o.set && !p.Kind.Takes(o.name) {
			v.add("policy."+o.name, fmt.Sprintf("%s applies to %s only", o.name, optionOwner(o.name)))
		}
	}
	v.intRange("policy.samples", p.Samples, 1, 100)
	v.intRange("policy.max_sample_uses", p.MaxSampleUses, 1, 1000000)
	if p.MaxVersionsBehind != nil {
		v.intRange("policy.max_versions_behind", *p.MaxVersionsBehind, 0, 1000)
	}
	if p.MaxSampleAge != nil && (*p.MaxSampleAge < Duration(time.Millisecond) || time.Duration(*p.MaxSampleAge) > 24*time.Hour) {
		v.add("policy.max_sample_age", "want a duration between 1ms and 24h")
	}
	v.intRange("policy.propensity_samples", p.PropensitySamples, 1, 10000)
	if p.Epsilon != nil && !p.Kind.Takes("epsilon") {
		v.add("policy.epsilon", fmt.Sprintf("epsilon applies to %s only", optionOwner("epsilon")))
	}
	if d != nil {
		d.validate(p, v)
	}
}

// kindList is the policy kinds joined by ", ".
func kindList() string {
	var b strings.Builder
	for i, k := range PolicyKinds() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(k))
	}
	return b.String()
}

func (c *Config) validateModel(v *validator) {
	m := c.Model
	if len(m.Hidden) > MaxHiddenLayers {
		v.add("model.hidden", fmt.Sprintf("%d hidden layers, want at most %d", len(m.Hidden), MaxHiddenLayers))
	} else {
		ok := true
		for i, h := range m.Hidden {
			if h < 1 || h > MaxHiddenWidth {
				v.add(fmt.Sprintf("model.hidden[%d]", i), fmt.Sprintf("width %d, want 1..%d", h, MaxHiddenWidth))
				ok = false
			}
		}
		if ok && c.encodedDim() > 0 && c.encodedDim() <= MaxEncodedDim && len(c.Arms) > 0 && len(c.Arms) <= MaxArms {
			if n := modelArch(m, c.encodedDim(), len(c.Arms)).NumParams(); n > MaxParams {
				v.add("model.hidden", fmt.Sprintf("the network has %d parameters, want at most %d", n, MaxParams))
			}
		}
	}
	v.positive("model.prior_variance", m.PriorVariance, 1e6)
	v.positive("model.init_sigma", m.InitSigma, 1e3)
	v.oneOf("model.prior", m.Prior, PriorFanIn, PriorFixed)
	if _, err := ParseLikelihood(string(m.Likelihood)); err != nil {
		v.add("model.likelihood", fmt.Sprintf("%q, %v", m.Likelihood, err))
	}
	v.oneOf("model.noise", m.Noise, NoisePerArm, NoiseShared)
	if np := m.NoisePrior; np != nil && !(np.Shape == 0 && np.Rate == 0) {
		v.positive("model.noise_prior.shape", np.Shape, 1e6)
		v.positive("model.noise_prior.rate", np.Rate, 1e6)
	}
	t := c.Training
	v.intRange("training.iterations", t.Iterations, 1, 100000)
	v.intRange("training.batch_size", t.BatchSize, 1, 4096)
	v.positive("training.lr", t.LR, 1)
	v.positive("training.sigma_lr", t.SigmaLR, 1)
	v.intRange("training.snapshot_every", t.SnapshotEvery, 1, 1000000)
	v.intRange("training.iterations_per_reward", t.IterationsPerReward, 1, 100000)
	if t.StopTolerance != nil && !(*t.StopTolerance >= 0 && *t.StopTolerance <= 1) {
		v.add("training.stop_tolerance", "want a number in [0, 1]")
	}
	v.positive("training.cpu_share", t.CPUShare, 1)
	if t.MinInterval != nil && (*t.MinInterval < 0 || time.Duration(*t.MinInterval) > time.Hour) {
		v.add("training.min_interval", "want a duration between 0s and 1h")
	}
	if _, err := t.estimator(); err != nil {
		v.add("training.estimator", err.Error())
	}
	v.intRange("training.ris_samples", t.RISSamples, 1, MaxRISSamples)
	if _, err := ParseBound(string(t.Bound)); err != nil {
		v.add("training.bound", fmt.Sprintf("%q, %v", t.Bound, err))
	}
	v.positive("training.collapsed_reg", t.CollapsedReg, 1)
	v.positive("training.collapsed_shape", t.CollapsedShape, 1000)
	if _, err := ParseOptimizer(string(t.Optimizer)); err != nil {
		v.add("training.optimizer", fmt.Sprintf("%q, %v", t.Optimizer, err))
	}
	v.positive("training.ngvi_step", t.NGVIStep, 1)
	r := c.Refinement
	if len(r.Fractions) > 16 {
		v.add("refinement.fractions", fmt.Sprintf("%d fractions, want at most 16", len(r.Fractions)))
	} else if _, err := (posterior.RefineConfig{Fractions: r.Fractions}).Schedule(); err != nil {
		v.add("refinement.fractions", strings.TrimPrefix(err.Error(), "posterior: ")+" (want positive numbers summing to 1)")
	}
	v.intRange("refinement.iterations", r.Iterations, 1, 100000)
	v.positive("refinement.lr", r.LR, 1)
	v.intRange("refinement.batch_size", r.BatchSize, 1, 4096)
	v.intRange("refinement.bank_size", r.BankSize, 1, 1000)
}

// validateCost checks the budgets of a configuration that is otherwise
// valid.
func (c *Config) validateCost(v *validator) {
	p := c.Policy
	caps := p.Capabilities()
	dim, arms := c.encodedDim(), len(c.Arms)
	draws := p.Samples * p.PropensitySamples
	// The Thompson samplers on the network's weights draw samples x
	// propensity_samples of them per decision; neural-linear's head is
	// exact.
	thompson := caps.Network && caps.Posterior && !caps.LinearHead
	if thompson && draws > MaxDecisionDraws {
		v.add("policy.propensity_samples", fmt.Sprintf("policy.samples x policy.propensity_samples = %d posterior draws per decision, want at most %d", draws, MaxDecisionDraws))
		return
	}
	switch {
	case caps.Network:
		arch := modelArch(c.Model, dim, arms)
		params := float64(arch.NumParams())
		units := arms
		for _, h := range c.Model.Hidden {
			units += h
		}
		// The output layer's inputs: its Gram matrices (last-layer
		// Laplace, flow-ts) and NeuralLinear's per-arm posteriors are
		// arms x (inputs+1)^2.
		last := float64(arch.Layer(arch.NumLayers()-1).In + 1)
		if caps.LastLayer || caps.LinearHead {
			if fl := float64(arms) * last * last; fl > MaxLinearFloats {
				v.add("model.hidden", fmt.Sprintf("%d arms x %.0f^2 last-layer inputs = %.3g numbers, want at most %d (a narrower last hidden layer or fewer arms)", arms, last, fl, MaxLinearFloats))
			}
		}
		switch {
		case caps.LastLayer:
			if cost := float64(draws) * float64(arms) * last * last; cost > MaxDecisionCost {
				v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %d arms x %.0f^2 last-layer inputs = %.3g per decision, want at most %.3g", draws, arms, last, cost, float64(MaxDecisionCost)))
			}
			if f := p.Flow; f != nil {
				if cost := float64(f.Iterations) * float64(arms) * last * (last + float64(f.Length)); cost > MaxTrainCost {
					v.add("policy.flow.iterations", fmt.Sprintf("%d iterations x %d arms x %.0f last-layer inputs x (inputs + length) = %.3g per fit, want at most %.3g", f.Iterations, arms, last, cost, float64(MaxTrainCost)))
				}
			}
		case caps.LinearHead:
			if cost := float64(p.PropensitySamples) * float64(arms) * last * last; cost > MaxLinearCost {
				v.add("policy.propensity_samples", fmt.Sprintf("%d propensity samples x %d arms x %.0f^2 features = %.3g per decision, want at most %.3g", p.PropensitySamples, arms, last, cost, float64(MaxLinearCost)))
			}
		case thompson:
			if cost := float64(draws) * params; cost > MaxDecisionCost {
				v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %.0f parameters = %.3g multiply-adds per decision, want at most %.3g (fewer samples or propensity_samples, or a smaller network)", draws, params, cost, float64(MaxDecisionCost)))
			}
			if fl := draws * units; fl > MaxDecisionFloats {
				v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %d units = %d activations per decision, want at most %d", draws, units, fl, MaxDecisionFloats))
			}
		}
		t := c.Training
		if cost := float64(t.Iterations) * float64(t.BatchSize) * params; cost > MaxTrainCost {
			v.add("training.iterations", fmt.Sprintf("%d iterations x batch %d x %.0f parameters = %.3g per retraining, want at most %.3g", t.Iterations, t.BatchSize, params, cost, float64(MaxTrainCost)))
		}
		r := c.Refinement
		if cost := float64(r.Iterations) * float64(len(r.Fractions)) * float64(r.BatchSize) * params; caps.SampleBank && cost > MaxRefineCost {
			v.add("refinement.iterations", fmt.Sprintf("%d iterations x %d fractions x batch %d x %.0f parameters = %.3g per refined sample, want at most %.3g", r.Iterations, len(r.Fractions), r.BatchSize, params, cost, float64(MaxRefineCost)))
		}
	case caps.LinearHead:
		sq := float64(dim) * float64(dim)
		if fl := float64(arms) * sq; fl > MaxLinearFloats {
			v.add("features", fmt.Sprintf("linear-ts keeps %d arms x %d^2 inputs = %.3g numbers, want at most %d (fewer inputs or arms)", arms, dim, fl, MaxLinearFloats))
		} else if cost := float64(p.PropensitySamples) * float64(arms) * sq; cost > MaxLinearCost {
			v.add("policy.propensity_samples", fmt.Sprintf("%d propensity samples x %d arms x %d^2 inputs = %.3g per decision, want at most %.3g", p.PropensitySamples, arms, dim, cost, float64(MaxLinearCost)))
		}
	}
}

// encodedDim is the length of an encoded context.
func (c *Config) encodedDim() int {
	dim := 0
	for _, f := range c.Features {
		if f.Type == Categorical {
			dim += len(f.Values)
		} else {
			dim++
		}
	}
	return dim
}

// validator collects field errors.
type validator struct {
	errs    []FieldError
	omitted int
}

func (v *validator) add(field, detail string) {
	if len(v.errs) >= MaxFieldErrors {
		v.omitted++
		return
	}
	v.errs = append(v.errs, FieldError{Field: field, Detail: detail})
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &ValidationError{Errors: v.errs, Omitted: v.omitted}
}

func (v *validator) intRange(field string, n, lo, hi int) {
	if n < lo || n > hi {
		v.add(field, fmt.Sprintf("%d, want %d..%d", n, lo, hi))
	}
}

func (v *validator) positive(field string, x, hi float64) {
	if !(x > 0 && x <= hi) {
		v.add(field, fmt.Sprintf("%g, want a number in (0, %g]", x, hi))
	}
}

func (v *validator) finite(field string, x float64) {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		v.add(field, "want a finite number")
	}
}

// bounded checks that x is a finite number of magnitude at most hi.
func (v *validator) bounded(field string, x, hi float64) {
	if !(math.Abs(x) <= hi) {
		v.add(field, fmt.Sprintf("%g, want a finite number in [-%g, %g]", x, hi, hi))
	}
}

// names checks a list of names: non-empty, printable, at most
// MaxNameLen bytes, distinct.
func (v *validator) names(field string, names []string) {
	seen := make(map[string]int, len(names))
	for i, n := range names {
		at := fmt.Sprintf("%s[%d]", field, i)
		if field == "features" {
			at += ".name"
		}
		if msg := checkName(n); msg != "" {
			v.add(at, msg)
			continue
		}
		if j, dup := seen[n]; dup {
			v.add(at, fmt.Sprintf("duplicate of %s[%d]: %q", field, j, n))
			continue
		}
		seen[n] = i
	}
}

func checkName(n string) string {
	switch {
	case n == "":
		return "empty name"
	case len(n) > MaxNameLen:
		return fmt.Sprintf("%d bytes, want at most %d", len(n), MaxNameLen)
	case !utf8.ValidString(n):
		return "not valid UTF-8"
	case strings.IndexFunc(n, unicode.IsControl) >= 0:
		return "contains control characters"
	}
	return ""
}

// estimator returns the nn.Estimator that Estimator names.
func (t TrainingConfig) estimator() (nn.Estimator, error) { return t.Estimator.nn() }

// oneOf checks that s is one of the allowed names.
func (v *validator) oneOf(field, s string, allowed ...string) {
	if slices.Contains(allowed, s) {
		return
	}
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = strconv.Quote(a)
	}
	v.add(field, fmt.Sprintf("%q, want one of %s", s, strings.Join(q, ", ")))
}
