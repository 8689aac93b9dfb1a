package posterior

import (
	"math"
	"math/rand/v2"

	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/nn/kern"
)

// likelihood32 is a Likelihood with a float32 fast engine
// (nn.Likelihood.NewEvaluator32).
type likelihood32 interface {
	NewEvaluator32(maxBatch int) nn.Evaluator32
}

// engineIndices maps canonical parameter indices into ev's engine layout
// (for n parameters), in ascending engine order.
func engineIndices(ev nn.Evaluator32, idx []int, n int) []int {
	if len(idx) == 0 {
		return nil
	}
	// Mark each index by its position + 1, exact in float32 below 2^24.
	src := make([]float64, n)
	for i, j := range idx {
		src[j] = float64(i + 1)
	}
	dst := make([]float32, n)
	ev.ToEngine(dst, src)
	out := make([]int, 0, len(idx))
	for e, v := range dst {
		if v != 0 {
			out = append(out, e)
		}
	}
	if len(out) != len(idx) {
		panic("posterior: the engine layout is not a permutation of the parameters")
	}
	return out
}

// newEvaluator32 returns lik's fast evaluator, or for a likelihood that
// only has a float64 one (the closed-form test models) an adapter that
// converts around it, so that the fast trainer runs on every Likelihood.
func newEvaluator32(lik Likelihood, maxBatch int) nn.Evaluator32 {
	if l, ok := lik.(likelihood32); ok {
		return l.NewEvaluator32(maxBatch)
	}
	n := lik.NumParams()
	return &evaluator64{
		ev: lik.NewEvaluator(maxBatch),
		mu: make([]float64, n), sigma: make([]float64, n),
		dMu: make([]float64, n), dSigma: make([]float64, n),
	}
}

// evaluator64 runs a float64 Evaluator behind the nn.Evaluator32 interface;
// its engine layout is the canonical one.
type evaluator64 struct {
	ev                     Evaluator
	mu, sigma, dMu, dSigma []float64
}

func (e *evaluator64) ExpectedLogLik(dMu, dSigma []float32, dHyper []float64, mu, sigma []float32, hyper []float64, rows []int, rng *rand.Rand) float64 {
	e.FromEngine(e.mu, mu)
	e.FromEngine(e.sigma, sigma)
	ll := e.ev.ExpectedLogLik(e.dMu, e.dSigma, dHyper, e.mu, e.sigma, hyper, rows, rng)
	e.ToEngine(dMu, e.dMu)
	e.ToEngine(dSigma, e.dSigma)
	return ll
}

func (e *evaluator64) ToEngine(dst []float32, src []float64) {
	for j, v := range src[:len(dst)] {
		dst[j] = float32(v)
	}
}

func (e *evaluator64) FromEngine(dst []float64, src []float32) {
	for j, v := range src[:len(dst)] {
		dst[j] = float64(v)
	}
}

// fastState is the Trainer's state on the fast engine: the variational
// parameters in float32 and the engine layout while a Run (or a Step, or
// a refiner's conditional optimization) lasts, loaded from the MeanField
// at its start and stored back at its end, and Adam's moments, which
// persist across runs until Reset. The likelihood hyperparameters stay in
// float64 with their own Adam, stepped with the same count.
type fastState struct {
	eval                  nn.Evaluator32
	mu, rho, sigma, sgm   []float32
	dMu, dSigma, pm, prec []float32
	mMu, vMu, mRho, vRho  []float32
	dHyper, tmp           []float64
	rhoOld                []float32      // rho before an Adam step (SigmaLR; nil without)
	hold                  holds[float32] // TrainConfig.HeldSigma and Held, engine layout
	s2                    []float32      // PriorVar (collapsed bounds only)
	hyper                 *nn.Adam
	t                     int
	natural               bool // OptimizerNGVI: sigma is stepped, rho is stale
	mf                    kern.MeanFieldStep
	pt                    kern.PointStep
}

func newFastState(lik Likelihood, maxBatch int) *fastState {
	n, nh := lik.NumParams(), lik.NumHyper()
	v := staggered(n, 12)
	f := &fastState{
		eval: newEvaluator32(lik, maxBatch),
		mu:   v(), rho: v(), sigma: v(), sgm: v(),
		dMu: v(), dSigma: v(), pm: v(), prec: v(),
		mMu: v(), vMu: v(), mRho: v(), vRho: v(),
		dHyper: make([]float64, nh),
		tmp:    make([]float64, n),
		hyper:  nn.NewAdam(nh, DefaultLR),
	}
	f.mf = kern.MeanFieldStep{
		Mu: f.mu, Rho: f.rho, Sigma: f.sigma, Sigmoid: f.sgm,
		DMu: f.dMu, DSigma: f.dSigma, PriorPrec: f.prec,
		MMu: f.mMu, VMu: f.vMu, MRho: f.mRho, VRho: f.vRho,
	}
	f.pt = kern.PointStep{Mu: f.mu, DMu: f.dMu, PriorPrec: f.prec, MMu: f.mMu, VMu: f.vMu}
	return f
}

// staggered returns a function that hands out up to k slices of n float32
// from one allocation, at a stride of an odd number of 64-byte lines.
// kern.MeanFieldAdam streams twelve such arrays at the same index; as
// separate allocations of a large network's size they are page-aligned,
// so all twelve vectors of an index would map to one set of an 8-way L1
// cache (Zen 3's) and evict one another: 15% of the kernel's time there.
// The odd stride puts the k arrays' vectors in k different sets (k <= 64),
// and every slice starts a whole number of lines after the slab, which is
// page-aligned when large.
func staggered(n, k int) func() []float32 {
	const line = 16 // float32 per 64-byte cache line
	lines := (n + line - 1) / line
	lines |= 1
	stride := lines * line
	slab := make([]float32, k*stride)
	return func() []float32 {
		s := slab[:n:n]
		slab = slab[min(stride, len(slab)):]
		return s
	}
}

// reset zeroes Adam's moments and step count.
func (f *fastState) reset() {
	for _, m := range [][]float32{f.mMu, f.vMu, f.mRho, f.vRho} {
		clear(m)
	}
	f.hyper.Reset()
	f.t = 0
}

// load copies q into the engine: means, rho and softplus(rho) (sigma = 0
// for a point estimate), the prior precisions and the prior mean.
func (f *fastState) load(q *MeanField, point bool) {
	f.eval.ToEngine(f.mu, q.Mu)
	f.eval.ToEngine(f.rho, q.Rho)
	for j, v := range q.PriorVar {
		f.tmp[j] = 1 / v
	}
	f.eval.ToEngine(f.prec, f.tmp)
	if f.s2 != nil {
		f.eval.ToEngine(f.s2, q.PriorVar)
	}
	f.mf.PriorMean, f.pt.PriorMean = nil, nil
	if q.PriorMean != nil {
		f.eval.ToEngine(f.pm, q.PriorMean)
		f.mf.PriorMean, f.pt.PriorMean = f.pm, f.pm
	}
	if point {
		clear(f.sigma)
	} else {
		kern.Softplus(f.sigma, f.sgm, f.rho)
	}
}

// store copies the engine's means (and rho unless point) back into q.
// Under OptimizerNGVI, which steps sigma and leaves the engine's rho
// stale, rho is SoftplusInv(sigma), computed in float64.
func (f *fastState) store(q *MeanField, point bool) {
	f.eval.FromEngine(q.Mu, f.mu)
	switch {
	case point:
	case f.natural:
		f.eval.FromEngine(f.tmp, f.sigma)
		for j, s := range f.tmp {
			q.Rho[j] = SoftplusInv(s)
		}
	default:
		f.eval.FromEngine(q.Rho, f.rho)
	}
}

// ngvi is the per-parameter pass of OptimizerNGVI on the fast engine
// (ngviPass32 in the engine's layout), after the prior of this step is in
// pm (when mf.PriorMean is set) and prec.
func (f *fastState) ngvi(n int, scale, beta float32) {
	ngviPass32(f.mu[:n], f.sigma[:n], f.dMu[:n], f.dSigma[:n], f.mf.PriorMean, f.prec[:n], scale, beta)
}

// step is Trainer.step on the fast engine, between load and store: the
// data term's gradients from the fast evaluator, then one fused pass of
// kern.MeanFieldAdam (kern.PointAdam for a point estimate) that forms the
// gradient of the negated ELBO (the KL gradient of Trainer.step), takes
// the Adam step (Kingma & Ba 2015, Algorithm 1) and recomputes
// softplus(rho) for the next iteration.
func (t *Trainer) stepFast(q *MeanField, rng *rand.Rand) (ll, scale float64) {
	f := t.fast
	f.hold.save(f.mu, f.rho, f.sigma, f.sgm)
	defer f.hold.restore(f.mu, f.rho, f.sigma, f.sgm)
	if t.lik.NumRows() > 0 {
		var rows []int
		rows, scale = t.batch(rng)
		ll = f.eval.ExpectedLogLik(f.dMu, f.dSigma, f.dHyper, f.mu, f.sigma, q.Hyper, rows, rng)
	} else {
		clear(f.dMu)
		clear(f.dSigma)
		clear(f.dHyper)
	}
	f.t++
	// The bias corrections use the float32 decay rates the kernel
	// uses, so that (1 - Beta2) C2 = 1 at the first step as in float64;
	// float32(0.999) is 1.3e-8 off, 1.3e-5 of 1 - Beta2.
	b1, b2 := float32(f.hyper.Beta1), float32(f.hyper.Beta2)
	coef := kern.AdamCoef{
		LR:    float32(t.lr),
		Beta1: b1,
		Beta2: b2,
		C1:    float32(1 / (1 - math.Pow(float64(b1), float64(f.t)))),
		C2:    float32(1 / (1 - math.Pow(float64(b2), float64(f.t)))),
		Eps:   float32(f.hyper.Eps),
	}
	n := len(f.mu)
	if t.cfg.Point {
		f.pt.Scale, f.pt.Adam = float32(scale), coef
		kern.PointAdam(&f.pt, n)
	} else {
		if t.cfg.Bound != BoundELBO {
			// The learned prior given q as the fixed prior of the fused
			// pass, whose KL gradient is then the collapsed bound's
			// (collapsed). Eq. 9's precision 1/gamma is the loaded one.
			reg, shape := float32(t.col.reg), float32(t.col.shape)
			if t.cfg.Bound == BoundCollapsedMean {
				keep := 1 - reg
				for j, mu := range f.mu[:n] {
					f.pm[j] = keep * mu
				}
			} else {
				for j, mu := range f.mu[:n] {
					f.pm[j], f.prec[j] = learnedPrior(false, reg, shape, mu, f.sigma[j], f.s2[j])
				}
			}
			f.mf.PriorMean = f.pm
		}
		if t.cfg.Optimizer == OptimizerNGVI {
			f.ngvi(n, float32(scale), float32(t.ngviStep()))
		} else {
			c := float32(t.sigmaScale())
			if c > 1 {
				copy(f.rhoOld, f.rho)
			}
			f.mf.Scale, f.mf.Adam = float32(scale), coef
			kern.MeanFieldAdam(&f.mf, n)
			if c > 1 {
				// Adam at SigmaLR on rho: stretch the kernel's step and
				// recompute softplus(rho) and its derivative.
				for j, r := range f.rhoOld {
					f.rho[j] = r + c*(f.rho[j]-r)
				}
				kern.Softplus(f.sigma, f.sgm, f.rho)
			}
		}
	}
	t.hyperGrad(f.dHyper, q.Hyper, scale)
	f.hyper.LR = t.lr
	f.hyper.Step(q.Hyper, f.dHyper)
	return ll, scale
}
