package policy

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"
)

// Defaults of LinearConfig, from Riquelme, Tucker, Snoek (2018), "Deep
// Bayesian Bandits Showdown", Section 3 (LinFullPost) and their code's
// hyper-parameters (lambda_prior = 0.25, a0 = b0 = 6).
const (
	DefaultLinearLambda = 0.25
	DefaultLinearA0     = 6
	DefaultLinearB0     = 6
	// DefaultLinearProbabilitySamples is the default M, the number of
	// extra posterior draws that estimate a decision's probabilities.
	DefaultLinearProbabilitySamples = 100
)

// LinearConfig configures linear Thompson sampling.
type LinearConfig struct {
	// Arms is the number of arms, at least 1. Required.
	Arms int `json:"arms,omitempty"`
	// Features is the length of the contexts, at least 0 (an intercept
	// is added to them). Required.
	Features int `json:"features,omitempty"`
	// Lambda is λ > 0, the prior precision of the coefficients relative
	// to the noise: β | σ² ~ N(0, σ² λ⁻¹ I). Zero means 0.25.
	Lambda float64 `json:"lambda"`
	// A0 and B0 are the shape and scale > 0 of the noise prior
	// σ² ~ InvGamma(A0, B0). Zero means 6.
	A0 float64 `json:"a0"`
	B0 float64 `json:"b0"`
	// ProbabilitySamples > 0 (zero means 100) computes
	// Decision.Probabilities exactly (see Linear.Decide; the number
	// itself no longer matters: it was the Monte Carlo draws of an
	// estimate); a negative value means not computed (Probabilities is
	// nil).
	ProbabilitySamples int `json:"probability_samples"`
}

func (c *LinearConfig) setDefaults() {
	c.Lambda = cmp.Or(c.Lambda, DefaultLinearLambda)
	c.A0 = cmp.Or(c.A0, DefaultLinearA0)
	c.B0 = cmp.Or(c.B0, DefaultLinearB0)
	c.ProbabilitySamples = cmp.Or(c.ProbabilitySamples, DefaultLinearProbabilitySamples)
}

func (c *LinearConfig) validate() error {
	switch {
	case c.Arms < 1:
		return fmt.Errorf("policy: linear-ts with %d arms, want at least 1", c.Arms)
	case c.Features < 0:
		return fmt.Errorf("policy: linear-ts with %d features, want at least 0", c.Features)
	case !(c.Lambda > 0) || math.IsInf(c.Lambda, 0):
		return fmt.Errorf("policy: linear-ts lambda = %g, want a finite number > 0", c.Lambda)
	case !(c.A0 > 0) || math.IsInf(c.A0, 0):
		return fmt.Errorf("policy: linear-ts a0 = %g, want a finite number > 0", c.A0)
	case !(c.B0 > 0) || math.IsInf(c.B0, 0):
		return fmt.Errorf("policy: linear-ts b0 = %g, want a finite number > 0", c.B0)
	}
	return nil
}

// Linear is Thompson sampling with an exact conjugate linear model per
// arm, LinFullPost of Riquelme, Tucker, Snoek (2018), Section 3. For arm
// k, with z = (x, 1) the context and an intercept (d = Features + 1),
//
//	r = zᵀβ_k + ε,  ε ~ N(0, σ_k²)
//	β_k | σ_k² ~ N(0, σ_k² Λ₀⁻¹),  Λ₀ = λ I
//	σ_k² ~ InvGamma(a₀, b₀)
//
// After n observations (Z, y) of arm k the posterior is
// Normal-inverse-gamma (e.g. Murphy 2012, "Machine Learning: A
// Probabilistic Perspective", Section 7.6.3, with prior mean 0):
//
//	Λ_n = Λ₀ + ZᵀZ,  μ_n = Λ_n⁻¹ Zᵀy
//	a_n = a₀ + n/2,  b_n = b₀ + ½ (yᵀy − μ_nᵀ Λ_n μ_n)
//	β | σ² ~ N(μ_n, σ² Λ_n⁻¹),  σ² ~ InvGamma(a_n, b_n)
//
// Observe updates it exactly and incrementally in O(d²) per observation:
// the upper Cholesky factor U of Λ = UᵀU is updated by a rank-one
// Givens update (LINPACK dchud; Gill, Golub, Murray, Saunders 1974), Zᵀy
// is accumulated, μ is recomputed by two triangular solves, and b by the
// equivalent recursive form
//
//	b_{n+1} = b_n + ½ (y − zᵀμ_n)² / (1 + zᵀΛ_n⁻¹z)
//
// which needs no cancelling difference of large sums. Keeping the
// Cholesky factor rather than the covariance (Sherman–Morrison) costs the
// same O(d²) but never loses positive definiteness to rounding, and the
// factor is what sampling needs.
//
// Linear is not safe for concurrent use.
type Linear struct {
	cfg  LinearConfig
	d    int // Features + 1
	arms []linearArm
	rng  *rand.Rand

	// Scratch, reused by every call.
	z      []float64 // (x, 1)
	w      []float64 // triangular solves
	mean   []float64 // zᵀμ_k per arm
	spread []float64 // √(zᵀΛ_k⁻¹z) per arm
	scale  []float64 // the t's scale per arm, spread·√(b/a)
	nu     []float64 // the t's degrees of freedom per arm, 2a
	win    winScratch
}

// linearArm is one arm's posterior.
type linearArm struct {
	u    []float64 // d×d row-major upper Cholesky factor of Λ; below the diagonal unused
	zy   []float64 // Zᵀy
	mu   []float64 // μ = Λ⁻¹Zᵀy
	a, b float64
	n    int
}

var _ Policy = (*Linear)(nil)

// NewLinear returns linear Thompson sampling with cfg, drawing from rng,
// which it keeps (see Policy). Every arm starts at the prior.
func NewLinear(cfg LinearConfig, rng *rand.Rand) (*Linear, error) {
	if rng == nil {
		panic("policy: NewLinear with a nil *rand.Rand")
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := cfg.Features + 1
	l := &Linear{
		cfg:    cfg,
		d:      d,
		arms:   make([]linearArm, cfg.Arms),
		rng:    rng,
		z:      make([]float64, d),
		w:      make([]float64, d),
		mean:   make([]float64, cfg.Arms),
		spread: make([]float64, cfg.Arms),
		scale:  make([]float64, cfg.Arms),
		nu:     make([]float64, cfg.Arms),
	}
	for k := range l.arms {
		arm := linearArm{u: make([]float64, d*d), zy: make([]float64, d), mu: make([]float64, d), a: cfg.A0, b: cfg.B0}
		for i := range d {
			arm.u[i*d+i] = math.Sqrt(cfg.Lambda) // Λ₀ = λ I
		}
		l.arms[k] = arm
	}
	return l, nil
}

// Name returns "linear-ts".
func (l *Linear) Name() string { return "linear-ts" }

// Config returns the configuration with defaults filled in.
func (l *Linear) Config() LinearConfig { return l.cfg }

// Decide draws, for every arm k, σ_k² and β_k from the arm's posterior
// and picks the allowed arm with the largest zᵀβ_k (Scores holds them for
// all arms).
//
// Only zᵀβ_k enters the decision, and given σ² it is distributed as
//
//	zᵀβ_k | σ² ~ N(zᵀμ_k, σ² zᵀΛ_k⁻¹z)
//
// so Decide draws σ_k² ~ InvGamma(a_k, b_k) and then zᵀβ_k from this
// normal directly: the same joint law as drawing the d-dimensional β_k
// and projecting it, at O(1) cost per draw once ‖U_k⁻ᵀz‖² = zᵀΛ_k⁻¹z has
// been computed by one O(d²) triangular solve per arm.
//
// Probabilities are computed, not estimated (issue 30, finding 1: a
// Monte Carlo estimate from further draws could give the chosen arm 0).
// Marginally over σ_k², zᵀβ_k is a Student t,
//
//	zᵀβ_k ~ zᵀμ_k + √(b_k/a_k · zᵀΛ_k⁻¹z) · t_{2a_k}
//
// (Murphy 2012, Section 7.6.3.3), independent across arms, so the
// probability that the rule picks k is the one-dimensional integral that
// StudentWinProbs computes (to about 1e-5: see there). Excluded arms get
// exactly 0.
//
// Each call draws, per arm, one gamma (Marsaglia–Tsang, a few uniforms
// and normals) and one normal; the probabilities cost O(arms²) density
// evaluations (StudentWinProbs: about 10 µs for 2 arms, 35 µs for 4).
func (l *Linear) Decide(_ context.Context, x []float64, excluded []bool) (Decision, error) {
	if err := checkContext(x, l.cfg.Features); err != nil {
		return Decision{}, err
	}
	if err := checkExcluded(excluded, len(l.arms)); err != nil {
		return Decision{}, err
	}
	l.setZ(x)
	for k := range l.arms {
		arm := &l.arms[k]
		l.mean[k] = blas64.Dot(l.vec(l.z), l.vec(arm.mu))
		l.spread[k] = math.Sqrt(l.predictiveFactor(arm))
	}
	d := Decision{Arm: -1, Scores: make([]float64, len(l.arms)), Sample: SampleExact}
	for k := range l.arms {
		d.Scores[k] = l.drawScore(k)
		if (excluded == nil || !excluded[k]) && (d.Arm < 0 || d.Scores[k] > d.Scores[d.Arm]) {
			d.Arm = k
		}
	}
	if l.cfg.ProbabilitySamples > 0 {
		d.Probabilities = make([]float64, len(l.arms))
		for k := range l.arms {
			arm := &l.arms[k]
			l.scale[k] = l.spread[k] * math.Sqrt(arm.b/arm.a)
			l.nu[k] = 2 * arm.a
		}
		l.win.winProbs(d.Probabilities, l.mean, l.scale, l.nu, excluded)
	}
	return d, nil
}

// DrawScores writes into dst (n×arms, row-major; allocated when nil) n
// independent draws of every arm's zᵀβ_k at the context x, each as
// Decide draws its Scores: the draws behind the Monte Carlo
// probabilities of a ranking's lower slots (bandit.Agent.Rank).
func (l *Linear) DrawScores(dst, x []float64, n int) ([]float64, error) {
	if err := checkContext(x, l.cfg.Features); err != nil {
		return nil, err
	}
	arms := len(l.arms)
	if dst == nil {
		dst = make([]float64, n*arms)
	}
	if len(dst) != n*arms {
		panic(fmt.Sprintf("policy: DrawScores of %d draws into %d for %d arms", n, len(dst), arms))
	}
	l.setZ(x)
	for k := range l.arms {
		arm := &l.arms[k]
		l.mean[k] = blas64.Dot(l.vec(l.z), l.vec(arm.mu))
		l.spread[k] = math.Sqrt(l.predictiveFactor(arm))
	}
	for i := range n {
		for k := range l.arms {
			dst[i*arms+k] = l.drawScore(k)
		}
	}
	return dst, nil
}

// DrawRows writes into dst (n×rows, row-major; allocated when nil) n
// joint draws of the scores zᵣᵀβ of the rows of x (rows×Features,
// row-major; zᵣ = (xᵣ, 1)) under arm's posterior, from rng (nil: the
// Linear's own, as Decide's): each draw is one
// σ² ~ InvGamma(a, b) and one
//
//	β = μ + σ U⁻¹ε,  ε ~ N(0, I),  so that β | σ² ~ N(μ, σ² Λ⁻¹)
//
// (Λ = UᵀU), shared by every row. It is Thompson sampling on one linear
// model scoring several inputs at once: the (context, arm) pairs of a
// bandit with arm features (bandit.Config.ArmFeatures), where the scores
// of one draw must be of one β to be a Thompson sample of the ranking.
// O(d²) per draw for the triangular solve and O(rows·d) for the scores.
func (l *Linear) DrawRows(dst, x []float64, rows, arm, n int, rng *rand.Rand) ([]float64, error) {
	f := l.cfg.Features
	if rows < 1 || len(x) != rows*f {
		return nil, fmt.Errorf("policy: DrawRows of %d rows on %d numbers, want rows of %d features", rows, len(x), f)
	}
	if err := checkArmReward(arm, len(l.arms), 0); err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]float64, n*rows)
	}
	if len(dst) != n*rows {
		panic(fmt.Sprintf("policy: DrawRows of %d draws into %d for %d rows", n, len(dst), rows))
	}
	if rng == nil {
		rng = l.rng
	}
	p := &l.arms[arm]
	beta := make([]float64, l.d)
	for i := range n {
		sigma := math.Sqrt(p.b / gammaRand(rng, p.a))
		for j := range beta {
			beta[j] = rng.NormFloat64()
		}
		blas64.Trsv(blas.NoTrans, l.tri(p), l.vec(beta)) // U⁻¹ε
		for j := range beta {
			beta[j] = p.mu[j] + sigma*beta[j]
		}
		for r := range rows {
			s := beta[l.d-1]
			for j, v := range x[r*f : (r+1)*f] {
				s += v * beta[j]
			}
			dst[i*rows+r] = s
		}
	}
	return dst, nil
}

// Means writes into dst (allocated when nil) every arm's posterior mean
// reward at the context x, zᵀμ_k with z = (x, 1): the ridge regression
// of the arm's rewards on its contexts, shrunk toward 0 by the prior
// (Λ₀ = λ I). It draws nothing. refinery evaluate uses it as the
// direct-method reward model.
func (l *Linear) Means(dst, x []float64) ([]float64, error) {
	if err := checkContext(x, l.cfg.Features); err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]float64, len(l.arms))
	}
	if len(dst) != len(l.arms) {
		panic(fmt.Sprintf("policy: Means into %d for %d arms", len(dst), len(l.arms)))
	}
	l.setZ(x)
	for k := range l.arms {
		dst[k] = blas64.Dot(l.vec(l.z), l.vec(l.arms[k].mu))
	}
	return dst, nil
}

// drawScore draws zᵀβ_k from arm k's posterior, with l.mean and
// l.spread set for the current context.
func (l *Linear) drawScore(k int) float64 {
	s2 := l.arms[k].b / gammaRand(l.rng, l.arms[k].a) // σ² ~ InvGamma(a, b)
	return l.mean[k] + math.Sqrt(s2)*l.spread[k]*l.rng.NormFloat64()
}

// Observe adds (x, reward) to arm's posterior; see Linear for the
// update. It is exact: after n observations the posterior equals the
// batch formulas up to rounding.
func (l *Linear) Observe(_ context.Context, x []float64, arm int, reward float64) error {
	if err := checkContext(x, l.cfg.Features); err != nil {
		return err
	}
	if err := checkArmReward(arm, len(l.arms), reward); err != nil {
		return err
	}
	l.setZ(x)
	p := &l.arms[arm]
	d := l.d

	// Noise posterior, from the predictive residual before the update.
	q := l.predictiveFactor(p) // zᵀΛ_n⁻¹z
	e := reward - blas64.Dot(l.vec(l.z), l.vec(p.mu))
	p.b += 0.5 * e * e / (1 + q)
	p.a += 0.5
	p.n++

	// Λ_{n+1} = Λ_n + zzᵀ: rank-one update of U, rotating a copy of z
	// into it row by row.
	copy(l.w, l.z)
	for i := range d {
		c, s, r, _ := blas64.Rotg(p.u[i*d+i], l.w[i])
		if r < 0 { // keep the diagonal positive
			c, s, r = -c, -s, -r
		}
		p.u[i*d+i] = r
		if n := d - i - 1; n > 0 {
			blas64.Rot(
				blas64.Vector{N: n, Inc: 1, Data: p.u[i*d+i+1 : (i+1)*d]},
				blas64.Vector{N: n, Inc: 1, Data: l.w[i+1 : d]},
				c, s)
		}
	}

	// μ_{n+1} = Λ_{n+1}⁻¹ (Zᵀy + z y): Uᵀ t = Zᵀy, then U μ = t.
	blas64.Axpy(reward, l.vec(l.z), l.vec(p.zy))
	copy(p.mu, p.zy)
	blas64.Trsv(blas.Trans, l.tri(p), l.vec(p.mu))
	blas64.Trsv(blas.NoTrans, l.tri(p), l.vec(p.mu))
	return nil
}

// predictiveFactor returns zᵀΛ⁻¹z = ‖U⁻ᵀz‖² for l.z, using l.w.
func (l *Linear) predictiveFactor(p *linearArm) float64 {
	copy(l.w, l.z)
	blas64.Trsv(blas.Trans, l.tri(p), l.vec(l.w))
	return blas64.Dot(l.vec(l.w), l.vec(l.w))
}

func (l *Linear) setZ(x []float64) {
	copy(l.z, x)
	l.z[l.d-1] = 1
}

func (l *Linear) vec(v []float64) blas64.Vector { return blas64.Vector{N: l.d, Inc: 1, Data: v} }

func (l *Linear) tri(p *linearArm) blas64.Triangular {
	return blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: l.d, Stride: l.d, Data: p.u}
}

// LinearPosterior is one arm's posterior (see Linear): the coefficients
// (intercept last) are β | σ² ~ N(Mean, σ² Covariance) and
// σ² ~ InvGamma(A, B).
type LinearPosterior struct {
	Mean       []float64
	Precision  *mat.SymDense // Λ_n
	Covariance *mat.SymDense // Λ_n⁻¹
	A, B       float64
	N          int // observations so far
}

// Posterior returns a copy of arm's posterior. It is meant for tests and
// inspection, not for the decision path: it costs O(d³). It panics if
// arm is out of range.
func (l *Linear) Posterior(arm int) LinearPosterior {
	if arm < 0 || arm >= len(l.arms) {
		panic(fmt.Sprintf("policy: Posterior(%d) of %d arms", arm, len(l.arms)))
	}
	p := &l.arms[arm]
	u := mat.NewTriDense(l.d, mat.Upper, nil)
	for i := range l.d {
		for j := i; j < l.d; j++ {
			u.SetTri(i, j, p.u[i*l.d+j])
		}
	}
	var chol mat.Cholesky
	chol.SetFromU(u)
	prec, cov := mat.NewSymDense(l.d, nil), mat.NewSymDense(l.d, nil)
	chol.ToSym(prec)
	if err := chol.InverseTo(cov); err != nil {
		// Only a numerically singular precision gets here; Λ ⪰ λI
		// rules that out for any sane λ. Report what we have.
		cov = nil
	}
	return LinearPosterior{
		Mean:       append([]float64(nil), p.mu...),
		Precision:  prec,
		Covariance: cov,
		A:          p.a,
		B:          p.b,
		N:          p.n,
	}
}

// gammaRand draws from Gamma(shape alpha, scale 1) by Marsaglia and Tsang
// (2000), "A simple method for generating gamma variables", ACM TOMS
// 26(3):363-372. For alpha ≥ 1, with d = alpha − 1/3 and c = 1/√(9d):
//
//	repeat: x ~ N(0, 1), v = (1 + c x)³, u ~ U(0, 1)
//	until v > 0 and (u < 1 − 0.0331 x⁴ or log u < x²/2 + d (1 − v + log v))
//	return d v
//
// and for alpha < 1 the paper's boost: Gamma(alpha) = Gamma(alpha + 1) ·
// u^(1/alpha).
func gammaRand(rng *rand.Rand, alpha float64) float64 {
	boost := 1.0
	if alpha < 1 {
		boost = math.Pow(1-rng.Float64(), 1/alpha) // u in (0, 1]
		alpha++
	}
	d := alpha - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		x2 := x * x
		if u < 1-0.0331*x2*x2 || math.Log(u) < 0.5*x2+d*(1-v+math.Log(v)) {
			return d * v * boost
		}
	}
}
