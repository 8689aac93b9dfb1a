package spec

// PolicyKind names a decision rule (PolicyConfig.Kind). Package bandit
// implements each kind (a decider) and says what it has and does
// (bandit.KindCapabilities); this package only names them.
type PolicyKind string

// The policy kinds, in the order PolicyKinds returns them and
// validation messages list them. Package bandit documents each with its
// decider.
const (
	RefinedTS    PolicyKind = "refined-ts"    // Thompson sampling on locally refined samples
	MeanFieldTS  PolicyKind = "mf-ts"         // Thompson sampling on mean-field samples
	EpsGreedy    PolicyKind = "eps-greedy"    // epsilon-greedy on a point-estimate network
	Greedy       PolicyKind = "greedy"        // eps-greedy with epsilon 0
	Uniform      PolicyKind = "uniform"       // a uniformly random allowed arm; no model
	LinearTS     PolicyKind = "linear-ts"     // exact linear Thompson sampling
	LaplaceTS    PolicyKind = "laplace-ts"    // Thompson sampling on a Laplace posterior
	FlowTS       PolicyKind = "flow-ts"       // last-layer Laplace refined by a radial flow
	NeuralLinear PolicyKind = "neural-linear" // linear Thompson sampling on the last hidden layer
)

// PolicyKinds returns every policy kind a configuration accepts.
func PolicyKinds() []PolicyKind {
	return []PolicyKind{RefinedTS, MeanFieldTS, EpsGreedy, Greedy, Uniform, LinearTS, LaplaceTS, FlowTS, NeuralLinear}
}

// ParsePolicyKind returns the kind of that name.
func ParsePolicyKind(s string) (PolicyKind, error) { return parseName(s, PolicyKinds()) }

func (k PolicyKind) String() string               { return string(k) }
func (k PolicyKind) MarshalText() ([]byte, error) { return []byte(k), nil }

// UnmarshalText refuses a kind PolicyKinds does not list (the CLI's
// flag.TextVar); JSON takes any string and bandit.Validate names
// policy.kind.
func (k *PolicyKind) UnmarshalText(t []byte) error    { return unmarshalText(t, k, PolicyKinds()) }
func (k *PolicyKind) UnmarshalJSON(data []byte) error { return unmarshalJSONName(data, k) }
