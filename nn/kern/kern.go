// Package kern holds the float32 kernels of nn's fast engine: the matrix
// product (dense, and GatherAxpy/ScatterAxpy for sparse rows), the
// elementwise passes of the local reparameterization trick, the fused
// per-parameter update of a mean-field Gaussian (softplus, KL gradient and
// Adam in one sweep), and RNG, a source of standard normal noise.
//
// Every kernel has a portable Go implementation, which defines its
// semantics and is the path taken on CPUs without the needed features.
// Architecture-specific implementations are selected at start-up from the
// CPU's features (golang.org/x/sys/cpu) and may be forced, for tests and
// benchmarks, with Use or with the environment variable REFINERY_KERN
// (portable, avx2 or avx512; a name this CPU cannot run leaves the best
// level in use and is reported by EnvError, so that commands can refuse
// it instead of silently measuring another level).
//
// Conventions: matrices are row-major float32 slices with explicit row
// strides; kernels write into their destination arguments, never allocate,
// and panic with a "kern: ..." message when slices are too short. Slices
// passed to one call must not overlap unless the kernel says so.
//
// Rounding: the portable kernels convert every product that is then added
// to float32 explicitly. The Go specification lets the compiler fuse
// x*y + z into one multiply-add (it does with GOAMD64=v3) and a
// conversion forbids it, so every product is rounded on every build, and
// the SIMD kernels, which round the same operations in the same order,
// give the same float32 results (kern_amd64.go lists the exceptions:
// Sgemm, Sdot and the softplus).
package kern

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// Level names a kernel implementation.
type Level int

const (
	// Portable is plain Go, on every architecture.
	Portable Level = iota
	// AVX2 needs AVX2 and FMA (x86-64-v3).
	AVX2
	// AVX512 needs AVX-512 F, DQ, BW and VL.
	AVX512
)

// String returns the level's name as REFINERY_KERN spells it.
func (l Level) String() string {
	switch l {
	case Portable:
		return "portable"
	case AVX2:
		return "avx2"
	case AVX512:
		return "avx512"
	}
	return fmt.Sprintf("Level(%d)", int(l))
}

// impl is the table of kernel implementations in use.
type impl struct {
	level   Level
	sgemm   func(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int)
	saxpy   func(alpha float32, x, y []float32)
	mul     func(dst, x, y []float32, alpha float32)
	addMul  func(dst, a, b, c []float32)
	transp  func(dst, src []float32, r, c int)
	sdot    func(x, y []float32) float32
	relu    func(z []float32)
	square  func(dst, src []float32)
	lrtFwd  func(z, v, eps []float32)
	lrtBack func(d, g, sd []float32)
	reluBk  func(gp, a, t []float32)
	reluMsk func(g, a []float32)
	soft    func(sigma, sigmoid, rho []float32)
	mfAdam  func(s *MeanFieldStep, n int)
	ptAdam  func(s *PointStep, n int)
	gather  func(y, w []float32, ldw int, idx []int32, alpha []float32)
	gathRow func(y []float32, ldy, n int, w []float32, ldw int, off, idx []int32, alpha []float32)
	scatter func(w []float32, ldw int, idx []int32, alpha, x []float32)
	rngFill func(blocks int, dst []float32, st *[4][rngLanes]uint64)
	normXf  func(blocks int, dst []float32)
}

var portable = impl{
	level:   Portable,
	sgemm:   sgemmGo,
	saxpy:   saxpyGo,
	mul:     mulGo,
	addMul:  addMulGo,
	transp:  transposeGo,
	sdot:    sdotGo,
	relu:    reluGo,
	square:  squareGo,
	lrtFwd:  lrtForwardGo,
	lrtBack: lrtBackwardGo,
	reluBk:  reluBackwardGo,
	reluMsk: reluMaskGo,
	soft:    softplusGo,
	mfAdam:  meanFieldAdamGo,
	ptAdam:  pointAdamGo,
	gather:  gatherAxpyGo,
	gathRow: gatherAxpyRowsGo,
	scatter: scatterAxpyGo,
	rngFill: rngFillGo,
	normXf:  normalTransformGo,
}

// cur is the implementation in use; levels lists those this CPU (and this
// build) supports: archLevels (kern_amd64.go, kern_other.go) adds the
// architecture's levels to Portable. cur is set by init before any caller
// can run, and changed only by Use.
var (
	cur    = portable
	levels = archLevels(map[Level]impl{Portable: portable})
	envErr error
)

func init() {
	best := Portable
	for l := range levels {
		best = max(best, l)
	}
	if env := strings.TrimSpace(os.Getenv("REFINERY_KERN")); env != "" {
		found := false
		for l := range levels {
			if l.String() == env {
				best, found = l, true
			}
		}
		if !found {
			envErr = fmt.Errorf("REFINERY_KERN=%q: not a kernel level this CPU and build can run (want one of %s)", env, strings.Join(availableNames(), ", "))
		}
	}
	cur = levels[best]
}

// EnvError reports a REFINERY_KERN value that names no level this CPU and
// build can run; the best level is in use instead. It is nil when the
// variable is unset or was honoured.
func EnvError() error { return envErr }

// availableNames lists the levels this CPU and build can run, lowest
// first.
func availableNames() []string {
	var names []string
	for l := Portable; l <= AVX512; l++ {
		if Available(l) {
			names = append(names, l.String())
		}
	}
	return names
}

// Current returns the level in use.
func Current() Level { return cur.level }

// Available reports whether this CPU (and this build) can run level l.
func Available(l Level) bool {
	_, ok := levels[l]
	return ok
}

// Use switches every kernel to level l and returns the previous level. It
// is meant for tests and benchmarks that compare levels, and must not be
// called while kernels run on other goroutines. It panics if l is not
// Available.
func Use(l Level) Level {
	im, ok := levels[l]
	if !ok {
		panic("kern: level " + l.String() + " is not available on this CPU")
	}
	prev := cur.level
	cur = im
	return prev
}

// Sgemm computes C += A·B for C m×n (row stride ldc), B k×n (row stride
// ldb) and A m×k whose element (i, p) is a[i*rsA + p*csA]:
//
//	C[i*ldc + j] += sum_p a[i*rsA + p*csA] * b[p*ldb + j]
//
// A row-major A has rsA = lda, csA = 1; a transposed operand (A = Xᵀ for a
// row-major X k×m with stride ldx) has rsA = 1, csA = ldx. The sum over p
// is accumulated in float32 in an order the implementation chooses.
func Sgemm(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 || k == 0 {
		return
	}
	if m < 0 || n < 0 || k < 0 {
		panic("kern: negative dimension")
	}
	if len(a) <= (m-1)*rsA+(k-1)*csA || rsA < 0 || csA < 0 {
		panic("kern: A too short")
	}
	if len(b) < (k-1)*ldb+n || ldb < n {
		panic("kern: B too short")
	}
	if len(c) < (m-1)*ldc+n || ldc < n {
		panic("kern: C too short")
	}
	cur.sgemm(m, n, k, a, rsA, csA, b, ldb, c, ldc)
}

func sgemmGo(m, n, k int, a []float32, rsA, csA int, b []float32, ldb int, c []float32, ldc int) {
	for i := range m {
		ci := c[i*ldc : i*ldc+n]
		for p := range k {
			av := a[i*rsA+p*csA]
			if av == 0 {
				continue
			}
			saxpyGo(av, b[p*ldb:p*ldb+n], ci)
		}
	}
}

// Saxpy sets y += alpha*x elementwise; len(y) must be at least len(x).
func Saxpy(alpha float32, x, y []float32) {
	if len(y) < len(x) {
		panic("kern: Saxpy y shorter than x")
	}
	cur.saxpy(alpha, x, y[:len(x)])
}

func saxpyGo(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += float32(alpha * v) // rounded product: see the package doc
	}
}

// Mul sets dst = (alpha x)∘y elementwise, rounding alpha*x_i before the
// second product: with alpha = 2 it is 2 x_i y_i exactly rounded once
// (the chain rule d/dsigma = 2 sigma d/d(sigma^2)), with alpha = 1 the
// Hadamard product. All three slices must have the same length; dst may
// be x or y.
func Mul(dst, x, y []float32, alpha float32) {
	if len(x) != len(dst) || len(y) != len(dst) {
		panic("kern: Mul length mismatch")
	}
	cur.mul(dst, x, y, alpha)
}

func mulGo(dst, x, y []float32, alpha float32) {
	x, y = x[:len(dst)], y[:len(dst)]
	for i, v := range x {
		dst[i] = float32(alpha*v) * y[i]
	}
}

// AddMul sets dst = a + b∘c elementwise, rounding each product before
// the sum (rounded product: see the package doc), e.g. the weights
// mu + sigma∘eps of the weight reparameterization. All four slices must
// have the same length; dst may be any of a, b and c.
func AddMul(dst, a, b, c []float32) {
	if len(a) != len(dst) || len(b) != len(dst) || len(c) != len(dst) {
		panic("kern: AddMul length mismatch")
	}
	cur.addMul(dst, a, b, c)
}

func addMulGo(dst, a, b, c []float32) {
	a, b, c = a[:len(dst)], b[:len(dst)], c[:len(dst)]
	for i, v := range a {
		dst[i] = v + float32(b[i]*c[i])
	}
}

// Transpose sets dst (c×r, row-major) to the transpose of src (r×c,
// row-major): dst[j*r + i] = src[i*c + j]. Both slices must hold at least
// r*c elements and must not overlap.
func Transpose(dst, src []float32, r, c int) {
	if r < 0 || c < 0 {
		panic("kern: Transpose negative dimension")
	}
	if len(src) < r*c || len(dst) < r*c {
		panic("kern: Transpose slice shorter than r*c")
	}
	cur.transp(dst[:r*c], src[:r*c], r, c)
}

func transposeGo(dst, src []float32, r, c int) {
	for i := range r {
		for j, v := range src[i*c : (i+1)*c] {
			dst[j*r+i] = v
		}
	}
}

// GatherAxpy adds to y a combination of rows of the row-major matrix w
// (row stride ldw): for k = 0, 1, ... in order,
//
//	y += alpha[k] * w[idx[k]*ldw : idx[k]*ldw + len(y)],
//
// with the same roundings as that sequence of Saxpy calls. It is the
// product of a sparse row (idx, alpha) with w, e.g. a one-hot input with
// the first layer's weights. len(alpha) must be at least len(idx), and
// every row idx[k] must lie in w.
func GatherAxpy(y, w []float32, ldw int, idx []int32, alpha []float32) {
	checkRows("GatherAxpy", len(y), w, ldw, idx, alpha)
	cur.gather(y, w, ldw, idx, alpha[:len(idx)])
}

// GatherAxpyRows runs GatherAxpy on the len(off)-1 rows of y (n
// columns, row stride ldy), row i with the entries off[i] <= k < off[i+1]
// of idx and alpha (compressed sparse rows):
//
//	y[i*ldy : i*ldy+n] += alpha[k] * w[idx[k]*ldw : idx[k]*ldw+n],
//
// with the same roundings. It checks its arguments once for all rows,
// where a loop of GatherAxpy calls checks and dispatches once a row: with
// a dozen entries a row (nn's sparse weight gradients) that was most of
// the time. off must be non-decreasing from off[0] >= 0 to at most
// len(idx) and len(alpha).
func GatherAxpyRows(y []float32, ldy, n int, w []float32, ldw int, off, idx []int32, alpha []float32) {
	if len(off) == 0 {
		panic("kern: GatherAxpyRows empty off")
	}
	rows := len(off) - 1
	if n < 0 || (rows > 0 && n > 0 && (ldy < n || len(y) < (rows-1)*ldy+n)) {
		panic("kern: GatherAxpyRows y too short")
	}
	for i := range rows {
		if off[i] > off[i+1] {
			panic("kern: GatherAxpyRows off decreasing")
		}
	}
	lo, hi := int(off[0]), int(off[rows])
	if lo < 0 || hi > len(idx) || hi > len(alpha) {
		panic("kern: GatherAxpyRows off outside idx or alpha")
	}
	checkRows("GatherAxpyRows", n, w, ldw, idx[lo:hi], alpha[lo:hi])
	if rows == 0 || n == 0 {
		return
	}
	cur.gathRow(y, ldy, n, w, ldw, off, idx, alpha)
}

func gatherAxpyRowsGo(y []float32, ldy, n int, w []float32, ldw int, off, idx []int32, alpha []float32) {
	for i := range len(off) - 1 {
		gatherAxpyGo(y[i*ldy:i*ldy+n], w, ldw, idx[off[i]:off[i+1]], alpha[off[i]:off[i+1]])
	}
}

// ScatterAxpy is the transposed product of GatherAxpy: for k = 0, 1, ...
// in order,
//
//	w[idx[k]*ldw : idx[k]*ldw + len(x)] += alpha[k] * x,
//
// with the same roundings as that sequence of Saxpy calls (repeated rows
// accumulate). len(alpha) must be at least len(idx), and every row idx[k]
// must lie in w; x must not overlap w.
func ScatterAxpy(w []float32, ldw int, idx []int32, alpha, x []float32) {
	checkRows("ScatterAxpy", len(x), w, ldw, idx, alpha)
	cur.scatter(w, ldw, idx, alpha[:len(idx)], x)
}

// checkRows panics unless rows idx of w (stride ldw, n columns) exist and
// alpha covers idx.
func checkRows(name string, n int, w []float32, ldw int, idx []int32, alpha []float32) {
	if len(alpha) < len(idx) {
		panic("kern: " + name + " alpha shorter than idx")
	}
	if n == 0 {
		return
	}
	if ldw < n {
		panic("kern: " + name + " row stride shorter than a row")
	}
	for _, r := range idx {
		if r < 0 || int(r)*ldw+n > len(w) {
			panic(fmt.Sprintf("kern: %s row %d outside w", name, r))
		}
	}
}

func gatherAxpyGo(y, w []float32, ldw int, idx []int32, alpha []float32) {
	for k, r := range idx {
		saxpyGo(alpha[k], w[int(r)*ldw:int(r)*ldw+len(y)], y)
	}
}

func scatterAxpyGo(w []float32, ldw int, idx []int32, alpha, x []float32) {
	for k, r := range idx {
		saxpyGo(alpha[k], x, w[int(r)*ldw:int(r)*ldw+len(x)])
	}
}

// Sdot returns sum_i x[i]*y[i] over len(x); len(y) must be at least len(x).
func Sdot(x, y []float32) float32 {
	if len(y) < len(x) {
		panic("kern: Sdot y shorter than x")
	}
	return cur.sdot(x, y[:len(x)])
}

func sdotGo(x, y []float32) float32 {
	y = y[:len(x)]
	var s float32
	for i, v := range x {
		s += v * y[i]
	}
	return s
}

// Relu sets z = max(z, 0) elementwise.
func Relu(z []float32) { cur.relu(z) }

func reluGo(z []float32) {
	for i, v := range z {
		z[i] = max(v, 0)
	}
}

// Square sets dst = src∘src; len(dst) must be at least len(src). dst may
// be src.
func Square(dst, src []float32) {
	if len(dst) < len(src) {
		panic("kern: Square dst shorter than src")
	}
	cur.square(dst[:len(src)], src)
}

func squareGo(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = v * v
	}
}

// LRTForward is the sampling step of the local reparameterization trick
// (Kingma, Salimans & Welling 2015, Sec. 2.3) given the means z and the
// variances v of a layer's pre-activations and standard normal noise eps:
//
//	v_i <- sqrt(v_i),   z_i <- z_i + v_i * eps_i.
//
// All three slices must have the same length.
func LRTForward(z, v, eps []float32) {
	if len(v) != len(z) || len(eps) != len(z) {
		panic("kern: LRTForward length mismatch")
	}
	cur.lrtFwd(z, v, eps)
}

func lrtForwardGo(z, v, eps []float32) {
	v, eps = v[:len(z)], eps[:len(z)]
	for i, vi := range v {
		s := float32(math.Sqrt(float64(vi)))
		v[i] = s
		z[i] += float32(s * eps[i]) // rounded product: see the package doc
	}
}

// LRTBackward turns the noise d = eps of LRTForward into the gradient with
// respect to the variances, given the gradient g with respect to the
// sampled pre-activations and their standard deviations sd:
//
//	d_i <- g_i * d_i / (2 sd_i) if sd_i > 0, else 0.
//
// All three slices must have the same length.
func LRTBackward(d, g, sd []float32) {
	if len(g) != len(d) || len(sd) != len(d) {
		panic("kern: LRTBackward length mismatch")
	}
	cur.lrtBack(d, g, sd)
}

func lrtBackwardGo(d, g, sd []float32) {
	g, sd = g[:len(d)], sd[:len(d)]
	for i, s := range sd {
		if s > 0 {
			d[i] = g[i] * d[i] / (2 * s)
		} else {
			d[i] = 0
		}
	}
}

// ReluBackward is the local-reparameterization gradient with respect to a
// hidden layer's input a = relu(z) (a >= 0):
//
//	gp_i <- gp_i + 2 a_i t_i if a_i > 0, else 0,
//
// where gp holds G·mu_W and t holds D·s2_W. All three slices must have the
// same length.
func ReluBackward(gp, a, t []float32) {
	if len(a) != len(gp) || len(t) != len(gp) {
		panic("kern: ReluBackward length mismatch")
	}
	cur.reluBk(gp, a, t)
}

func reluBackwardGo(gp, a, t []float32) {
	a, t = a[:len(gp)], t[:len(gp)]
	for i, v := range a {
		if v > 0 {
			gp[i] += float32(2 * v * t[i]) // rounded product: see the package doc
		} else {
			gp[i] = 0
		}
	}
}

// ReluMask sets g_i = 0 where a_i <= 0 (a = relu(z)); len(a) must be at
// least len(g).
func ReluMask(g, a []float32) {
	if len(a) < len(g) {
		panic("kern: ReluMask a shorter than g")
	}
	cur.reluMsk(g, a[:len(g)])
}

func reluMaskGo(g, a []float32) {
	a = a[:len(g)]
	for i, v := range a {
		if !(v > 0) {
			g[i] = 0
		}
	}
}

// Softplus sets, for every rho_i,
//
//	sigma_i = log(1 + exp(rho_i)),   sigmoid_i = 1 / (1 + exp(-rho_i)),
//
// the standard deviation of a mean-field Gaussian and its derivative,
// computed stably through exp(-|rho_i|). The three slices must have the
// same length; results are accurate to a few float32 ulps.
func Softplus(sigma, sigmoid, rho []float32) {
	if len(sigma) != len(rho) || len(sigmoid) != len(rho) {
		panic("kern: Softplus length mismatch")
	}
	cur.soft(sigma, sigmoid, rho)
}

func softplusGo(sigma, sigmoid, rho []float32) {
	sigma, sigmoid = sigma[:len(rho)], sigmoid[:len(rho)]
	for i, r := range rho {
		sigma[i], sigmoid[i] = softplus1(r)
	}
}

// softplus1 returns softplus(r) and sigmoid(r).
func softplus1(r float32) (float32, float32) {
	x := float64(r)
	e := math.Exp(-math.Abs(x))
	if x > 0 {
		return float32(x + math.Log1p(e)), float32(1 / (1 + e))
	}
	return float32(math.Log1p(e)), float32(e / (1 + e))
}

// AdamCoef are the scalars of one Adam step (Kingma & Ba 2015,
// Algorithm 1) at step count t: C1 = 1/(1 - Beta1^t), C2 = 1/(1 - Beta2^t).
type AdamCoef struct {
	LR, Beta1, Beta2, C1, C2, Eps float32
}

// adam1 is one Adam step of one coordinate x with gradient g of the loss.
func adam1(x, g float32, m, v *float32, c *AdamCoef) float32 {
	mi := float32(c.Beta1**m) + float32((1-c.Beta1)*g) // rounded product: see the package doc
	vi := float32(c.Beta2**v) + float32((1-c.Beta2)*g*g)
	*m, *v = mi, vi
	return x - c.LR*(mi*c.C1)/(float32(math.Sqrt(float64(vi*c.C2)))+c.Eps)
}

// MeanFieldStep is one fused iteration of the per-parameter work of a
// mean-field Gaussian trainer (posterior.Trainer) over n parameters, given
// the data term's gradients. For every j, with s = Sigma_j and
// g = Sigmoid_j (softplus(rho_j) and its derivative, as left by the
// previous step or by Softplus), m_j the prior mean (0 when PriorMean is
// nil) and 1/s_j^2 = PriorPrec_j, it forms the gradient of the negated
// minibatch ELBO
//
//	gmu  = (mu_j - m_j) PriorPrec_j - Scale DMu_j
//	grho = (s PriorPrec_j - 1/s - Scale DSigma_j) g
//
// (the closed-form KL[q || p] gradient of Blundell et al. 2015, with the
// data term's gradients scaled by N/B), takes one Adam step on mu_j with
// (MMu, VMu) and on rho_j with (MRho, VRho), and writes softplus and
// sigmoid of the new rho_j into Sigma_j and Sigmoid_j for the next
// iteration. Every slice must have length at least n (PriorMean may be
// nil).
type MeanFieldStep struct {
	Mu, Rho        []float32
	Sigma, Sigmoid []float32
	DMu, DSigma    []float32
	PriorMean      []float32
	PriorPrec      []float32
	MMu, VMu       []float32
	MRho, VRho     []float32
	Scale          float32
	Adam           AdamCoef
}

// MeanFieldAdam runs the step s describes over its first n parameters.
func MeanFieldAdam(s *MeanFieldStep, n int) {
	for _, p := range [][]float32{s.Mu, s.Rho, s.Sigma, s.Sigmoid, s.DMu, s.DSigma, s.PriorPrec, s.MMu, s.VMu, s.MRho, s.VRho} {
		if len(p) < n {
			panic("kern: MeanFieldStep slice shorter than n")
		}
	}
	if s.PriorMean != nil && len(s.PriorMean) < n {
		panic("kern: MeanFieldStep.PriorMean shorter than n")
	}
	cur.mfAdam(s, n)
}

func meanFieldAdamGo(s *MeanFieldStep, n int) {
	for j := range n {
		mu, sg, g, prec := s.Mu[j], s.Sigma[j], s.Sigmoid[j], s.PriorPrec[j]
		d := mu
		if s.PriorMean != nil {
			d -= s.PriorMean[j]
		}
		gmu := float32(d*prec) - float32(s.Scale*s.DMu[j]) // rounded product: see the package doc
		grho := (float32(sg*prec) - 1/sg - float32(s.Scale*s.DSigma[j])) * g
		s.Mu[j] = adam1(mu, gmu, &s.MMu[j], &s.VMu[j], &s.Adam)
		r := adam1(s.Rho[j], grho, &s.MRho[j], &s.VRho[j], &s.Adam)
		s.Rho[j] = r
		s.Sigma[j], s.Sigmoid[j] = softplus1(r)
	}
}

// PointStep is the per-parameter work of a point (MAP) trainer over n
// parameters: with m_j the prior mean (0 when PriorMean is nil), the
// gradient of -(log p(y | x, mu) + log p(mu)) is
//
//	gmu = (mu_j - m_j) PriorPrec_j - Scale DMu_j,
//
// followed by one Adam step on mu_j with (MMu, VMu).
type PointStep struct {
	Mu        []float32
	DMu       []float32
	PriorMean []float32
	PriorPrec []float32
	MMu, VMu  []float32
	Scale     float32
	Adam      AdamCoef
}

// PointAdam runs the step s describes over its first n parameters.
func PointAdam(s *PointStep, n int) {
	for _, p := range [][]float32{s.Mu, s.DMu, s.PriorPrec, s.MMu, s.VMu} {
		if len(p) < n {
			panic("kern: PointStep slice shorter than n")
		}
	}
	if s.PriorMean != nil && len(s.PriorMean) < n {
		panic("kern: PointStep.PriorMean shorter than n")
	}
	cur.ptAdam(s, n)
}

func pointAdamGo(s *PointStep, n int) {
	for j := range n {
		mu := s.Mu[j]
		d := mu
		if s.PriorMean != nil {
			d -= s.PriorMean[j]
		}
		gmu := float32(d*s.PriorPrec[j]) - float32(s.Scale*s.DMu[j]) // rounded product: see the package doc
		s.Mu[j] = adam1(mu, gmu, &s.MMu[j], &s.VMu[j], &s.Adam)
	}
}
