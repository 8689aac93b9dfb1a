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

	"github.com/refinery-bandits/refinery/bandit/spec"
	"github.com/refinery-bandits/refinery/internal/strictjson"
	"github.com/refinery-bandits/refinery/posterior"
)

// The configuration's types are package spec's, which the Go client
// shares; this package adds what needs the model: the defaults
// (SetDefaults), validation (Validate) and the policy kinds' deciders.
type (
	// Config is a bandit's configuration as the API accepts it
	// (spec.Config).
	Config           = spec.Config
	Feature          = spec.Feature
	FeatureType      = spec.FeatureType
	PolicyConfig     = spec.PolicyConfig
	ModelConfig      = spec.ModelConfig
	NoisePrior       = spec.NoisePrior
	TrainingConfig   = spec.TrainingConfig
	RefinementConfig = spec.RefinementConfig
	RewardConfig     = spec.RewardConfig
	// Duration is a time.Duration that reads and writes JSON strings
	// such as "50ms" (spec.Duration).
	Duration = spec.Duration
)

// The feature types (spec.FeatureType).
const (
	Categorical = spec.Categorical
	Numeric     = spec.Numeric
)

// Weight priors of model.prior and noise structures of model.noise.
const (
	PriorFanIn   = spec.PriorFanIn
	PriorFixed   = spec.PriorFixed
	NoisePerArm  = spec.NoisePerArm
	NoiseShared  = spec.NoiseShared
	NoiseContext = spec.NoiseContext
	// Values of model.stochastic (ModelConfig.Stochastic).
	StochasticAll    = spec.StochasticAll
	StochasticOutput = spec.StochasticOutput
)

// Defaults of Config; see its fields for where they come from.
const (
	DefaultPolicyKind        = RefinedTS
	DefaultSamples           = 3
	DefaultThompsonSamples   = 1
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
	DefaultInitSigma         = 1.0
	// DefaultThompsonHiddenPriorVariance is model.hidden_prior_variance
	// of refined-ts and mf-ts (docs/model.md, "The hidden layers'
	// weight decay").
	DefaultThompsonHiddenPriorVariance = 15.0
	DefaultSigmaLR                     = posterior.DefaultLR
	DefaultNoiseShape                  = 2.0
	DefaultNoiseRate                   = 0.5
	DefaultTrainIterations             = 500
	DefaultSnapshotEvery               = 10
	DefaultMinInterval                 = time.Second
	DefaultRefineIterations            = posterior.DefaultRefineIterations
	DefaultBankSize                    = 16
	DefaultRewardWait                  = 10 * time.Minute
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
	SetDefaults(c)
	if err := Validate(c); err != nil {
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
	if errs, omitted := strictjson.UnknownFields(data, reflect.TypeOf(v), MaxFieldErrors); len(errs) > 0 {
		e := &ValidationError{Errors: make([]FieldError, len(errs)), Omitted: omitted}
		for i, f := range errs {
			e.Errors[i] = FieldError{Field: f.Field, Detail: f.Detail}
		}
		return e
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
	case strings.HasPrefix(t, "map["), strings.HasPrefix(t, "spec."), strings.HasPrefix(t, "bandit."):
		return "an object"
	}
	return t
}

// ShadowConfig is a bandit's candidate configuration (spec.ShadowConfig).
type ShadowConfig = spec.ShadowConfig

// Candidate returns the full configuration of c's shadow: c's name,
// arms (their features, the retired ones), features, slot features and reward with
// the shadow's policy, model, training and refinement, and no shadow.
// nil when c is nil or has no shadow. The slices of the shadow are shared, not copied.
func Candidate(c *Config) *Config {
	if c == nil || c.Shadow == nil {
		return nil
	}
	s := c.Shadow
	return &Config{Name: c.Name, Arms: c.Arms, Features: c.Features, ArmFeatures: c.ArmFeatures, ArmValues: c.ArmValues, SlotFeatures: c.SlotFeatures, Retired: c.Retired, Reward: c.Reward,
		Policy: s.Policy, Model: s.Model, Training: s.Training, Refinement: s.Refinement}
}

// ShadowOf is the inverse of Candidate: the ShadowConfig of the
// candidate's configuration cand, set at since.
func ShadowOf(cand *Config, since time.Time) *ShadowConfig {
	return &ShadowConfig{Policy: cand.Policy, Model: cand.Model, Training: cand.Training, Refinement: cand.Refinement, Since: since}
}

// SetDefaults fills in zero fields with their defaults, the shadow's
// (Config.Shadow) as the bandit's own.
func SetDefaults(c *Config) {
	if cand := Candidate(c); cand != nil {
		setDefaults(cand)
		c.Shadow = ShadowOf(cand, c.Shadow.Since)
	}
	setDefaults(c)
}

// setDefaults fills in c's zero settings from DefaultConfig of its
// kind; the kind's decider then fills in its options given in part (a
// policy.flow without its iterations), and each numeric feature without
// center or scale gets 0 and 1.
func setDefaults(c *Config) {
	def := DefaultConfig(c.Policy.Kind)
	fillZero(reflect.ValueOf(c).Elem(), reflect.ValueOf(&def).Elem())
	if d := deciderOf(c.Policy.Kind); d != nil {
		d.setDefaults(&c.Policy)
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
func Validate(c *Config) error {
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
	validateFeatures(c, &v)
	validatePolicy(c, &v)
	validateArms(c, &v)
	validateSlotFeatures(c, &v)
	if CapabilitiesOf(c.Policy).Network {
		validateModel(c, &v)
	}
	if len(v.errs) == 0 {
		validateCost(c, &v)
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
	validateShadow(c, &v)
	return v.err()
}

// validateShadow validates c's candidate configuration exactly as a
// bandit's own and reports its problems under "shadow." (such as
// shadow.policy.epsilon). The inherited name, arms, features and reward
// are reported once, under their own names; while they are invalid the
// candidate is not checked.
func validateShadow(c *Config, v *validator) {
	cand := Candidate(c)
	if cand == nil {
		return
	}
	for _, e := range v.errs {
		if e.Field == "name" || e.Field == "arms" || e.Field == "features" || strings.HasPrefix(e.Field, "arms[") || strings.HasPrefix(e.Field, "features[") ||
			strings.HasPrefix(e.Field, "arm_") || strings.HasPrefix(e.Field, "retired") {
			return
		}
	}
	err := Validate(cand)
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return
	}
	for _, e := range ve.Errors {
		if e.Field == "reward" || strings.HasPrefix(e.Field, "reward.") {
			continue // inherited: reported under its own name
		}
		v.add(strings.TrimSuffix("shadow."+e.Field, "."), e.Detail)
	}
	v.omitted += ve.Omitted
}

func validateFeatures(c *Config, v *validator) {
	validateSchema("features", c.Features, v)
}

// validateSchema checks the features fs of a schema (the context's,
// "features", or the arms', "arm_features") and reports whether they
// are valid.
func validateSchema(field string, fs []Feature, v *validator) bool {
	n := len(v.errs) + v.omitted
	switch {
	case len(fs) == 0:
		v.add(field, "want at least one feature")
		return false
	case len(fs) > MaxFeatures:
		v.add(field, fmt.Sprintf("%d features, want at most %d", len(fs), MaxFeatures))
		return false
	}
	names := make([]string, len(fs))
	dim := 0
	for i, f := range fs {
		names[i] = f.Name
		at := fmt.Sprintf("%s[%d]", field, i)
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
	v.names(field, names)
	if dim > MaxEncodedDim {
		v.add(field, fmt.Sprintf("the features encode to %d inputs, want at most %d", dim, MaxEncodedDim))
	}
	return len(v.errs)+v.omitted == n
}

func validatePolicy(c *Config, v *validator) {
	p := c.Policy
	d := deciderOf(p.Kind)
	if d == nil {
		v.add("policy.kind", fmt.Sprintf("unknown policy %q: want one of %s", p.Kind, kindList()))
	}
	// The options only some kinds take: given to another kind, they are
	// an error naming the kind that takes them.
	for _, o := range []struct {
		name string
		set  bool
	}{{"laplace", p.Laplace != ""}, {"flow", p.Flow != nil}} {
		if o.set && !takes(p.Kind, o.name) {
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
	if p.Epsilon != nil && !takes(p.Kind, "epsilon") {
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

func validateModel(c *Config, v *validator) {
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
		if in, out := netShape(c); ok && in > 0 && in <= 2*MaxEncodedDim && out > 0 && out <= MaxArms {
			if n := modelArch(m, in, out).NumParams(); n > MaxParams {
				v.add("model.hidden", fmt.Sprintf("the network has %d parameters, want at most %d", n, MaxParams))
			}
		}
	}
	v.positive("model.prior_variance", m.PriorVariance, 1e6)
	if m.HiddenPriorVariance != 0 {
		v.positive("model.hidden_prior_variance", m.HiddenPriorVariance, 1e6)
	}
	v.positive("model.init_sigma", m.InitSigma, 1e3)
	v.oneOf("model.prior", m.Prior, PriorFanIn, PriorFixed)
	v.oneOf("model.stochastic", m.Stochastic, StochasticAll, StochasticOutput)
	if _, err := spec.ParseLikelihood(string(m.Likelihood)); err != nil {
		v.add("model.likelihood", fmt.Sprintf("%q, %v", m.Likelihood, err))
	}
	v.oneOf("model.noise", m.Noise, NoisePerArm, NoiseShared, NoiseContext)
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
	if _, err := spec.ParseEstimator(string(t.Estimator)); err != nil {
		v.add("training.estimator", err.Error())
	}
	v.intRange("training.ris_samples", t.RISSamples, 1, MaxRISSamples)
	if _, err := spec.ParseBound(string(t.Bound)); err != nil {
		v.add("training.bound", fmt.Sprintf("%q, %v", t.Bound, err))
	}
	v.positive("training.collapsed_reg", t.CollapsedReg, 1)
	v.positive("training.collapsed_shape", t.CollapsedShape, 1000)
	if _, err := spec.ParseOptimizer(string(t.Optimizer)); err != nil {
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
func validateCost(c *Config, v *validator) {
	p := c.Policy
	caps := CapabilitiesOf(p)
	arms := len(c.Arms)
	in, out := netShape(c)
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
		arch := modelArch(c.Model, in, out)
		params := float64(arch.NumParams())
		units := out
		for _, h := range c.Model.Hidden {
			units += h
		}
		// The work of one posterior draw at a decision: with arm
		// features a forward pass over every arm's pair (weightPool),
		// arms times the parameters and the activations.
		drawParams := params
		if len(c.ArmFeatures) > 0 {
			drawParams *= float64(arms)
			units *= arms
		}
		// The output layer's inputs: its Gram matrices (last-layer
		// Laplace, flow-ts) and NeuralLinear's per-arm posteriors are
		// outputs x (inputs+1)^2 (one output with arm features).
		last := float64(arch.Layer(arch.NumLayers()-1).In + 1)
		if caps.LastLayer || caps.LinearHead {
			if fl := float64(out) * last * last; fl > MaxLinearFloats {
				v.add("model.hidden", fmt.Sprintf("%d outputs x %.0f^2 last-layer inputs = %.3g numbers, want at most %d (a narrower last hidden layer or fewer arms)", out, last, fl, MaxLinearFloats))
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
			if cost := float64(draws) * drawParams; cost > MaxDecisionCost {
				v.add("policy.propensity_samples", fmt.Sprintf("%d draws x %.0f parameters = %.3g multiply-adds per decision, want at most %.3g (fewer samples or propensity_samples, or a smaller network)", draws, drawParams, cost, float64(MaxDecisionCost)))
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
		// One posterior per arm on the context, or with arm features
		// one on the pair with its interactions.
		sq := float64(in) * float64(in)
		if fl := float64(out) * sq; fl > MaxLinearFloats {
			v.add("features", fmt.Sprintf("linear-ts keeps %d posteriors x %d^2 inputs = %.3g numbers, want at most %d (fewer inputs or arms)", out, in, fl, MaxLinearFloats))
		} else if cost := float64(p.PropensitySamples) * float64(out) * sq; cost > MaxLinearCost {
			v.add("policy.propensity_samples", fmt.Sprintf("%d propensity samples x %d posteriors x %d^2 inputs = %.3g per decision, want at most %.3g", p.PropensitySamples, out, in, cost, float64(MaxLinearCost)))
		}
	}
}

// encodedDim is the length of an encoded context.
func encodedDim(c *Config) int { return schemaDim(ContextFeatures(c)) }

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
		if field == "features" || field == "arm_features" {
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
