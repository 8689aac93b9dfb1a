package spec

import "time"

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
	// service alone on its store; with replicas (bandit.Fleet), on the one that
	// holds the bandit's trainer lock, while the others install the
	// versions it persists.
	Trainer bool `json:"trainer"`
	// Health is the published posterior's health (bandit.Agent.Health).
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
	// deviation over all parameters (bandit.Agent.Spread has it per layer).
	MeanSigma *float64 `json:"mean_sigma,omitempty"`
}

// Health is the health of the published posterior (GET
// /v1/bandits/{name}'s status.health).
type Health struct {
	// ModelVersion is the posterior version the figures describe.
	ModelVersion int64 `json:"model_version"`
	// Layers is the posterior spread per affine layer: for mf-ts and
	// refined-ts the mean-field posterior's, for laplace-ts "diagonal"
	// the Laplace variances; absent for the other kinds, whose network
	// is a point estimate.
	Layers []LayerHealth `json:"layers,omitempty"`
	// Noise is the likelihood's noise against the rewards; absent for
	// the kinds without a network (uniform, linear-ts).
	Noise *NoiseHealth `json:"noise,omitempty"`
	// HeldOut is how well the previous version predicted the rewards
	// this one was then trained on; absent for version 0, for the kinds
	// without a network, and for versions this replica did not train (a
	// version loaded at start-up or installed from another replica).
	HeldOut *HeldOutHealth `json:"heldout,omitempty"`
	// LockIn is the lock-in alarm on the newest decisions.
	LockIn LockInHealth `json:"lock_in"`
}

// LayerHealth is the posterior spread of one affine layer.
type LayerHealth struct {
	// Layer numbers the affine layers from 1 (the first hidden layer)
	// to the output layer, as bandit.LayerSpread does.
	Layer      int `json:"layer"`
	In         int `json:"in"`
	Out        int `json:"out"`
	Parameters int `json:"parameters"`
	// MedianSigma is the median posterior standard deviation over the
	// layer's weights and biases, in the network's units.
	MedianSigma float64 `json:"median_sigma"`
	// AtPriorShare is the share of them whose standard deviation is at
	// least bandit.AtPriorFraction (0.9) of the prior's (model.prior,
	// model.prior_variance: bandit's priorVars), the share the data has not
	// narrowed.
	AtPriorShare float64 `json:"at_prior_share"`
	// PointEstimate says the layer is fitted as a point estimate, not
	// a posterior (model.stochastic "output": the hidden layers of
	// mf-ts and refined-ts). Its standard deviations are held at a
	// thousandth of the prior's, so MedianSigma reports that held
	// value and AtPriorShare is 0; neither measures the data.
	PointEstimate bool `json:"point_estimate"`
}

// NoiseHealth is the likelihood's noise against the rewards trained on.
type NoiseHealth struct {
	// Likelihood is the family the posterior was trained under:
	// "gaussian", or "bernoulli", which has no noise variance
	// (p(y = 1) = sigmoid(f)) and then Variances is absent.
	Likelihood string `json:"likelihood"`
	// Variances holds one entry per learned noise variance: one shared
	// by every arm (Arm absent) or one per arm (model.noise "per-arm",
	// and "context", whose entry is the arm's mean over its rewards).
	Variances []NoiseVariance `json:"variances,omitempty"`
}

// NoiseVariance is one learned noise variance beside the sample variance
// of the rewards it explains.
type NoiseVariance struct {
	// Arm is the arm of a per-arm noise; absent for a shared one.
	Arm string `json:"arm,omitempty"`
	// NoiseVariance is exp(hyper), in squared reward units; under
	// model.noise "context" the mean over the arm's rewards of its
	// noise variance at their contexts.
	NoiseVariance float64 `json:"noise_variance"`
	// RewardVariance is the sample variance (n - 1 denominator) of the
	// rewards the posterior was trained on (the arm's, for a per-arm
	// noise), in squared reward units; null with fewer than two. A
	// noise variance near it means the network explains little of the
	// rewards and attributes the rest to noise.
	RewardVariance *float64 `json:"reward_variance"`
	// Rewards is the number of rewards behind RewardVariance.
	Rewards int `json:"rewards"`
}

// HeldOutHealth is how well the published posterior predicted rewards it
// had not been trained on. Before each training the trainer scores the
// version still published on the rewards that arrived since it was
// trained (the newest bandit.HeldOutRows of them) and attaches the figures to
// the version it then publishes. The predictive density of a reward y of
// arm a at context x is
//
//	p(y | x) = 1/S sum_s p(y | f_a(x; w_s)),   w_s ~ the posterior,
//
// with S = bandit.HeldOutDraws draws for mf-ts, refined-ts (its mean-field
// posterior) and laplace-ts "diagonal", and S = 1, w = the MAP, for the
// kinds whose network is a point estimate (greedy, eps-greedy, laplace-ts
// "last-layer", flow-ts, neural-linear); p(y | f) is the likelihood the
// version was trained under with its learned noise (nn.Likelihood
// .LogDensity). For 0/1 rewards, with p_i the predicted p(y = 1) of the
// played arm (the mean over the draws of sigmoid(f) under the Bernoulli
// likelihood, of f clipped to [0, 1] under the Gaussian), the expected
// calibration error over B = bandit.CalibrationBins equal-width bins of p,
//
//	ECE = sum_b n_b/N |mean_{i in b} y_i - mean_{i in b} p_i|
//
// (Naeini, Cooper & Hauskrecht 2015; Guo et al. 2017, Eq. 3).
type HeldOutHealth struct {
	// ScoredBy is the version that made the predictions (the previous
	// one); Draws is S.
	ScoredBy int64 `json:"scored_by"`
	Draws    int   `json:"draws"`
	// Rewards is the number of rewards this version's figures are over:
	// those that arrived since ScoredBy was trained (at most
	// bandit.HeldOutRows, the newest).
	Rewards int `json:"rewards"`
	// LogLikPerReward is the mean log predictive density of those
	// rewards, in nats per reward (a density for Gaussian rewards, a
	// probability for Bernoulli ones).
	LogLikPerReward float64 `json:"log_lik_per_reward"`
	// CalibrationError is the ECE over those rewards, absent unless
	// every one is 0 or 1.
	CalibrationError *float64 `json:"calibration_error,omitempty"`
	// The same over the newest RecentRewards (at most bandit.HeldOutRows)
	// rewards scored so far by this replica's trainer, each by the
	// version published when it arrived: steadier than one version's
	// few rewards when the trainer retrains after every few.
	RecentRewards          int      `json:"recent_rewards"`
	RecentLogLikPerReward  float64  `json:"recent_log_lik_per_reward"`
	RecentCalibrationError *float64 `json:"recent_calibration_error,omitempty"`
}

// LockInHealth is the lock-in alarm: over the newest decisions (at most
// bandit.LockInWindow, at least bandit.LockInMinDecisions), one arm took
// at least bandit.LockInShare (99%) of them while the published posterior
// gives another arm a probability of being best above bandit.LockInLevel
// (0.05), averaged over those decisions' contexts:
//
//	P_best(k) = 1/N sum_i P_{theta ~ posterior}(k = argmax_{j allowed at i} f_j(x_i; theta)),
//
// the probability that one posterior draw's predicted rewards rank k
// first among the arms decision i allowed, which is Thompson sampling's
// probability with policy.samples = 1. The contexts are the decisions'
// own, kept in memory (a ring of the last bandit.LockInWindow per agent; none
// survive a restart); the posterior is the published version's,
// whatever posterior the decisions were made with. It is estimated from
// bandit.LockInDraws fresh draws per context (from the mean-field posterior for
// mf-ts and refined-ts, the Laplace variances for laplace-ts "diagonal",
// the diagonal Laplace posterior at the MAP, posterior.LaplaceDiag, for
// greedy and eps-greedy, whose own network has none; the exact
// Normal-inverse-gamma posterior for linear-ts and neural-linear), or
// from bandit.LockInSharedDraws draws shared by the contexts (the last-layer
// posteriors of laplace-ts "last-layer" and flow-ts). The alarm means
// that the play has stopped following the posterior: a policy that
// ignores its uncertainty (greedy), samples that are stale or too few,
// or a posterior that has widened since the decisions were made. A
// posterior that is confidently wrong does not raise it. uniform has no
// posterior and no alarm. On a live service BestProbability may be up
// to 10 s old (bandit.Agent.Health).
type LockInHealth struct {
	// Decisions is the number of newest decisions looked at; TopArm took
	// TopShare of them (absent before any decision).
	Decisions int     `json:"decisions"`
	TopArm    string  `json:"top_arm,omitempty"`
	TopShare  float64 `json:"top_share"`
	// BestProbability is P_best of every arm, computed only when the
	// share condition holds (Decisions >= 100, TopShare >= 0.99) and
	// the policy has a posterior.
	BestProbability map[string]float64 `json:"best_probability,omitempty"`
	// Alarm is true when TopShare >= bandit.LockInShare over at least
	// bandit.LockInMinDecisions decisions and another arm's P_best exceeds
	// bandit.LockInLevel.
	Alarm bool `json:"alarm"`
}
