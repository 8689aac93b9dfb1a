package spec

// SampleKind says what a decision acted on.
type SampleKind string

const (
	SampleRefined   SampleKind = "refined"    // locally refined posterior sample(s)
	SampleMeanField SampleKind = "mean-field" // plain mean-field posterior sample(s)
	SamplePoint     SampleKind = "point"      // a point estimate (greedy, epsilon-greedy)
	SampleExact     SampleKind = "exact"      // a sample from an exact posterior (linear TS, NeuralLinear)
	SampleLaplace   SampleKind = "laplace"    // Laplace posterior sample(s) (laplace-ts)
	SampleFlow      SampleKind = "flow"       // flow-refined last-layer sample(s) (flow-ts)
	SampleNone      SampleKind = "none"       // no model (uniform)
)

// Propensity describes how a decision's probabilities were obtained.
type Propensity struct {
	// Estimator is "exact" (uniform, greedy, eps-greedy), "mean-field"
	// (Monte Carlo over groups of mean-field draws), "refined-pool"
	// (resampled groups of the refined samples at hand),
	// "linear-posterior" (computed from the exact posterior by numerical
	// integration: linear-ts, neural-linear; Exact), "laplace" (groups of Laplace draws:
	// laplace-ts) or "flow" (groups of flow-refined draws: flow-ts).
	Estimator string `json:"estimator"`
	// Samples is the number of distinct posterior samples behind the
	// estimate, Groups the number of groups of policy.samples draws
	// whose argmax frequencies (or, for "mean-field", conditional
	// probabilities) average to the probabilities (0 when exact).
	//
	// In a slot of a ranking (bandit.Agent.Rank) Groups counts the
	// groups, of those drawn, whose ranking starts with the slots above:
	// the groups behind the slot's probabilities (M for the first slot).
	Samples int `json:"samples"`
	Groups  int `json:"groups"`
	// Exact is true for "refined-pool" when Groups is every
	// policy.samples-subset of the samples at hand (at most
	// policy.MaxExactSubsets): the probabilities are then exact given
	// those samples, in steps of 1/Groups; and for "linear-posterior",
	// computed to about 1e-5 by policy.StudentWinProbs (Samples and
	// Groups 0).
	//
	// The chosen arm's estimate is never below what the decision's own
	// draw implies: the decision's group is one of the Groups counted,
	// so an argmax frequency gives it at least 1/Groups (1/Groups for an
	// exact subset enumeration, the decision's subset being one), and a
	// "mean-field" or "laplace" (diagonal) estimate with OutputDraws at
	// least 1/(Groups (OutputDraws+1)) (before the floor's mixing). The
	// standard error of a Monte Carlo estimate p̂ is at most
	// 1/(2 sqrt(Groups)).
	Exact bool `json:"exact,omitempty"`
	// OutputDraws, for "mean-field" with more than two allowed arms, is
	// the number of draws of the output layer's noise per group behind
	// each group's conditional probabilities (policy.WinProbs); with two
	// they are exact and it is absent.
	OutputDraws int `json:"output_draws,omitempty"`
	// StdError, for the Monte Carlo estimators (not Exact), bounds the
	// standard error of each probability before the floor:
	// 1/(2 sqrt(Groups)), the binomial bound for an argmax frequency
	// over Groups independent groups, which the conditional
	// probabilities of "mean-field" and "laplace" (diagonal) do not
	// exceed (Rao-Blackwell). For "refined-pool" it is the error given
	// the samples at hand.
	StdError float64 `json:"std_error,omitempty"`
	// Floor is bandit.MinPropensity for the estimated probabilities
	// (estimators other than "exact"): each was mixed with the uniform
	// distribution over the m allowed arms at weight m*Floor
	// (policy.FloorPropensities), so no allowed arm reports less than
	// Floor and none moved by more than m*Floor.
	Floor float64 `json:"floor,omitempty"`
	// For refined samples (estimator "refined-pool"): SampleUses is the
	// mean number of decisions the decision's samples have served, this
	// one included; SampleAgeSeconds the age of the oldest since it was
	// banked; VersionsBehind how many posterior versions the oldest is
	// behind the newest published; BeyondBounds is true when the bank
	// had fewer usable samples than the decision needs and it acted on
	// the freshest samples past policy.max_sample_uses, max_sample_age
	// or max_versions_behind.
	SampleUses       float64 `json:"sample_uses,omitempty"`
	SampleAgeSeconds float64 `json:"sample_age_seconds,omitempty"`
	VersionsBehind   int64   `json:"versions_behind,omitempty"`
	BeyondBounds     bool    `json:"beyond_bounds,omitempty"`
}

// FieldError is one problem with one field of a request. Field is a
// JSON path such as "context.odor", "features[2].values[0]" or
// "policy.kind"; empty means the body as a whole.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}
