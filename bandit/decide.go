package bandit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
)

// DecideRequest asks for one decision.
type DecideRequest struct {
	// EventID identifies the decision; empty: the service makes one.
	EventID string
	// Context is the JSON object of feature values.
	Context json.RawMessage
	// Excluded names arms that must not be chosen.
	Excluded []string
}

// Propensity describes how a decision's probabilities were obtained
// (spec.Propensity).
type Propensity = spec.Propensity

// Outcome is the answer to a DecideRequest.
type Outcome struct {
	Decision *Decision
	// Created is false when the event ID was already decided and the
	// stored decision is returned (idempotency).
	Created bool
	// Propensity is set for new decisions only.
	Propensity *Propensity
}

// eventIDRE is what a client-chosen event ID may look like: it appears
// in URLs unescaped.
var eventIDRE = regexp.MustCompile(`^[A-Za-z0-9._~:-]{1,128}$`)

// NewEventID returns a random 128-bit event ID in hex.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ValidEventID reports whether id may be used as an event ID: 1 to 128
// characters from [A-Za-z0-9._~:-].
func ValidEventID(id string) bool { return eventIDRE.MatchString(id) }

// Decide validates and encodes the context, lets the policy choose an
// arm, stores the decision durably and returns it.
//
// Probabilities: uniform, greedy and eps-greedy are exact. The
// Thompson-sampling rules play the argmax of the average prediction of S
// = policy.samples posterior samples; the probability of each arm is
// estimated from M = policy.propensity_samples groups of S samples, the
// decision's own group being the first (issue 18, finding 2):
//
//   - mf-ts (and refined-ts before its first refined samples): M groups
//     of S mean-field draws whose output layer's noise is integrated out
//     (nn.Predictor.SampleLocalMoments, policy.ThompsonGauss): the mean
//     over the groups of each arm's conditional probability of winning,
//     exact given a group's hidden layers with two allowed arms and
//     estimated from policy.OutputDraws draws with more (the decision's
//     own group from those and its own draw); unbiased, with no steps
//     of 1/M;
//   - refined-ts: the decision's S samples are a uniform draw without
//     replacement from the usable refined samples in the bank (the
//     pool; Propensity.Samples says how many); the probability of each
//     arm given the pool is computed exactly over every S-subset when
//     there are at most policy.MaxExactSubsets (the default bank of 16
//     in groups of 3: 560; Propensity.Exact), and otherwise estimated
//     from M-1 further subsets drawn the same way (policy.ThompsonVote);
//   - linear-ts, and neural-linear on the network's features: exact,
//     the integral of the independent Student-t posterior predictives
//     (policy.Linear, policy.StudentWinProbs; issue 30, finding 1);
//   - laplace-ts (diagonal): as mf-ts, on the Laplace posterior;
//     flow-ts and last-layer laplace-ts: M-1 more groups of fresh draws
//     from the posterior, voting (policy.ThompsonVote).
//
// Every estimate is then floored at MinPropensity for each allowed arm
// (policy.FloorPropensities); Propensity says which estimator, how many
// samples and groups stand behind it, and the floor.
//
// An event ID that was already decided returns the stored decision
// (Outcome.Created false) when the context encodes identically and the
// stored arm is not excluded now, and ErrConflict otherwise.
//
// Contract: Decide is safe for concurrent use (step mode serializes it
// with Reward); outside step mode it never waits for a retraining or a
// refinement to finish (linear-ts waits at most for one row's update);
// it returns once the store has the decision (durably, but for the
// in-memory store); it keeps no reference to req, and the Outcome is the
// caller's.
func (a *Agent) Decide(ctx context.Context, req DecideRequest) (*Outcome, error) {
	if err := a.checkArchived(); err != nil {
		return nil, err
	}
	var v validator
	if req.EventID != "" && !ValidEventID(req.EventID) {
		v.add("event_id", "want 1 to 128 characters from [A-Za-z0-9._~:-]")
	}
	x, err := a.encode(req.Context, "context", &v)
	if err != nil {
		return nil, err
	}
	excluded := a.excluded(req.Excluded, &v)
	if err := v.err(); err != nil {
		return nil, err
	}
	outs, err := a.decideAll(ctx, []pendingDecision{{eventID: req.EventID, context: req.Context, x: x}}, excluded, "")
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// checkArchived returns ErrArchived, with when, while the bandit is
// archived.
func (a *Agent) checkArchived() error {
	if at := a.archivedAt.Load(); at != 0 {
		return fmt.Errorf("bandit %s was archived at %s and takes no new decisions (PATCH {\"archived\": false} resumes it): %w",
			a.name, time.Unix(0, at).UTC().Format(time.RFC3339), ErrArchived)
	}
	return nil
}

// encode encodes a context, adding its problems to v under field (the
// encoder's "context" and "context.<feature>" become field and
// field.<feature>); nil when it is invalid. Other errors are returned.
func (a *Agent) encode(raw json.RawMessage, field string, v *validator) ([]float64, error) {
	return encodeField(a.enc, raw, field, v)
}

// encodeField is Agent.encode with the encoder enc: the context's, or an
// arm's features (arm_values.<arm>) with the arms' schema.
func encodeField(enc *Encoder, raw json.RawMessage, field string, v *validator) ([]float64, error) {
	x, err := enc.Encode(raw)
	if err != nil {
		var ve *ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		for _, fe := range ve.Errors {
			if field != "context" {
				fe.Field = field + strings.TrimPrefix(fe.Field, "context")
			}
			v.add(fe.Field, fe.Detail)
		}
		v.omitted += ve.Omitted
		return nil, nil
	}
	return x, nil
}

// pendingDecision is one validated decision of a request: its event ID
// (empty: make one), its context as sent and encoded.
type pendingDecision struct {
	eventID string
	context json.RawMessage
	x       []float64
}

// decideAll makes the decisions ps with one random source and one model
// version, asks the candidate (if any, shadow.go) for its choice at
// each, stores them together (Store.InsertDecisions: handed to the store
// at once) and returns their outcomes in order: Decide's batch of one
// and DecideBatch's many. A replayed event ID whose context encodes
// differently, or whose stored arm is now excluded, is ErrConflict,
// naming field[i] when field is not empty.
func (a *Agent) decideAll(ctx context.Context, ps []pendingDecision, excluded []bool, field string) ([]*Outcome, error) {
	rng := a.acquireRNG()
	defer a.releaseRNG(rng)
	m := a.model.Load()
	sh := a.shadow.Load()
	var shRNG *mrand.Rand
	if sh != nil {
		shRNG = sh.acquireRNG()
		defer sh.releaseRNG(shRNG)
	}
	ds := make([]*Decision, len(ps))
	props := make([]*Propensity, len(ps))
	for i, p := range ps {
		eventID := p.eventID
		if eventID == "" {
			eventID = NewEventID()
		}
		d := &Decision{
			Bandit:       a.name,
			EventID:      eventID,
			Context:      p.context,
			Encoded:      p.x,
			Policy:       string(a.cfg.Policy.Kind),
			ModelVersion: m.version,
		}
		prop, err := a.choose(ctx, d, m, p.x, excluded, rng)
		if err != nil {
			return nil, err
		}
		if sh != nil {
			sh.askShadow(ctx, d, p.x, excluded, shRNG)
		}
		ds[i], props[i] = d, prop
	}
	return a.record(ctx, ds, props, excluded, field)
}

// record stores the decisions ds of one request together
// (Store.InsertDecisions: handed to the store at once) and returns their
// outcomes in order (settle); a conflict names field[i] when field is
// not empty.
func (a *Agent) record(ctx context.Context, ds []*Decision, props []*Propensity, excluded []bool, field string) ([]*Outcome, error) {
	stored, created, err := a.store.InsertDecisions(ctx, ds)
	if err != nil {
		return nil, err
	}
	outs := make([]*Outcome, len(ds))
	for i, d := range ds {
		out, err := a.settle(d, stored[i], created[i], props[i], excluded)
		if err != nil {
			if field != "" {
				err = fmt.Errorf("%s[%d]: %w", field, i, err)
			}
			return nil, err
		}
		outs[i] = out
	}
	return outs, nil
}

// settle turns the store's answer to the decision d into its outcome:
// a new decision is observed (metrics, health); a replay is returned
// when it matches d's context and the exclusions, and ErrConflict
// otherwise.
func (a *Agent) settle(d, stored *Decision, created bool, prop *Propensity, excluded []bool) (*Outcome, error) {
	if !created {
		enc := stored.Encoded
		if len(enc) != len(d.Encoded) { // decided before category values were added
			enc, _ = a.enc.Encode(stored.Context)
		}
		if !slices.Equal(enc, d.Encoded) {
			return nil, fmt.Errorf("event %s was decided for another context: %w", d.EventID, ErrConflict)
		}
		// A replay of a decision whose arm was retired since returns it:
		// only the request's own exclusions conflict.
		if stored.Arm >= 0 && stored.Arm < len(excluded) && excluded[stored.Arm] && !slices.Contains(a.cfg.Retired, a.cfg.Arms[stored.Arm]) {
			return nil, fmt.Errorf("event %s was decided with arm %s, which is now excluded: %w", d.EventID, a.cfg.Arms[stored.Arm], ErrConflict)
		}
		return &Outcome{Decision: stored, Created: false}, nil
	}
	a.obs.Decided(a.name, a.cfg.Arms[d.Arm], d.Sample)
	a.health.decided(d.Arm, d.Encoded, excluded)
	return &Outcome{Decision: stored, Created: true, Propensity: prop}, nil
}

// acquireRNG returns the random source of one decision; give it back
// with releaseRNG. In step mode it is the agent's own, under stepMu (held
// until the release: decisions and rewards are serialized); otherwise one
// from the pool.
func (a *Agent) acquireRNG() *mrand.Rand {
	if a.step != nil {
		a.stepMu.Lock()
		return a.stepRNG
	}
	return a.rngs.Get().(*mrand.Rand)
}

// releaseRNG gives back what acquireRNG returned.
func (a *Agent) releaseRNG(rng *mrand.Rand) {
	if a.step != nil {
		a.stepMu.Unlock()
		return
	}
	a.rngs.Put(rng)
}

// excluded turns arm names into flags, the retired arms'
// (Config.Retired) set too.
func (a *Agent) excluded(names []string, v *validator) []bool {
	ex := retiredMask(&a.cfg)
	for i, n := range names {
		j := slices.Index(a.cfg.Arms, n)
		if j < 0 {
			v.add(fmt.Sprintf("excluded_arms[%d]", i), fmt.Sprintf("unknown arm %q", n))
			continue
		}
		ex[j] = true
	}
	if len(names) > 0 && !slices.Contains(ex, false) {
		v.add("excluded_arms", "every arm is excluded")
	}
	return ex
}

// choose fills d's arm, scores, probabilities and sample kind with the
// policy kind's decider (kinds.go) and floors the estimated
// probabilities at MinPropensity.
func (a *Agent) choose(ctx context.Context, d *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error) {
	var pd policy.Decision
	prop, err := a.decider.choose(ctx, a, &pd, d, m, x, excluded, rng)
	if err != nil {
		return nil, err
	}
	if prop.Estimator != "exact" {
		policy.FloorPropensities(pd.Probabilities, excluded, MinPropensity)
		prop.Floor = MinPropensity
		if !prop.Exact && prop.Groups > 0 {
			prop.StdError = 0.5 / math.Sqrt(float64(prop.Groups))
		}
	}
	d.Arm, d.Sample, d.Scores, d.Propensities = pd.Arm, pd.Sample, pd.Scores, pd.Probabilities
	return prop, nil
}

// MinPropensity is the least probability the Thompson-sampling policies
// report for an allowed arm (Propensity.Floor): importance weights from
// their propensities are at most 1/MinPropensity = 10,000, and no
// estimate moves by more than arms x 1e-4.
const MinPropensity = 1e-4

// countTrue returns the number of true flags.
func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

// predictor returns a Predictor of the agent's network; put it back in
// a.predictors when done.
func (a *Agent) predictor() *nn.Predictor { return a.predictors.Get().(*nn.Predictor) }
