package nn

import (
	"math"
	"math/rand/v2"
)

// MaxRISSamples bounds Options.RISSamples.
const MaxRISSamples = 1024

// Estimator selects how an Evaluator estimates the expected log-likelihood
// under a mean-field Gaussian q(w) = N(mu, diag(sigma^2)).
type Estimator int

const (
	// LocalReparam samples the pre-activations of each layer instead of
	// the weights (Kingma, Salimans & Welling 2015, Sec. 2.3): given the
	// layer input A (rows of the batch),
	//
	//	M = A mu_W^T + mu_b,  V = (A∘A)(sigma_W∘sigma_W)^T + sigma_b∘sigma_b,
	//	Z = M + sqrt(V)∘E,  E_ij ~ N(0, 1) fresh per row i and unit j,
	//
	// which has the same marginals per row as a weight sample but
	// independent noise across rows, hence lower variance. The gradients
	// are exact for the sampled E.
	LocalReparam Estimator = iota
	// WeightReparam draws one weight sample per call,
	// w = mu + sigma∘eps, eps ~ N(0, I), shared by all rows (Blundell et
	// al. 2015, Sec. 3.2; Khan 2018, "Stochastic Gradients II"), and
	// returns dMu = g, dSigma = g∘eps with g = d log p / dw at w.
	WeightReparam
	// Deterministic evaluates at w = mu and returns dSigma = 0: the MAP or
	// point-estimate objective.
	Deterministic
	// RIS is reparameterized importance sampling (Long et al. 2024,
	// Algorithm 1; see ris.go): each hidden layer passes on an
	// importance-sampling estimate of its output's first moment given
	// the previous layer's, from Options.RISSamples draws per row and
	// unit of a Gaussian proposal fitted to the optimal one (Eqs. 9-12)
	// and reparameterized as q's noise shifted and scaled (Eq. 17); the
	// output layer is sampled as under LocalReparam. It estimates the
	// paper's moment-propagation objective, not the expected
	// log-likelihood of the other estimators, with lower variance.
	RIS
)

// String returns the estimator's name.
func (e Estimator) String() string {
	switch e {
	case LocalReparam:
		return "LocalReparam"
	case WeightReparam:
		return "WeightReparam"
	case Deterministic:
		return "Deterministic"
	case RIS:
		return "RIS"
	}
	return "Estimator(invalid)"
}

// estimatorNames are the estimators' names in configurations (JSON and
// command lines), in the order of their constants.
var estimatorNames = []string{"local-reparam", "weight-reparam", "deterministic", "ris"}

// Name returns the estimator's name in configurations: local-reparam,
// weight-reparam, deterministic or ris.
func (e Estimator) Name() string {
	if e < 0 || int(e) >= len(estimatorNames) {
		return "invalid"
	}
	return estimatorNames[e]
}

// Family is the distribution of a reward given the network's output for
// the played arm.
type Family int

const (
	// Gaussian rewards: y ~ N(Shift + Scale*f, s2), with the noise
	// variance s2 fixed, learned and shared by the arms, or learned per
	// arm (Options.NoisePerArm) under an inverse-gamma prior
	// (Options.NoisePrior).
	Gaussian Family = iota
	// Bernoulli rewards in [0, 1] (0/1 clicks): the output is a logit,
	// p(y = 1) = sigmoid(f), and
	//
	//	log p(y | f) = y f - log(1 + exp(f)),
	//
	// the logistic likelihood (for y strictly between 0 and 1 the
	// cross-entropy, a quasi-likelihood). There is no noise variance and
	// no standardization: Standardization must be the identity.
	Bernoulli
)

// familyNames are the families' names in configurations.
var familyNames = []string{"gaussian", "bernoulli"}

// String returns the family's name in configurations: gaussian or
// bernoulli.
func (f Family) String() string {
	if f < 0 || int(f) >= len(familyNames) {
		return "invalid"
	}
	return familyNames[f]
}

// InvGamma is an inverse-gamma prior on a noise variance in standardized
// reward units, v = s2/Scale^2:
//
//	p(v) = b^a / Gamma(a) v^(-a-1) exp(-b/v),   a = Shape, b = Rate,
//
// the conjugate prior of linear TS and NeuralLinear (Riquelme, Tucker &
// Snoek 2018). On the hyperparameter h = log s2 (Jacobian included),
//
//	log p(h) = a log b - log Gamma(a) - a log v - b/v,   d/dh = -a + b/v.
//
// The zero value is no prior (a flat one on h).
type InvGamma struct {
	Shape, Rate float64
}

// Options configures a Likelihood.
type Options struct {
	// Family is the reward distribution; the zero value is Gaussian.
	Family Family
	// Estimator is used by ExpectedLogLik. The zero value is LocalReparam.
	Estimator Estimator
	// RISSamples is M, the number of importance samples per row and
	// hidden unit of the RIS estimator (Algorithm 1, lines 3-8); zero
	// means 1, at most MaxRISSamples. Other estimators ignore it.
	RISSamples int
	// RISFixedProposal makes RIS's backward pass hold the proposal fixed,
	// the gradient of Long et al. (2024), Section 4.2. By default it
	// differentiates through the proposal as well, which is also
	// unbiased and has several times less variance (ris.go,
	// bench/ris.md).
	RISFixedProposal bool
	// NoiseVar is the fixed noise variance s2 in squared reward units;
	// zero means 1. It is ignored when LearnNoise is set.
	NoiseVar float64
	// LearnNoise makes the noise variance a hyperparameter: NumHyper is 1
	// and hyper[0] = log s2 (s2 in squared reward units, so it keeps its
	// meaning when the standardization changes).
	LearnNoise bool
	// NoisePerArm, with LearnNoise, gives every arm its own noise
	// variance: NumHyper is the number of arms and hyper[a] = log s2_a.
	NoisePerArm bool
	// NoiseContext, with LearnNoise, makes every arm's log noise
	// variance a linear function of the context (a heteroscedastic
	// Gaussian likelihood; Nix & Weigend 1994 give the variance its own
	// output, here a linear one):
	//
	//	log s2_a(x) = c_a + u_a . x,   (c_a, u_a) = hyper[a(d+1) : (a+1)(d+1)],
	//
	// with d = Arch.In(), s2 in squared reward units: NumHyper is
	// Arch.Out() x (d+1). A context whose rewards vary a lot for its
	// arm (the mushroom's poisonous ones when eaten) is then fitted
	// less closely than one whose rewards do not. The intercepts take
	// NoisePrior, the slopes u N(0, NoiseSlopeVar). It overrides
	// NoisePerArm. s2_a(x) is held at or above ContextNoiseFloor x
	// Scale^2 (a noise standard deviation of at least a tenth of the
	// rewards'), and log s2_a(x) at most MaxLogNoise: without the
	// floor an arm whose rewards never vary (the mushroom's "pass")
	// has its noise fall without bound, and its likelihood's sharpness
	// with it (bench/mushroom-noise: two seeds of five locked into
	// passing).
	NoiseContext bool
	// NoisePrior is the prior of each learned noise variance; the zero
	// value is none (the point estimate is then the maximum likelihood
	// one, which a model can drive towards explaining every reward as
	// noise). Likelihood.LogHyperPrior evaluates it.
	NoisePrior InvGamma
	// Standardization maps rewards to the units the network fits. The
	// zero value is the identity. See FitStandardization.
	Standardization Standardization
	// ReferenceNoise makes the fast engine (NewEvaluator32) draw its
	// normals with rng.NormFloat64 in the order the float64 evaluator
	// draws them, so that both engines see the same noise, for tests
	// and comparisons. By default it draws them from a kern.RNG seeded
	// with one rng.Uint64 per call, about ten times faster.
	ReferenceNoise bool
}

// NoiseSlopeVar is the prior variance of each slope u_aj of a context
// noise (Options.NoiseContext), in log-variance units: a one-hot
// feature can change an arm's noise variance by a factor of about
// e^1 = 2.7 a prior standard deviation.
const NoiseSlopeVar = 1.0

// MaxLogNoise bounds |log s2_a(x)| of a context noise
// (Options.NoiseContext): s2 between 1e-13 and 1e13 squared reward
// units, so that no row's variance underflows to zero or overflows.
const MaxLogNoise = 30.0

// ContextNoiseFloor is the least noise variance of a context noise
// (Options.NoiseContext) as a fraction of the squared standardization
// scale, Scale^2: the one value screened (bench/mushroom-noise).
const ContextNoiseFloor = 0.01

// Likelihood is the Gaussian bandit likelihood of an MLP on a fixed View:
// for row i with context x_i, played arm a_i and reward y_i,
//
//	log p(y_i | x_i, w) = log N(y_i | Shift + Scale*f_{a_i}(x_i; w), s2)
//	                    = -1/2 log(2 pi s2) - (y_i - Shift - Scale*f_{a_i}(x_i; w))^2 / (2 s2),
//
// where f is the network of the Arch. Only the played arm's output enters
// (bandit feedback). A Likelihood is immutable and may be shared by any
// number of goroutines; its Evaluators hold the scratch space, one per
// goroutine. It satisfies posterior.Likelihood.
type Likelihood struct {
	arch Arch
	data View
	opt  Options
}

// NewLikelihood returns the likelihood of the rows of data under networks
// of architecture a. It panics if the data's dimension or number of arms
// does not match a, or if the options are invalid. It is cheap: the data is
// shared, not copied.
func NewLikelihood(a Arch, data View, opt Options) *Likelihood {
	if a.NumLayers() == 0 {
		panic("nn: zero Arch; use NewArch")
	}
	if data.Len() > 0 || data.dim != 0 {
		if data.Dim() != a.In() {
			panic("nn: data dimension does not match the Arch's input width")
		}
		if data.Arms() != a.Out() {
			panic("nn: number of arms does not match the Arch's output width")
		}
	}
	switch opt.Estimator {
	case LocalReparam, WeightReparam, Deterministic, RIS:
	default:
		panic("nn: unknown estimator")
	}
	if opt.RISSamples < 0 || opt.RISSamples > MaxRISSamples {
		panic("nn: RISSamples must be in [0, MaxRISSamples]")
	}
	if opt.RISSamples == 0 {
		opt.RISSamples = 1
	}
	if opt.NoiseVar < 0 || math.IsInf(opt.NoiseVar, 0) || math.IsNaN(opt.NoiseVar) {
		panic("nn: noise variance must be positive and finite")
	}
	if opt.NoiseVar == 0 {
		opt.NoiseVar = 1
	}
	switch opt.Family {
	case Gaussian:
	case Bernoulli:
		if opt.Standardization.Shift != 0 || opt.Standardization.scale() != 1 {
			panic("nn: a Bernoulli likelihood takes no standardization")
		}
		opt.LearnNoise, opt.NoisePerArm, opt.NoiseContext = false, false, false
	default:
		panic("nn: unknown family")
	}
	if !opt.LearnNoise {
		opt.NoisePerArm, opt.NoiseContext = false, false
	}
	if opt.NoiseContext {
		opt.NoisePerArm = false
	}
	if p := opt.NoisePrior; p != (InvGamma{}) && !(p.Shape > 0 && p.Rate > 0 && !math.IsInf(p.Shape, 0) && !math.IsInf(p.Rate, 0)) {
		panic("nn: inverse-gamma shape and rate must be positive and finite")
	}
	opt.Standardization.Scale = opt.Standardization.scale()
	return &Likelihood{arch: a, data: data, opt: opt}
}

// NumParams returns the length of w, Arch.NumParams.
func (l *Likelihood) NumParams() int { return l.arch.n }

// NumHyper returns the number of noise hyperparameters: 0 if the
// noise is fixed or the family has none, Arch.Out() x (Arch.In() + 1)
// with NoiseContext, the number of arms with NoisePerArm, else 1.
func (l *Likelihood) NumHyper() int {
	switch {
	case !l.opt.LearnNoise:
		return 0
	case l.opt.NoiseContext:
		return l.arch.Out() * (l.arch.In() + 1)
	case l.opt.NoisePerArm:
		return l.arch.Out()
	}
	return 1
}

// Family returns the reward distribution.
func (l *Likelihood) Family() Family { return l.opt.Family }

// NumRows returns the number of rows of the data.
func (l *Likelihood) NumRows() int { return l.data.Len() }

// Arch returns the network architecture.
func (l *Likelihood) Arch() Arch { return l.arch }

// Data returns the rows the likelihood is defined on.
func (l *Likelihood) Data() View { return l.data }

// Options returns the options with defaults filled in.
func (l *Likelihood) Options() Options { return l.opt }

// NoiseVar returns the noise variance s2 in squared reward units given the
// hyperparameters: exp(hyper[0]) if the noise is learned, else the fixed
// Options.NoiseVar; with NoisePerArm, the mean of the arms' variances
// (with NoiseContext, of NoiseVars'). It is 1 for a Bernoulli
// likelihood, whose curvature in the logit is at most 1/4.
func (l *Likelihood) NoiseVar(hyper []float64) float64 {
	if len(hyper) != l.NumHyper() {
		panic("nn: len(hyper) must be NumHyper")
	}
	switch {
	case l.opt.Family == Bernoulli:
		return 1
	case !l.opt.LearnNoise:
		return l.opt.NoiseVar
	}
	var s float64
	vs := l.NoiseVars(nil, hyper)
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs))
}

// ContextNoiseVar returns arm a's noise variance at context x, in
// squared reward units: exp(log s2_a(x)) under Options.NoiseContext
// (clamped as there), NoiseVars' otherwise.
func (l *Likelihood) ContextNoiseVar(a int, x, hyper []float64) float64 {
	if !l.opt.NoiseContext || l.opt.Family == Bernoulli {
		return l.NoiseVars(nil, hyper)[a]
	}
	ls, _ := contextLogNoise(hyper, a, l.arch.In(), x, logNoiseFloor(l.opt.Standardization.Scale))
	return math.Exp(ls)
}

// logNoiseFloor is log(ContextNoiseFloor sc^2), the least log noise
// variance of a context noise under the standardization scale sc.
func logNoiseFloor(sc float64) float64 { return math.Log(ContextNoiseFloor * sc * sc) }

// contextLogNoise is log s2_a(x) of Options.NoiseContext, held to
// [floor, MaxLogNoise] (and above -MaxLogNoise), floor being
// logNoiseFloor of the standardization's scale, and whether it was held.
func contextLogNoise(hyper []float64, a, d int, x []float64, floor float64) (float64, bool) {
	h := hyper[a*(d+1) : (a+1)*(d+1)]
	ls := h[0]
	for j, v := range x {
		if v != 0 {
			ls += h[1+j] * v
		}
	}
	held := ls <= -MaxLogNoise || ls >= MaxLogNoise
	ls = min(max(ls, -MaxLogNoise), MaxLogNoise)
	if ls < floor {
		ls, held = floor, true
	}
	return ls, held
}

// NoiseVars writes the noise variance of every arm, in squared reward
// units, into dst (length Arch.Out(); allocated when nil) and returns it;
// under NoiseContext, each arm's at the zero context, exp(c_a). A
// Bernoulli likelihood has none: it writes ones.
func (l *Likelihood) NoiseVars(dst, hyper []float64) []float64 {
	if len(hyper) != l.NumHyper() {
		panic("nn: len(hyper) must be NumHyper")
	}
	if dst == nil {
		dst = make([]float64, l.arch.Out())
	}
	if len(dst) != l.arch.Out() {
		panic("nn: len(dst) must be the number of arms")
	}
	for a := range dst {
		switch {
		case l.opt.Family == Bernoulli:
			dst[a] = 1
		case !l.opt.LearnNoise:
			dst[a] = l.opt.NoiseVar
		case l.opt.NoiseContext:
			dst[a] = math.Exp(hyper[a*(l.arch.In()+1)])
		case l.opt.NoisePerArm:
			dst[a] = math.Exp(hyper[a])
		default:
			dst[a] = math.Exp(hyper[0])
		}
	}
	return dst
}

// LogHyperPrior returns the log prior density of the hyperparameters,
// sum_k log p(h_k) under Options.NoisePrior (InvGamma) on each log noise
// variance (under NoiseContext on each intercept c_a, and N(0,
// NoiseSlopeVar) on each slope), and writes its gradient into dHyper
// (length NumHyper) when it is not nil. Without a prior it returns 0 and
// a zero gradient (under NoiseContext, the slopes' prior alone).
// posterior's trainer adds it to the objective it maximizes
// (posterior.HyperPrior).
func (l *Likelihood) LogHyperPrior(dHyper, hyper []float64) float64 {
	if len(hyper) != l.NumHyper() || dHyper != nil && len(dHyper) != len(hyper) {
		panic("nn: len(hyper) must be NumHyper")
	}
	clear(dHyper)
	var lp float64
	stride := 1
	if l.opt.NoiseContext {
		// Slopes: log N(u | 0, NoiseSlopeVar).
		stride = l.arch.In() + 1
		c := -0.5 * math.Log(2*math.Pi*NoiseSlopeVar)
		for k, u := range hyper {
			if k%stride == 0 {
				continue
			}
			lp += c - u*u/(2*NoiseSlopeVar)
			if dHyper != nil {
				dHyper[k] = -u / NoiseSlopeVar
			}
		}
	}
	p := l.opt.NoisePrior
	if p == (InvGamma{}) {
		return lp
	}
	sc2 := l.opt.Standardization.Scale * l.opt.Standardization.Scale
	lg, _ := math.Lgamma(p.Shape)
	for k := 0; k < len(hyper); k += stride {
		h := hyper[k]
		// v = exp(h)/Scale^2; log p(h) = a log b - lgamma(a) - a log v - b/v.
		logv := h - math.Log(sc2)
		binv := p.Rate * math.Exp(-logv)
		lp += p.Shape*math.Log(p.Rate) - lg - p.Shape*logv - binv
		if dHyper != nil {
			dHyper[k] = -p.Shape + binv
		}
	}
	return lp
}

// Evaluator computes the data term and its gradients for one goroutine; it
// is the same type as posterior.Evaluator (an alias of the interface
// literal), so *Likelihood satisfies posterior.Likelihood.
//
// ExpectedLogLik returns a one-sample unbiased estimate of
//
//	sum_{i in rows} E_{w ~ N(mu, diag(sigma^2))} [log p(y_i | x_i, w, hyper)]
//
// under the Likelihood's Estimator, and overwrites dMu, dSigma and dHyper
// with its gradients with respect to mu, sigma and hyper. LogLik returns
// sum_{i in rows} log p(y_i | x_i, w, hyper) and, when dW (dHyper) is not
// nil, overwrites it with the gradient with respect to w (hyper). In both,
// rows == nil means every row; rows are processed in chunks of at most
// maxBatch. Gradient slices must not alias the inputs. Neither method
// allocates.
type Evaluator = interface {
	ExpectedLogLik(dMu, dSigma, dHyper, mu, sigma, hyper []float64, rows []int, rng *rand.Rand) float64
	LogLik(dW, dHyper, w, hyper []float64, rows []int) float64
}

// NewEvaluator returns scratch space for batches of at most maxBatch rows.
// It is the only method that allocates.
func (l *Likelihood) NewEvaluator(maxBatch int) Evaluator {
	return newEvaluator(l, maxBatch)
}
