package bandit

import (
	"context"
	"math"
	mrand "math/rand/v2"
	"slices"

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/policy"
)

// The registry of policy kinds. Each kind lives in its own file
// (kind_*.go) as a decider: its name, capabilities, options, defaults,
// validation, construction, decision rule, posterior fit, snapshot
// encoding and status. Everything outside those files asks the registry
// (CapabilitiesOf, Agent.Capabilities) rather than comparing
// kinds by name; TestKindsComparedOnlyInDeciders enforces it. Adding a
// kind is its name in spec.PolicyKinds, a new kind_*.go file and a row
// in kindTable.

// kindTable lists every policy kind, in the order spec.PolicyKinds
// returns them and validation messages list them.
var kindTable = []decider{
	refinedTS{},
	meanFieldTS{},
	epsGreedy{},
	epsGreedy{greedy: true},
	uniform{},
	linearTS{},
	laplaceTS{},
	flowTS{},
	neuralLinear{},
}

// decider is one policy kind.
type decider interface {
	// kind is the kind's name, as configurations spell it.
	kind() PolicyKind
	// caps says what the kind has and does under p (of this kind).
	caps(p PolicyConfig) Capabilities
	// sampleKinds lists the kinds of sample its decisions act on
	// (SampleKindsOf).
	sampleKinds() []SampleKind
	// options names the policy options (JSON members of PolicyConfig)
	// only some kinds take, that this one takes: "epsilon", "laplace",
	// "flow".
	options() []string
	// setDefaults fills in p's zero kind-specific options.
	setDefaults(p *PolicyConfig)
	// validate checks p's kind-specific options.
	validate(p PolicyConfig, v *validator)
	// construct makes what the kind keeps besides the network (a
	// linear posterior, a bank), in newAgent once the network is set
	// up; seed is the agent's.
	construct(a *Agent, seed uint64) error
	// choose fills pd (arm, scores, probabilities, sample kind) on the
	// published model m and returns how the probabilities were
	// obtained; d is the decision being made (refined-ts sets the
	// version of its samples).
	choose(ctx context.Context, a *Agent, pd *policy.Decision, d *Decision, m *model, x []float64, excluded []bool, rng *mrand.Rand) (*Propensity, error)
	// rank orders k of the allowed arms for x on the published model m,
	// with each slot's probabilities given the slots above and how they
	// were obtained (Agent.Rank).
	rank(ctx context.Context, a *Agent, m *model, x []float64, excluded []bool, k int, rng *mrand.Rand) (*ranking, error)
	// fit fits the kind's posterior at m's MAP on lik's rows (the
	// point-estimate Thompson kinds); a no-op for the others.
	fit(a *Agent, m *model, lik *nn.Likelihood) error
	// encode puts m's fitted posterior into a snapshot's meta.
	encode(meta *snapshotMeta, m *model) error
	// restore sets m's fitted posterior from meta and reports whether it
	// did (false, nil: nothing to restore, the caller fits it).
	restore(a *Agent, m *model, meta *snapshotMeta) (bool, error)
	// status describes m's fitted posterior, nil without one.
	status(a *Agent, m *model) *PosteriorStatus
}

// Capabilities says what a policy kind (under its options) has and does:
// what the HTTP layer, the dashboard and the simulator ask instead of
// comparing kinds by name.
type Capabilities struct {
	// Model: a trainer that publishes model versions from the rewards,
	// hence a trainer lag (all but uniform).
	Model bool
	// Network: a neural network (all but uniform and linear-ts).
	Network bool
	// MAP: the network is trained to a point estimate, the MAP under the
	// prior (nn.Deterministic), rather than a mean-field posterior
	// (greedy, eps-greedy, laplace-ts, flow-ts, neural-linear).
	MAP bool
	// PointEstimate: decisions act on the point estimate (greedy,
	// eps-greedy); policy.epsilon applies.
	PointEstimate bool
	// Explores: plays a uniformly random allowed arm with probability
	// policy.epsilon, which a policy spec may give (eps-greedy:E);
	// greedy's epsilon is 0.
	Explores bool
	// Posterior: decisions are Thompson sampling from a posterior (every
	// kind but uniform, greedy and eps-greedy).
	Posterior bool
	// MeanField: Thompson sampling on the network's mean-field posterior
	// (mf-ts, refined-ts).
	MeanField bool
	// SampleBank: decisions take refined samples from the agent's bank,
	// filled by the refinement workers (refined-ts).
	SampleBank bool
	// WeightSpread: decisions draw every weight from independent
	// Gaussians (mf-ts, refined-ts, laplace-ts "diagonal"): the per-layer
	// spread describes the posterior.
	WeightSpread bool
	// LastLayer: decisions draw the output layer from its last-layer
	// Laplace posterior (laplace-ts "last-layer", flow-ts).
	LastLayer bool
	// LinearHead: decisions are policy.Linear's exact linear Thompson
	// sampling (linear-ts on the inputs, neural-linear on the network's
	// last hidden features); propensities computed, not estimated, but
	// with arm features, where one draw scores every arm
	// (linearArmThompson).
	LinearHead bool
	// FitsAtMAP: a posterior is fitted at the network's MAP after every
	// retraining (laplace-ts, flow-ts, neural-linear).
	FitsAtMAP bool
	// FixedLikelihood: the kind fits a Gaussian linear model to the
	// output layer and always trains under the Gaussian likelihood with
	// one noise variance; model.likelihood and model.noise do not apply
	// (laplace-ts "last-layer", flow-ts, neural-linear).
	FixedLikelihood bool
	// PosteriorInRows: (part of) the posterior is rebuilt from the
	// stored rows at load, which a snapshot does not carry (linear-ts,
	// neural-linear).
	PosteriorInRows bool
	// Structures lists the values policy.laplace takes (laplace-ts).
	Structures []string
	// Cost ranks the kinds by the work of a run, 0 the most: the
	// simulator starts the most expensive first.
	Cost int
}

// deciderOf returns the kind's decider, nil for an unknown kind.
func deciderOf(k PolicyKind) decider {
	for _, d := range kindTable {
		if d.kind() == k {
			return d
		}
	}
	return nil
}

// CapabilitiesOf returns what the configured kind has and does; the zero
// Capabilities for an unknown kind.
func CapabilitiesOf(p PolicyConfig) Capabilities {
	if d := deciderOf(p.Kind); d != nil {
		return d.caps(p)
	}
	return Capabilities{}
}

// KindCapabilities returns the kind's capabilities under its default
// options.
func KindCapabilities(k PolicyKind) Capabilities {
	p := PolicyConfig{Kind: k}
	if d := deciderOf(k); d != nil {
		d.setDefaults(&p)
	}
	return CapabilitiesOf(p)
}

// takes reports whether the kind takes the policy option (a JSON member
// of PolicyConfig that only some kinds take: "epsilon", "laplace",
// "flow").
func takes(k PolicyKind, option string) bool {
	d := deciderOf(k)
	return d != nil && slices.Contains(d.options(), option)
}

// optionOwner returns the first kind in kindTable that takes option.
func optionOwner(option string) PolicyKind {
	for _, d := range kindTable {
		if slices.Contains(d.options(), option) {
			return d.kind()
		}
	}
	return ""
}

// Capabilities returns what the bandit's policy has and does.
func (a *Agent) Capabilities() Capabilities { return a.caps }

// SampleKindsOf lists the kinds of sample a decision of policy kind k can
// act on (Decision.Sample), in a fixed order: refined-ts decides on
// refined samples, or on mean-field draws before its bank has any; mf-ts
// on mean-field draws; greedy and eps-greedy on a point estimate;
// linear-ts and neural-linear on exact posterior draws; laplace-ts on
// Laplace draws; flow-ts on flow-refined draws; uniform on none. The
// metrics create every bandit x arm x kind series of
// refinery_decisions_total from it, at 0.
func SampleKindsOf(k PolicyKind) []SampleKind {
	if d := deciderOf(k); d != nil {
		return d.sampleKinds()
	}
	return nil
}

// PolicyKind names a decision rule (spec.PolicyKind): one decider each
// in kindTable, which lists the kinds of spec.PolicyKinds in its order
// (TestKindTableIsSpecsKinds).
type PolicyKind = spec.PolicyKind

// ParsePolicyKind returns the kind of that name.
func ParsePolicyKind(s string) (PolicyKind, error) { return spec.ParsePolicyKind(s) }

// PolicyKinds returns every policy kind a configuration accepts.
func PolicyKinds() []PolicyKind { return spec.PolicyKinds() }

// noFit is the part of a decider for the kinds without a posterior
// fitted at the MAP and without kind-specific options or state.
type noFit struct{}

func (noFit) options() []string                                   { return nil }
func (noFit) setDefaults(*PolicyConfig)                           {}
func (noFit) validate(PolicyConfig, *validator)                   {}
func (noFit) construct(*Agent, uint64) error                      { return nil }
func (noFit) fit(*Agent, *model, *nn.Likelihood) error            { return nil }
func (noFit) encode(*snapshotMeta, *model) error                  { return nil }
func (noFit) restore(*Agent, *model, *snapshotMeta) (bool, error) { return false, nil }
func (noFit) status(*Agent, *model) *PosteriorStatus              { return nil }

// The posteriors that laplace-ts, flow-ts and neural-linear fit at the
// network's MAP after every retraining (the trainer trains the MAP as
// for greedy: TrainConfig.Point, nn.Deterministic), published with the
// model version and persisted with its snapshot (snapshotMeta), are
// their deciders' fit, encode, restore and status.

// fitPosterior fits the kind's posterior at m's MAP (m.q.Mu and its
// noise m.q.Hyper) on lik's rows, lik being the trainer's likelihood
// (the MAP's standardization m.std); the other kinds have none.
func (a *Agent) fitPosterior(m *model, lik *nn.Likelihood) error {
	m.flowELBO = math.NaN()
	return a.decider.fit(a, m, lik)
}

// restorePosterior sets m's posterior from a snapshot's meta and reports
// whether it did; false with a nil error means there is nothing to
// restore (no snapshot, a kind without one, neural-linear, whose linear
// posterior is rebuilt, or a snapshot written before the field existed):
// the caller fits it. A stored posterior that does not fit the
// configuration is an error.
func (a *Agent) restorePosterior(m *model, meta *snapshotMeta) (bool, error) {
	if meta == nil || m.version == 0 {
		return false, nil
	}
	return a.decider.restore(a, m, meta)
}

// posteriorStatus returns m's PosteriorStatus, or nil for the kinds
// without one.
func (a *Agent) posteriorStatus(m *model) *PosteriorStatus { return a.decider.status(a, m) }
