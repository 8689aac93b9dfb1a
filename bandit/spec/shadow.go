package spec

// ShadowEstimate is the off-policy estimate of the value (the mean reward
// per decision) of a bandit's candidate against its live policy's, over
// the newest logged decisions that have a reward and the candidate's
// choice: what GET /v1/bandits/{name} and the dashboard show. The
// estimator is named (refinery evaluate's, simulators/ope.go); the live
// policy's value is the same estimator with the logged propensities as
// its own (every weight 1: the mean logged reward).
type ShadowEstimate struct {
	Estimator string  `json:"estimator"`
	Level     float64 `json:"level"`
	// Decisions is how many logged decisions the estimate is over;
	// Scanned how many of the newest were read to find them.
	Decisions int `json:"decisions"`
	Scanned   int `json:"scanned"`
	// Candidate and Live are the estimates with their intervals at
	// Level; nil when undefined, and Reason says why.
	Candidate *Interval `json:"candidate"`
	Live      *Interval `json:"live"`
	// ESS is the effective sample size of the candidate's importance
	// weights, (Σ w)² / Σ w² (Kong 1992): how many of the decisions the
	// candidate's estimate effectively rests on.
	ESS    float64 `json:"ess"`
	Reason string  `json:"reason,omitempty"`
}

// Interval is an estimate with its confidence interval [Lo, Hi].
type Interval struct {
	Value float64 `json:"value"`
	Lo    float64 `json:"lo"`
	Hi    float64 `json:"hi"`
}
