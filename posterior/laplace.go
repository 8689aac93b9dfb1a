package posterior

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/refinery-bandits/refinery/nn"
)

// Laplace's method (Khan 2018, Section 1; MacKay 1992; Bishop 2006,
// Section 4.4) approximates the posterior by a Gaussian at a maximum w0
// of the unnormalized posterior p(D | w) p(w), with the Hessian of its
// negative logarithm as precision:
//
//	q(w) = N(w | w0, H(w0)^{-1}),   H = -∇² log p(D | w) + diag(1/s_j^2).
//
// Two structures are offered. LaplaceDiag keeps the diagonal of the
// generalized Gauss-Newton approximation of the likelihood's Hessian for
// the whole network (nn.Likelihood.GGNDiag). FitLastLayer keeps the
// hidden layers at w0 and is exact for the output layer: with the
// Gaussian likelihood the network's output is linear in the last layer's
// parameters, so given the features the last layer's posterior is the
// closed-form Bayesian linear regression, one independent block per arm.

// LaplaceDiag writes into dst (allocated when nil) the variances of the
// diagonal Laplace approximation at the MAP w with likelihood
// hyperparameters hyper,
//
//	Var_j = 1 / (GGN_jj + 1/priorVar_j),
//
// and returns dst: N(w, diag(Var)) is the posterior q of the whole
// network, in the standardized units the parameters live in.
func LaplaceDiag(dst []float64, lik *nn.Likelihood, w, hyper, priorVar []float64) []float64 {
	if len(priorVar) != len(w) {
		panic("posterior: LaplaceDiag with len(priorVar) != len(w)")
	}
	dst = lik.GGNDiag(dst, w, hyper)
	for j, g := range dst {
		dst[j] = 1 / (g + 1/priorVar[j])
	}
	return dst
}

// LastLayerConfig configures FitLastLayer.
type LastLayerConfig struct {
	// PriorPrecision is the precision alpha of the prior N(0, I/alpha) on
	// the output layer's weights and biases (standardized units). Zero
	// means: choose it by maximizing the marginal likelihood (MacKay's
	// fixed point, see FitLastLayer), as the flow paper's base does (seed
	// 003, Section 6, following Daxberger et al. 2021).
	PriorPrecision float64
	// MaxIterations bounds the fixed-point iterations; zero means 200.
	MaxIterations int
}

// LastLayer is the last-layer Laplace posterior of a network whose
// hidden layers are fixed at a MAP w0: for each arm a, the parameters
// theta_a = (W_L[a, :], b_L[a]) of its output unit, on the features
// phi~(x) = (a_{L-1}(x; w0), 1), have the posterior
//
//	theta_a ~ N(m_a, Sigma_a),   Sigma_a^{-1} = Lambda_a = Phi_a^T Phi_a / s2 + alpha I,
//	m_a = Lambda_a^{-1} Phi_a^T t_a / s2,
//
// with Phi_a the features of the rows that played a, t_a their rewards
// standardized, t = (y - Shift)/Scale, and s2 the noise variance in
// those units, s2 = exp(hyper[0]) / Scale^2. This is exact (the Hessian of
// the Gaussian likelihood in the last layer is Phi^T Phi / s2 at every
// point), so m_a is the mode of the last layer given the features: the
// MAP's own last layer when the MAP was found with the same alpha.
type LastLayer struct {
	// Arms is the number of arms, Dim = H + 1 the length of phi~.
	Arms, Dim int
	// Base is N(m, Sigma): Mean holds the theta_a one after the other,
	// Root the blocks Sigma_a^{1/2} (Sigma_a = R_a R_a^T).
	Base *Gaussian
	// Alpha is the prior precision, NoiseVar s2 (standardized units).
	Alpha, NoiseVar float64
	// LogEvidence is log p(t | alpha, s2), the marginal likelihood.
	LogEvidence float64
	// Iterations of the fixed point (0 when PriorPrecision was given).
	Iterations int

	// The rewards' sufficient statistics, per arm: Gram Phi_a^T Phi_a
	// (Dim×Dim), XtY Phi_a^T t_a, YtY t_a^T t_a and the count; the flow's
	// target (LastLayerTarget) needs nothing else.
	Gram, XtY []float64
	YtY       []float64
	N         []int
}

// FitLastLayer computes the last-layer Laplace posterior of the network
// of lik at the MAP w (hyper: the likelihood's; the noise must be
// learned or fixed as lik says). The features of every row come from
// p.Features (p must be a Predictor of lik's Arch).
//
// With cfg.PriorPrecision zero, alpha maximizes the log marginal
// likelihood summed over the arms,
//
//	log p(t | alpha) = sum_a [ D/2 log alpha - 1/2 log |Lambda_a| - E_a(m_a) - n_a/2 log(2 pi s2) ],
//	E_a(m) = |t_a - Phi_a m|^2 / (2 s2) + alpha |m|^2 / 2,
//
// by MacKay's fixed point (MacKay 1992; Bishop 2006, Eq. 3.92 and 3.98):
// with lambda_aj the eigenvalues of Phi_a^T Phi_a / s2,
//
//	gamma = sum_a sum_j lambda_aj / (lambda_aj + alpha),   alpha <- gamma / sum_a |m_a|^2,
//
// until alpha changes by less than 1e-12 relatively. Each arm's Gram
// matrix is diagonalized once; every iteration then costs O(arms D^2).
func FitLastLayer(p *nn.Predictor, lik *nn.Likelihood, w, hyper []float64, cfg LastLayerConfig) (*LastLayer, error) {
	if cfg.PriorPrecision < 0 || math.IsNaN(cfg.PriorPrecision) || math.IsInf(cfg.PriorPrecision, 0) {
		return nil, fmt.Errorf("posterior: last-layer prior precision %g, want a finite number >= 0", cfg.PriorPrecision)
	}
	if cfg.MaxIterations == 0 {
		cfg.MaxIterations = 200
	}
	a := lik.Arch()
	view := lik.Data()
	x, arms, y := view.Rows()
	feat := p.Features(nil, w, x)
	h := a.Layer(a.NumLayers() - 1).In
	D, K := h+1, a.Out()
	std := lik.Options().Standardization
	scale := std.Scale
	if scale == 0 {
		scale = 1
	}
	ll := &LastLayer{
		Arms: K, Dim: D,
		NoiseVar: lik.NoiseVar(hyper) / (scale * scale),
		Gram:     make([]float64, K*D*D), XtY: make([]float64, K*D),
		YtY: make([]float64, K), N: make([]int, K),
	}
	phi := make([]float64, D)
	for i, arm := range arms {
		copy(phi, feat[i*h:(i+1)*h])
		phi[h] = 1
		t := (y[i] - std.Shift) / scale
		g := ll.Gram[arm*D*D : (arm+1)*D*D]
		for r, u := range phi {
			if u == 0 {
				continue
			}
			row := g[r*D : (r+1)*D]
			for c, v := range phi {
				row[c] += u * v
			}
		}
		for r, u := range phi {
			ll.XtY[arm*D+r] += u * t
		}
		ll.YtY[arm] += t * t
		ll.N[arm]++
	}
	s2 := ll.NoiseVar
	// Eigen-decomposition of each arm's Phi^T Phi / s2.
	vals := make([][]float64, K)
	vecs := make([]*mat.Dense, K)
	proj := make([][]float64, K) // V^T Phi^T t / s2
	for k := range K {
		g := mat.NewSymDense(D, nil)
		for r := range D {
			for c := r; c < D; c++ {
				g.SetSym(r, c, ll.Gram[k*D*D+r*D+c]/s2)
			}
		}
		var eig mat.EigenSym
		if !eig.Factorize(g, true) {
			return nil, fmt.Errorf("posterior: last-layer Gram matrix of arm %d: eigendecomposition failed", k)
		}
		vals[k] = eig.Values(nil)
		for j, v := range vals[k] {
			vals[k][j] = max(v, 0) // rounding of a positive semi-definite matrix
		}
		vecs[k] = new(mat.Dense)
		eig.VectorsTo(vecs[k])
		b := mat.NewVecDense(D, nil)
		b.MulVec(vecs[k].T(), mat.NewVecDense(D, ll.XtY[k*D:(k+1)*D]))
		b.ScaleVec(1/s2, b)
		proj[k] = b.RawVector().Data
		// Directions the arm's features never span have eigenvalue 0;
		// rounding leaves them ~1e-16 of the largest and a projection
		// of the same order, whose share of |m|^2 grows as 1/alpha^2
		// and can drive the fixed point below to alpha = 0. They carry
		// no data: zero them.
		top := 0.0
		for _, v := range vals[k] {
			top = max(top, v)
		}
		for j, v := range vals[k] {
			if v <= 1e-12*top {
				vals[k][j], proj[k][j] = 0, 0
			}
		}
	}
	// |m|^2 and gamma at alpha, in the eigenbasis: m = V diag(1/(lambda+alpha)) V^T Phi^T t / s2.
	stats := func(alpha float64) (msq, gamma float64) {
		for k := range K {
			for j, l := range vals[k] {
				c := proj[k][j] / (l + alpha)
				msq += c * c
				gamma += l / (l + alpha)
			}
		}
		return msq, gamma
	}
	alpha := cfg.PriorPrecision
	if alpha == 0 {
		alpha = 1
		for ll.Iterations = 1; ll.Iterations <= cfg.MaxIterations; ll.Iterations++ {
			msq, gamma := stats(alpha)
			if !(msq > 0) || !(gamma > 0) {
				break // no data, or rewards all at their mean: keep alpha
			}
			next := gamma / msq
			done := math.Abs(next-alpha) <= 1e-12*alpha
			if next < minLastLayerAlpha {
				// The evidence keeps rising as the prior widens: the
				// features fit the rewards with no shrinkage needed.
				// Stop at a prior of standard deviation 1e4.
				next, done = minLastLayerAlpha, true
			}
			alpha = next
			if done {
				break
			}
		}
		if !(alpha > 0) || math.IsInf(alpha, 0) {
			return nil, fmt.Errorf("posterior: last-layer prior precision diverged to %g after %d iterations", alpha, ll.Iterations)
		}
	}
	ll.Alpha = alpha
	ll.Base = &Gaussian{Mean: make([]float64, K*D), Root: make([]float64, K*D*D), Block: D}
	for k := range K {
		m := ll.Base.Mean[k*D : (k+1)*D]
		root := ll.Base.Root[k*D*D : (k+1)*D*D]
		for j, l := range vals[k] {
			c := proj[k][j] / (l + alpha)
			sd := 1 / math.Sqrt(l+alpha)
			for r := range D {
				v := vecs[k].At(r, j)
				m[r] += v * c
				root[r*D+j] = v * sd
			}
		}
	}
	ll.Base.init()
	ll.LogEvidence = ll.logEvidence(alpha, vals)
	return ll, nil
}

// minLastLayerAlpha is the least prior precision FitLastLayer's evidence
// maximization returns (a prior standard deviation of 1e4 in
// standardized reward units per weight).
const minLastLayerAlpha = 1e-8

// logEvidence returns log p(t | alpha, s2) for the means in ll.Base.
func (ll *LastLayer) logEvidence(alpha float64, vals [][]float64) float64 {
	D, s2 := ll.Dim, ll.NoiseVar
	var lz float64
	for k := range ll.Arms {
		m := ll.Base.Mean[k*D : (k+1)*D]
		rss := ll.rss(k, m)
		var logdet, msq float64
		for _, l := range vals[k] {
			logdet += math.Log(l + alpha)
		}
		for _, v := range m {
			msq += v * v
		}
		lz += 0.5*float64(D)*math.Log(alpha) - 0.5*logdet - rss/(2*s2) - alpha*msq/2 - 0.5*float64(ll.N[k])*math.Log(2*math.Pi*s2)
	}
	return lz
}

// rss returns |t_k - Phi_k theta|^2 = theta^T G theta - 2 theta^T c + t^T t
// for arm k from the sufficient statistics (clamped at zero).
func (ll *LastLayer) rss(k int, theta []float64) float64 {
	D := ll.Dim
	g := ll.Gram[k*D*D : (k+1)*D*D]
	c := ll.XtY[k*D : (k+1)*D]
	q := ll.YtY[k]
	for r, u := range theta {
		var gr float64
		for s, v := range theta {
			gr += g[r*D+s] * v
		}
		q += u*gr - 2*u*c[r]
	}
	return max(q, 0)
}

// Scores writes the rewards every arm predicts under the last-layer
// parameters theta (Arms×Dim, as Base.Mean) for the features phi (length
// Dim-1) into dst: dst[a] = Shift + Scale*(theta_a · (phi, 1)).
func (ll *LastLayer) Scores(dst, theta, phi []float64, std nn.Standardization) {
	D := ll.Dim
	scale := std.Scale
	if scale == 0 {
		scale = 1
	}
	for k := range ll.Arms {
		th := theta[k*D : (k+1)*D]
		f := th[D-1]
		for j, v := range phi {
			f += th[j] * v
		}
		dst[k] = std.Shift + scale*f
	}
}

// Gaussian is N(Mean, R R^T) with R block diagonal: len(Mean)/Block
// blocks R_b of Block×Block, row-major, one after the other in Root.
type Gaussian struct {
	Mean  []float64
	Root  []float64
	Block int

	logDet float64 // log |det R|
}

// init checks the sizes and computes log |det R|.
func (g *Gaussian) init() {
	b := g.Block
	if b < 1 || len(g.Mean)%b != 0 || len(g.Root) != len(g.Mean)*b {
		panic("posterior: Gaussian with inconsistent sizes")
	}
	g.logDet = 0
	for k := 0; k < len(g.Mean)/b; k++ {
		ld, _ := mat.LogDet(mat.NewDense(b, b, g.Root[k*b*b:(k+1)*b*b]))
		g.logDet += ld
	}
}

// NewGaussian returns N(mean, root root^T) with root block diagonal in
// blocks of size block (see Gaussian); the slices are kept.
func NewGaussian(mean, root []float64, block int) *Gaussian {
	g := &Gaussian{Mean: mean, Root: root, Block: block}
	g.init()
	return g
}

// Dim returns the dimension.
func (g *Gaussian) Dim() int { return len(g.Mean) }

// Entropy returns H[N(m, R R^T)] = D/2 log(2 pi e) + log |det R|.
func (g *Gaussian) Entropy() float64 {
	return 0.5*float64(len(g.Mean))*math.Log(2*math.Pi*math.E) + g.logDet
}

// Transform writes m + R eps into dst.
func (g *Gaussian) Transform(dst, eps []float64) {
	b := g.Block
	for k := 0; k < len(g.Mean)/b; k++ {
		r := g.Root[k*b*b : (k+1)*b*b]
		e := eps[k*b : (k+1)*b]
		for i := range b {
			v := g.Mean[k*b+i]
			for j, x := range e {
				v += r[i*b+j] * x
			}
			dst[k*b+i] = v
		}
	}
}

// Sample writes one draw into dst (allocated when nil), using eps
// (length Dim, allocated when nil) for the standard normals, and
// returns dst.
func (g *Gaussian) Sample(dst, eps []float64, rng *rand.Rand) []float64 {
	if dst == nil {
		dst = make([]float64, len(g.Mean))
	}
	if eps == nil {
		eps = make([]float64, len(g.Mean))
	}
	for i := range eps {
		eps[i] = rng.NormFloat64()
	}
	g.Transform(dst, eps)
	return dst
}

// Binary encoding of a LastLayer: magic, sizes, then the float64
// vectors little-endian.
var lastLayerMagic = [8]byte{'R', 'F', 'Y', 'L', 'L', 0, 0, 1}

// MarshalBinary encodes ll for a snapshot.
func (ll *LastLayer) MarshalBinary() ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(lastLayerMagic[:])
	n := make([]float64, len(ll.N))
	for i, v := range ll.N {
		n[i] = float64(v)
	}
	for _, v := range []uint64{uint64(ll.Arms), uint64(ll.Dim), uint64(ll.Iterations)} {
		_ = binary.Write(&buf, binary.LittleEndian, v)
	}
	for _, v := range [][]float64{{ll.Alpha, ll.NoiseVar, ll.LogEvidence}, ll.Base.Mean, ll.Base.Root, ll.Gram, ll.XtY, ll.YtY, n} {
		_ = binary.Write(&buf, binary.LittleEndian, v)
	}
	return buf.Bytes(), nil
}

// maxLastLayerDim bounds the sizes a snapshot may declare.
const maxLastLayerDim = 1 << 16

// UnmarshalBinary decodes what MarshalBinary wrote into ll.
func (ll *LastLayer) UnmarshalBinary(data []byte) error {
	r := bytes.NewReader(data)
	var magic [8]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil || magic != lastLayerMagic {
		return fmt.Errorf("%w: not a last-layer posterior", ErrBadSnapshot)
	}
	var sz [3]uint64
	if err := binary.Read(r, binary.LittleEndian, &sz); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	K, D := int(sz[0]), int(sz[1])
	if sz[0] < 1 || sz[0] > maxLastLayerDim || sz[1] < 1 || sz[1] > maxLastLayerDim || uint64(K)*uint64(D)*uint64(D) > 1<<26 {
		return fmt.Errorf("%w: last layer of %d arms x %d", ErrBadSnapshot, sz[0], sz[1])
	}
	if want := 8 + 24 + 8*(3+K*D+K*D*D+K*D*D+K*D+2*K); len(data) != want {
		return fmt.Errorf("%w: last-layer encoding of %d bytes, want %d", ErrBadSnapshot, len(data), want)
	}
	read := func(n int) []float64 {
		v := make([]float64, n)
		_ = binary.Read(r, binary.LittleEndian, v)
		return v
	}
	head := read(3)
	out := LastLayer{Arms: K, Dim: D, Iterations: int(sz[2]), Alpha: head[0], NoiseVar: head[1], LogEvidence: head[2]}
	mean, root := read(K*D), read(K*D*D)
	out.Gram, out.XtY, out.YtY = read(K*D*D), read(K*D), read(K)
	for _, v := range read(K) {
		out.N = append(out.N, int(v))
	}
	for _, v := range [][]float64{head, mean, root, out.Gram, out.XtY, out.YtY} {
		for _, x := range v {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return fmt.Errorf("%w: non-finite last-layer parameter", ErrBadSnapshot)
			}
		}
	}
	if !(out.Alpha > 0) || !(out.NoiseVar > 0) {
		return fmt.Errorf("%w: last-layer alpha %g, noise variance %g", ErrBadSnapshot, out.Alpha, out.NoiseVar)
	}
	out.Base = NewGaussian(mean, root, D)
	*ll = out
	return nil
}

// Target returns the flow's target for the last layer (Kristiadi et al. 2022, Eq. 4:
// log p(D | theta) + log p(theta)) with the noise variance integrated
// out under the conjugate prior s2 ~ InvGamma(a0, b0) (standardized
// units), from the sufficient statistics alone:
//
//	log p~(theta) = log Gamma(a0 + n/2) - log Gamma(a0) + a0 log b0 - n/2 log(2 pi)
//	              - (a0 + n/2) log(b0 + RSS(theta)/2) + D/2 log(alpha/(2 pi)) - alpha/2 |theta|^2,
//	RSS(theta) = sum_a |t_a - Phi_a theta_a|^2,
//
// n the number of rows and D = Arms*Dim. With a known noise variance the
// last layer's posterior is Gaussian and Laplace is exact (FitLastLayer);
// with the noise unknown it is a multivariate Student t, heavier-tailed
// than the Laplace base at the network's noise estimate, which is what
// the flow refines. Each evaluation costs O(Arms Dim^2).
func (ll *LastLayer) Target(a0, b0 float64) LogDensity {
	if !(a0 > 0) || !(b0 > 0) {
		panic("posterior: last-layer target needs a0, b0 > 0")
	}
	n := 0
	for _, v := range ll.N {
		n += v
	}
	a := a0 + float64(n)/2
	la, _ := math.Lgamma(a)
	l0, _ := math.Lgamma(a0)
	D := float64(ll.Arms * ll.Dim)
	c := la - l0 + a0*math.Log(b0) - float64(n)/2*math.Log(2*math.Pi) + D/2*math.Log(ll.Alpha/(2*math.Pi))
	return &lastLayerTarget{ll: ll, a: a, b0: b0, c: c}
}

type lastLayerTarget struct {
	ll      *LastLayer
	a, b0   float64 // a0 + n/2, b0
	c       float64 // normalizing constants
	scratch []float64
}

func (t *lastLayerTarget) Dim() int { return t.ll.Arms * t.ll.Dim }

func (t *lastLayerTarget) LogDensity(grad, theta []float64) float64 {
	ll := t.ll
	D := ll.Dim
	var rss, sq float64
	// grad first holds G_a theta_a - c_a per arm.
	for k := range ll.Arms {
		th := theta[k*D : (k+1)*D]
		g := ll.Gram[k*D*D : (k+1)*D*D]
		c := ll.XtY[k*D : (k+1)*D]
		q := ll.YtY[k]
		for r, u := range th {
			var gr float64
			for s, v := range th {
				gr += g[r*D+s] * v
			}
			grad[k*D+r] = gr - c[r]
			q += u*gr - 2*u*c[r]
			sq += u * u
		}
		rss += max(q, 0)
	}
	b := t.b0 + rss/2
	f := -t.a / b
	for i, v := range theta {
		grad[i] = f*grad[i] - ll.Alpha*v
	}
	return t.c - t.a*math.Log(b) - ll.Alpha*sq/2
}
