package simulators

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/refinery-bandits/refinery/bandit"
)

// Preset is a named configuration of the simulated bandits: the
// service's own bandit configuration (the JSON of POST /v1/bandits) and
// the step-mode schedule of its agent (bandit.StepConfig). Presets are
// data: they are written out with every result.
type Preset struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Bandit is the configuration of every simulated bandit without its
	// name, arms and features, which come from the environment, and
	// without policy.kind and policy.epsilon, which come from the policy
	// list. Zero fields take the service's defaults (bandit.Config).
	Bandit bandit.Config `json:"bandit"`
	// TrainEvery: the agent retrains after this many rewards
	// (bandit.StepConfig.TrainEvery); zero means 1.
	TrainEvery int `json:"train_every"`
	// Epsilons are the exploration rates "eps-greedy" expands to.
	Epsilons []float64 `json:"epsilons"`
	// Set, if not nil, changes each bandit's configuration after the
	// policy's own choices (refined-ts:supply's SupplyConfig): simulate
	// --set puts its settings in Bandit and here too, so that a setting
	// given on the command line is the one played.
	Set func(*bandit.Config) error `json:"-"`
}

// Retraining returns after how many rewards the simulated agents
// retrain: override when positive (--train-every), otherwise the
// preset's TrainEvery, at least 1 (a zero bandit.StepConfig.TrainEvery
// is 1).
func (p Preset) Retraining(override int) int {
	if override > 0 {
		return override
	}
	return max(p.TrainEvery, 1)
}

// Presets returns the built-in presets by name.
//
//   - paper: Havasi et al. (2021), Section 4.3, exactly: two hidden layers
//     of 100 ReLU units, the standard normal prior N(0, 1) on every weight
//     and bias (model.prior "fixed"), the Gaussian likelihood with one
//     learned noise variance and no prior on it, standard deviations
//     starting at 0.01, the ELBO (training.bound "elbo"), the mean-field
//     posterior updated for 500 Adam iterations (lr 1e-3, batch 64) after
//     every reward; refined samples with a_1 ~ N(0, 0.7), a_2 ~ N(0, 0.3)
//     and 500 refinement iterations, fresh for every decision
//     (max_sample_uses 1, bank_size 3); 3 samples per decision.
//   - fast: the service's model (model.prior "fan-in", model.likelihood
//     "auto", training.bound "collapsed-mean": the defaults of
//     bandit.Config: one hidden layer of 100 and model.noise "context"
//     for refined and mean-field TS, the paper's 2x100 for the other
//     neural kinds), the paper's
//     optimizer, refinement fractions and samples per decision, with
//     less work: the posterior
//     retrained every 10 rewards for 100 iterations (a fiftieth of the
//     paper's ELBO iterations) and 200 conditional iterations per refined
//     sample instead of 500. Refined and mean-field TS see the same
//     posterior, so their samples differ only by refinement.
//     bench/mushroom/README.md has the cost of a refined-ts step and the
//     time of make bench-mushroom, bench/showdown/tables.md every
//     policy's CPU per step. Before the fast engine this preset had to
//     shrink the network to 2x32 and refinement to 40 iterations.
//
// Both train with the service's default estimator, local
// reparameterization; refinery simulate --estimator sets the preset's
// training.estimator (weight-reparam, ris) for a run.
func Presets() map[string]Preset {
	paper := Preset{
		Name:        "paper",
		Description: "Havasi et al. (2021) Section 4.3: 2x100 ReLU, N(0,1) prior, 500 Adam iterations (lr 1e-3, batch 64) after every reward; refinement fractions 0.7/0.3 with 500 iterations, fresh samples for every decision; 3 samples per decision",
		Bandit: bandit.Config{
			Policy: bandit.PolicyConfig{Samples: 3, MaxSampleUses: 1},
			Model: bandit.ModelConfig{Hidden: []int{100, 100}, PriorVariance: 1, HiddenPriorVariance: 1, Prior: bandit.PriorFixed, InitSigma: 0.01,
				Likelihood: bandit.LikelihoodGaussian, Noise: bandit.NoiseShared, NoisePrior: &bandit.NoisePrior{},
				Stochastic: bandit.StochasticAll}, // every weight's posterior, as the paper's
			Training: bandit.TrainingConfig{
				Iterations: 500, IterationsPerReward: 500, StopTolerance: new(float64),
				BatchSize: 64, LR: 1e-3, SigmaLR: 1e-3, Bound: "elbo",
			},
			Refinement: bandit.RefinementConfig{
				Fractions:  []float64{0.7, 0.3},
				Iterations: 500, LR: 1e-3, BatchSize: 64,
				BankSize: 3, // = samples: the decision's own
			},
		},
		TrainEvery: 1,
		Epsilons:   []float64{0.01, 0.05},
	}
	fast := paper
	fast.Name = "fast"
	fast.Description = "the service's model (fan-in prior, likelihood by the rewards, collapsed-mean bound; for refined and mean-field TS a Gaussian noise per arm linear in the context, one hidden layer of 100 as a point estimate (prior variance 15, a weak weight decay) under the output layer's posterior, starting at the prior's width; the paper's 2x100 for the others) and samples per decision (1 for refined and mean-field TS, the paper's 3 for the others), the paper's optimizer and refinement fractions; retrain every 10 rewards for 100 iterations; 200 refinement iterations per sample"
	fast.Bandit.Policy.Samples = 0 // the service's, per kind
	fast.Bandit.Model = bandit.ModelConfig{PriorVariance: 1}
	fast.Bandit.Training.Bound = ""
	fast.Bandit.Training.SigmaLR = 0
	fast.TrainEvery = 10
	fast.Bandit.Training.Iterations = 100
	fast.Bandit.Training.IterationsPerReward = 10
	fast.Bandit.Refinement.Fractions = []float64{0.7, 0.3}
	fast.Bandit.Refinement.Iterations = 200
	fast.Epsilons = []float64{0.01, 0.05}
	return map[string]Preset{"paper": paper, "fast": fast}
}

// PolicyNames lists the policy names ParsePolicies accepts: the policy
// kinds (bandit.PolicyKinds), in their order.
var PolicyNames = func() []string {
	var names []string
	for _, k := range bandit.PolicyKinds() {
		names = append(names, string(k))
	}
	return names
}()

// TrainingMethods are the training settings a mean-field policy may be
// played under within one simulation, as "mf-ts@NAME" or
// "refined-ts@NAME1+NAME2" (ParsePolicies). Each sets the fields of the
// preset's training configuration that it names and leaves the others,
// except that a policy with methods trains on the ELBO unless a method
// (or the preset, as --bound sets it) names another bound: "mf-ts@ris"
// is RIS against the ELBO, although the service's default bound is
// collapsed-mean:
//
//   - elbo: the ELBO with local reparameterization and Adam (the
//     service's defaults but for the bound: training.bound "elbo", training.estimator
//     "local-reparam", training.optimizer "adam")
//   - ris: training.estimator "ris" (Long et al. 2024)
//   - collapsed-mean, collapsed-mean-var: training.bound (Tomczak et al. 2021,
//     Eqs. 9 and 10)
//   - ngvi: training.optimizer "ngvi" (Khan 2018, Section 5)
var TrainingMethods = map[string]func(*bandit.TrainingConfig){
	"elbo": func(t *bandit.TrainingConfig) {
		t.Bound, t.Estimator, t.Optimizer = bandit.BoundELBO, bandit.DefaultEstimator, bandit.DefaultOptimizer
	},
	"ris":                func(t *bandit.TrainingConfig) { t.Estimator = bandit.EstimatorRIS },
	"collapsed-mean":     func(t *bandit.TrainingConfig) { t.Bound = bandit.BoundCollapsedMean },
	"collapsed-mean-var": func(t *bandit.TrainingConfig) { t.Bound = bandit.BoundCollapsedMeanVar },
	"ngvi":               func(t *bandit.TrainingConfig) { t.Optimizer = bandit.OptimizerNGVI },
}

// methodNames returns the names of TrainingMethods, sorted.
func methodNames() []string {
	var names []string
	for n := range TrainingMethods {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// PolicySpec names one policy of a simulation and how to build it.
type PolicySpec struct {
	// Name is the policy's name in results, e.g. "eps-greedy-0.05" or
	// "mf-ts@ngvi".
	Name string
	// Kind is one of PolicyNames.
	Kind string
	// Epsilon of eps-greedy.
	Epsilon float64
	// Methods are names of TrainingMethods applied, in order, to the
	// preset's training configuration (mf-ts and refined-ts only).
	Methods []string
	// Laplace is laplace-ts's policy.laplace ("diagonal" or
	// "last-layer"); empty: the default.
	Laplace string
	// Supply, for refined-ts:supply, plays refined TS on the service's
	// refined-sample supply (SupplyConfig) instead of the preset's
	// sample policy.
	Supply bool
	// Config, when not nil, is the bandit's whole configuration (a
	// --bandit-config file): the preset and Kind do not apply.
	Config *bandit.Config
}

// SupplyConfig sets c's sample supply to the service's defaults: a bank
// of bandit.DefaultBankSize refined samples (refinement.bank_size 16),
// each serving up to bandit.DefaultMaxSampleUses decisions
// (policy.max_sample_uses 1000) within the staleness bounds
// (policy.max_sample_age, policy.max_versions_behind), as a bandit
// created with the service's defaults draws them. The presets' refined TS
// instead refines fresh samples for every decision, as the paper's
// offline protocol does, which costs policy.samples refinements a step.
func SupplyConfig(c *bandit.Config) {
	c.Policy.MaxSampleUses = bandit.DefaultMaxSampleUses
	c.Refinement.BankSize = bandit.DefaultBankSize
}

// BanditConfig returns the configuration of the bandit that plays spec
// on env (banditConfig) with its defaults filled in and validated: what
// a run plays, for the summary and the command's checks before the runs.
func BanditConfig(spec PolicySpec, env Env, p Preset) (*bandit.Config, error) {
	c, err := banditConfig(spec, env, p)
	if err != nil {
		return nil, err
	}
	bandit.SetDefaults(c)
	if err := bandit.Validate(c); err != nil {
		return nil, fmt.Errorf("bandit configuration: %w", err)
	}
	return c, nil
}

// banditConfig returns the configuration of the bandit that plays spec
// on env as it is given to bandit.Service.Create, which fills in the
// defaults and validates it: spec.Config if set, otherwise the preset's
// with the policy's kind and epsilon, the environment's arm names and
// one numeric feature x0, x1, ... per encoded input (center 0, scale 1:
// the encoding is the environment's vector itself). A --bandit-config
// must have the environment's arms, in order, and features that encode
// to its number of inputs.
func banditConfig(spec PolicySpec, env Env, p Preset) (*bandit.Config, error) {
	var c bandit.Config
	if spec.Config != nil {
		b, err := json.Marshal(spec.Config)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
	} else {
		b, err := json.Marshal(p.Bandit)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		c.Name = "sim"
		c.Arms = slices.Clone(env.ArmNames())
		c.Features = make([]bandit.Feature, env.NumFeatures())
		for i := range c.Features {
			c.Features[i] = bandit.Feature{Name: "x" + strconv.Itoa(i), Type: bandit.Numeric}
		}
		c.Policy.Kind = bandit.PolicyKind(spec.Kind)
		c.Policy.Epsilon = nil
		if bandit.KindCapabilities(c.Policy.Kind).Explores {
			e := spec.Epsilon
			c.Policy.Epsilon = &e
		}
		c.Policy.Laplace = spec.Laplace
		if spec.Supply {
			SupplyConfig(&c)
			if p.Set != nil {
				if err := p.Set(&c); err != nil {
					return nil, err
				}
			}
		}
		zero := bandit.Duration(0)
		c.Training.MinInterval = &zero // step mode: training.min_interval does not apply
		if len(spec.Methods) > 0 && c.Training.Bound == "" {
			// The methods are compared against the ELBO (the baseline of
			// bench/mushroom-methods), not the service's default bound.
			c.Training.Bound = bandit.BoundELBO
		}
		for _, m := range spec.Methods {
			set, ok := TrainingMethods[m]
			if !ok {
				return nil, fmt.Errorf("unknown training method %q (want one of %s)", m, strings.Join(methodNames(), ", "))
			}
			set(&c.Training)
		}
	}
	if !slices.Equal(c.Arms, env.ArmNames()) {
		// The same arms in another order are the same bandit: a fresh
		// agent's outputs follow its arm list, so take the environment's
		// order.
		if !slices.Equal(slices.Sorted(slices.Values(c.Arms)), slices.Sorted(slices.Values(env.ArmNames()))) {
			return nil, fmt.Errorf("bandit configuration has arms %q, the environment %s has %q", c.Arms, env.Name(), env.ArmNames())
		}
		c.Arms = slices.Clone(env.ArmNames())
	}
	if d := bandit.NewEncoder(c.Features).Dim(); d != env.NumFeatures() {
		return nil, fmt.Errorf("bandit configuration's features encode to %d inputs, the environment %s has %d", d, env.Name(), env.NumFeatures())
	}
	return &c, nil
}

// ParsePolicies parses a comma-separated list of policies:
// uniform, greedy, mf-ts, refined-ts, linear-ts, laplace-ts, flow-ts,
// neural-linear, and eps-greedy, which
// expands to one policy per epsilon of the preset, or eps-greedy:E for
// a given epsilon E in [0, 1] (bandit.ParsePolicySpec's grammar), and laplace-ts:diagonal or laplace-ts:last-layer for
// a Laplace structure (named laplace-ts-diagonal, laplace-ts-last-layer;
// plain laplace-ts is the default, diagonal), and refined-ts:supply for
// refined TS on the service's refined-sample supply (named
// refined-ts-supply; SupplyConfig). mf-ts and refined-ts take training methods after an
// "@", joined by "+" (TrainingMethods): "mf-ts@ngvi",
// "refined-ts@collapsed-mean+ngvi"; the policy keeps that name in the
// results, so that one run compares training methods side by side.
func ParsePolicies(list string, p Preset) ([]PolicySpec, error) {
	var specs []PolicySpec
	seen := map[string]bool{}
	add := func(s PolicySpec) error {
		if seen[s.Name] {
			return fmt.Errorf("policy %q given twice", s.Name)
		}
		seen[s.Name] = true
		specs = append(specs, s)
		return nil
	}
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		item, methods, hasMethods := strings.Cut(item, "@")
		kind, arg, hasArg := strings.Cut(item, ":")
		// KIND:ARG is bandit.ParsePolicySpec's grammar, as evaluate's;
		// it refuses an unknown kind.
		ps, err := bandit.ParsePolicySpec(item)
		if err != nil {
			return nil, err
		}
		caps := bandit.KindCapabilities(ps.Kind)
		if hasArg && hasMethods {
			return nil, fmt.Errorf("%s: a policy with an argument (%s) takes no training method", item+"@"+methods, arg)
		}
		if ps.Supply {
			if err := add(PolicySpec{Name: kind + "-supply", Kind: kind, Supply: true}); err != nil {
				return nil, err
			}
			continue
		}
		if ps.Laplace != "" {
			if err := add(PolicySpec{Name: kind + "-" + ps.Laplace, Kind: kind, Laplace: ps.Laplace}); err != nil {
				return nil, err
			}
			continue
		}
		if hasMethods {
			if !caps.MeanField {
				return nil, fmt.Errorf("policy %q takes no training method (only mf-ts and refined-ts do)", kind)
			}
			spec := PolicySpec{Name: kind + "@" + methods, Kind: kind}
			for _, m := range strings.Split(methods, "+") {
				if _, ok := TrainingMethods[m]; !ok {
					return nil, fmt.Errorf("%s@%s: unknown training method %q (want one of %s, joined by +)", kind, methods, m, strings.Join(methodNames(), ", "))
				}
				spec.Methods = append(spec.Methods, m)
			}
			if err := add(spec); err != nil {
				return nil, err
			}
			continue
		}
		if !caps.Explores {
			if err := add(PolicySpec{Name: kind, Kind: kind}); err != nil {
				return nil, err
			}
			continue
		}
		eps := p.Epsilons
		if ps.Epsilon != nil {
			eps = []float64{*ps.Epsilon}
		}
		for _, e := range eps {
			if err := add(PolicySpec{Name: fmt.Sprintf("%s-%g", kind, e), Kind: kind, Epsilon: e}); err != nil {
				return nil, err
			}
		}
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("no policies given")
	}
	return specs, nil
}
