package spec

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

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

// UnmarshalJSON reads a duration string; null leaves d unchanged (as
// encoding/json does for a plain field, and unmarshalJSONName for the
// named settings).
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: JSONKind(b)[strings.Index(JSONKind(b), " ")+1:], Type: reflect.TypeFor[Duration]()}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: strconv.Quote(s), Type: reflect.TypeFor[Duration]()}
	}
	*d = Duration(v)
	return nil
}

// Config is a bandit's configuration as the API accepts it. Zero values
// are replaced by the defaults documented on each field
// (bandit.SetDefaults, bandit.Validate checks the result); the stored
// configuration has them filled in, so that what a bandit does is
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
	// ArmFeatures is the arms' schema, declared as Features is (1 to
	// 1000 distinct features, the same types): a bandit with arm
	// features scores each (context, arm) pair with one model output,
	// so that arms are added and retired without growing the model and
	// a new arm's first scores come from the arms like it (Vowpal
	// Wabbit's action-dependent features, Personalizer's actions with
	// features). Absent: one model output per arm, arms described by
	// their name only.
	ArmFeatures []Feature `json:"arm_features,omitempty"`
	// ArmValues gives, keyed by arm name, each arm's features: an object
	// keyed by the names of ArmFeatures, read as a decision's context
	// is read against Features. Required for every arm when ArmFeatures
	// is given; not allowed without it.
	ArmValues map[string]json.RawMessage `json:"arm_values,omitempty"`
	// SlotFeatures is the schema of a ranked slot's features, declared
	// as Features is (1 to 1000 distinct features, names distinct from
	// Features'): a ranking request gives each slot's values
	// (slot_contexts), and slot j is decided on the context merged with
	// slot j's values (Vowpal Wabbit's conditional contextual bandits
	// with slot features, Personalizer's multi-slot). The model's input
	// is the context's features followed by these, each optional there:
	// a decision without them (a single decision, a ranking without
	// slot_contexts) encodes them as zeros. Absent: slots share the
	// context.
	SlotFeatures []Feature `json:"slot_features,omitempty"`
	// Retired names arms that are never chosen again (PATCH
	// retire_arms). Their decisions and rewards stay, and are trained
	// on; an arm keeps its place in Arms. At least one arm stays live.
	Retired []string `json:"retired,omitempty"`

	Policy     PolicyConfig     `json:"policy"`
	Model      ModelConfig      `json:"model"`
	Training   TrainingConfig   `json:"training"`
	Refinement RefinementConfig `json:"refinement"`
	Reward     RewardConfig     `json:"reward"`

	// Shadow is a candidate configuration (apprentice mode): trained on
	// the same rewards and asked for its choice at every decision
	// without acting on it. It inherits name, arms, features and reward
	// from the bandit; its policy, model, training and refinement take
	// the same defaults and are validated as the bandit's own. Absent:
	// no candidate.
	Shadow *ShadowConfig `json:"shadow,omitempty"`
}

// ShadowConfig is a candidate configuration of a bandit (Config.Shadow):
// the sections of Config that make a policy, with the same defaults.
type ShadowConfig struct {
	Policy     PolicyConfig     `json:"policy"`
	Model      ModelConfig      `json:"model"`
	Training   TrainingConfig   `json:"training"`
	Refinement RefinementConfig `json:"refinement"`
	// Since is when this candidate was set (at creation or by a PATCH
	// of shadow): the service sets it, a value given is replaced. The
	// shadow estimate is over the decisions made since, the choices of
	// this candidate.
	Since time.Time `json:"since,omitzero"`
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
	// are averaged for one Thompson-sampling decision, 1..100; default 1
	// (plain Thompson sampling, bandit.DefaultThompsonSamples) for the
	// mean-field Thompson samplers (refined-ts, mf-ts) and 3 (the
	// paper's refined sampler, Havasi et al. 2021, Section 4.3;
	// bandit.DefaultSamples) for the other kinds. On the new user's
	// 4-arm problem (bench/skip) the mean of 3 left a wrong score at a
	// rarely played (context, arm) pair unchallenged on 6 of 16 streams,
	// one sample on 1 of 16.
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
	// PropensitySamples at most bandit.MaxDecisionDraws (with the
	// budgets bandit.MaxDecisionCost and bandit.MaxDecisionFloats). See
	// bandit.Agent.Decide.
	PropensitySamples int `json:"propensity_samples"`
}

// ModelConfig is the Bayesian neural network of the neural policies.
type ModelConfig struct {
	// Hidden lists the ReLU hidden layer widths; default [100] (one
	// layer, bandit.DefaultThompsonHidden) for the mean-field Thompson
	// samplers (refined-ts, mf-ts) and [100, 100] (bandit.DefaultHidden,
	// Havasi et al. 2021, Section 4.3) for the other neural kinds. [] is
	// a linear model. At most 8 layers of 1..1024 units and 500,000
	// parameters in all; see also the budgets (bandit.MaxDecisionCost,
	// bandit.MaxTrainCost, bandit.MaxRefineCost).
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
	// HiddenPriorVariance is v of the hidden layers' weights and biases
	// (the output layer's is PriorVariance), scaled by fan-in as Prior
	// says; 0 means PriorVariance. Default 15 for refined-ts
	// and mf-ts, 0 for the other kinds. Under Stochastic "output" the
	// hidden layers are point estimates, and this is their weight decay:
	// under the collapsed-mean bound their means are the MAP of
	// N(0, g v_h/(In alpha_reg)) (alpha_reg is training.collapsed_reg).
	HiddenPriorVariance float64 `json:"hidden_prior_variance"`
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
	// Stochastic is which parameters have a posterior width: "output"
	// (default) or "all". Under "output" the output layer has a
	// mean-field posterior and the hidden layers are point estimates
	// trained with it (a partly stochastic network, Sharma et al.
	// 2023): their means follow the gradient of the MAP objective of
	// the same bound, their standard deviations are held at a
	// thousandth of the prior's, and refinement refines the output
	// layer given them, a linear model of the learned features. "all"
	// is every weight's mean-field posterior, as Havasi et al. (2021)
	// have it (the `paper` preset keeps it). On the showdown's six
	// problems (5 seeds, docs/model.md) "output" ended wheel-0.9,
	// wheel-0.99, wheel-0.5, satellite and letter with less regret
	// than "all" and locked into one arm on no seed where "all" did
	// on two of wheel-0.99. Only refined-ts and mf-ts.
	Stochastic string `json:"stochastic"`
	// InitSigma is the initial standard deviation of every factor of
	// the mean-field posterior as a fraction of its prior standard
	// deviation (means start He-style); default 1: the posterior starts
	// as wide as the prior and narrows as rewards arrive, whatever the
	// iterations a reward (at 0.1 Adam's steps widen it over thousands
	// of iterations, and under "output" the first two seeds of
	// wheel-0.99 locked into the safe arm; docs/model.md). Under the
	// "fixed" N(0, 1) prior 0.01 is the paper's initialization.
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
	// "context" (default for refined-ts and mf-ts: per arm, its log
	// linear in the encoded context, log s2_a(x) = c_a + u_a . x, a
	// heteroscedastic Gaussian, held at or above a hundredth of the
	// rewards' variance; nn.Options.NoiseContext), "shared" (the other
	// kinds' default; one for all arms, as in the paper) or "per-arm"
	// (one per arm). A context whose rewards vary a lot for an arm (the
	// mushroom's poisonous ones when eaten: +5 or -35) is then fitted
	// less closely than one whose rewards do not, where one shared
	// variance lets the network fit the draws; on the showdown's
	// Gaussian problems refined TS ended the mushroom 800 ± 157 lower
	// with it, wheel-0.5 564 ± 138 and wheel-0.99 624 ± 254, wheel-0.9
	// level (5 seeds paired; bench/mushroom-noise). Without the floor
	// the mushroom's "pass" arm, which always pays 0, had its noise fall
	// without bound and locked two seeds of five into passing, as
	// "per-arm" does (docs/model.md). Bernoulli rewards have no noise
	// variance and ignore it.
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
	PriorFanIn   = "fan-in"
	PriorFixed   = "fixed"
	NoisePerArm  = "per-arm"
	NoiseShared  = "shared"
	NoiseContext = "context"
	// Values of model.stochastic.
	StochasticAll    = "all"
	StochasticOutput = "output"
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
	// learned variances; bandit.Agent.refineFrom, docs/model.md). The
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

// FlowConfig is flow-ts's radial flow (posterior.FitFlow).
type FlowConfig struct {
	// Length is the number of radial layers; default 10 (the paper uses
	// 5 to 10, Kristiadi et al. 2022, Section 6), 1..50.
	Length int `json:"length"`
	// Iterations of Adam on the single-sample ELBO per fit (one fit per
	// model version); default 1000, 1..100000.
	Iterations int `json:"iterations"`
	// LR is Adam's initial step size, decayed to zero on a cosine;
	// default 0.03, (0, 1].
	LR float64 `json:"lr"`
}
