package bandit

import (
	"encoding/json"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
)

// Bandit is a stored bandit: its name and configuration.
type Bandit struct {
	Name string
	// Config is the full configuration as the API accepted it, with
	// defaults filled in. The store keeps it as JSON and does not
	// interpret it.
	Config    json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// ArchivedAt is when the bandit was archived (no new decisions;
	// rewards of its earlier decisions still count); zero while it is
	// live. UpdateBandit stores it with the configuration.
	ArchivedAt time.Time
}

// SampleKind says what kind of posterior sample a decision acted on
// (spec.SampleKind: the decision rules set it).
type SampleKind = spec.SampleKind

// The kinds of sample a decision can act on.
const (
	SampleRefined   = spec.SampleRefined   // locally refined sample (Havasi et al. 2021)
	SampleMeanField = spec.SampleMeanField // plain draw from the mean-field posterior
	SamplePoint     = spec.SamplePoint     // point estimate (greedy, epsilon-greedy)
	SampleExact     = spec.SampleExact     // draw from an exact posterior (linear TS, NeuralLinear)
	SampleLaplace   = spec.SampleLaplace   // draw from a Laplace posterior (laplace-ts)
	SampleFlow      = spec.SampleFlow      // flow-refined last-layer draw (flow-ts)
	SampleNone      = spec.SampleNone      // no model (uniform)
)

// Decision is one arm choice, as stored.
type Decision struct {
	Bandit  string
	EventID string
	// Context is the context exactly as the client sent it (a JSON
	// object), kept for audit and for the dashboard.
	Context json.RawMessage
	// Encoded is the context after the bandit's encoder: what the model
	// sees and what the trainer reads back.
	Encoded []float64
	Arm     int
	// Propensities[i] is the probability that the policy picks arm i for
	// this context; Scores[i] is the policy's score of arm i.
	Propensities []float64
	Scores       []float64
	Policy       string
	ModelVersion int64
	Sample       SampleKind
	CreatedAt    time.Time
	// ShadowPropensities[i] is the probability that the bandit's
	// candidate (Config.Shadow) picks arm i for this context, and
	// ShadowArm the arm it picked, asked at the decision without acting
	// on it; ShadowPropensities is nil (and ShadowArm meaningless) when
	// the bandit had no candidate. On a ranking's slot both are given
	// the live policy's arms in the slots above (Agent.Rank).
	ShadowArm          int
	ShadowPropensities []float64
	// Slot is the decision's place in its ranking (Agent.Rank), 1 at the
	// top; 0 for a decision that is no ranking's (Decide, DecideBatch),
	// and for every decision stored before migration 0008.
	Slot int
	// ShadowAbove, on a ranking's slot below the first with a shadow
	// choice, is the importance weight of the slots above it: the
	// candidate's probability of the live arms in those slots over the
	// live policy's, the product over them of
	// ShadowPropensities[Arm] / Propensities[Arm] (each slot's
	// probabilities given the live slots above it). It is 1 on a first
	// slot, and meaningless on a decision without a shadow choice or
	// that is no ranking's (Slot 0).
	ShadowAbove float64
}

// Reward is the observed reward of one decision. There is at most one
// per decision.
type Reward struct {
	Bandit     string
	EventID    string
	Value      float64
	ReceivedAt time.Time
}

// TrainingRow is one (context, arm, reward) triple for the trainer,
// with the cursor position it was read at.
type TrainingRow struct {
	// Seq orders rows within a bandit; passing the last Seq seen as the
	// cursor of the next read returns only newer rows.
	Seq     int64
	Encoded []float64
	Arm     int
	Reward  float64
	// Context is the decision's context as the client sent it, on rows
	// whose Encoded is shorter than the dim TrainingRows was given
	// (nil on the others): the agent encodes it again, Encoded being of
	// an earlier encoder (a decision made before category values were
	// added).
	Context json.RawMessage
}

// Snapshot is a persisted posterior: opaque parameters and metrics.
type Snapshot struct {
	Bandit  string
	Version int64
	// Params is the serialized posterior; its encoding belongs to the
	// agent, not to the store.
	Params    []byte
	Metrics   json.RawMessage
	CreatedAt time.Time
	// LeaseToken is the fencing token of the trainer lease under which a
	// replica of a fleet writes the snapshot (Fleet.Lead): the store
	// stores it only while the bandit's lease still has that token, in
	// the same transaction, and refuses it with ErrFenced otherwise.
	// Zero writes without a lease (a single process, an import, a
	// growth).
	LeaseToken int64
}

// DecisionRecord is a decision together with its reward, if any, as the
// dashboard pages through them.
type DecisionRecord struct {
	Decision
	Reward *Reward
	// ID is the store's insertion number of the decision: within a
	// bandit, (CreatedAt, ID) orders decisions totally, and is the
	// cursor of DecisionQuery.
	ID int64
}

// DecisionQuery selects a page of a bandit's decisions, oldest first in
// (CreatedAt, ID) order (Store.Decisions).
type DecisionQuery struct {
	// Since and Until bound CreatedAt to [Since, Until); a zero time is
	// unbounded.
	Since, Until time.Time
	// AfterTime and AfterID, when AfterID > 0, start the page after the
	// decision at (AfterTime, AfterID), the last one of the previous
	// page.
	AfterTime time.Time
	AfterID   int64
	// Limit is the most decisions returned; it must be positive.
	Limit int
}
