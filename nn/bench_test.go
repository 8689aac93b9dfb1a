package nn

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/nn/kern"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

// The bandit network of Havasi et al. (2021), Section 4.3, on one-hot
// mushroom contexts: 117 inputs (22 categorical attributes, one-hot),
// hidden layers of 100 and 100 ReLU units, one output per arm (eat, pass),
// trained with minibatches of 64.
const (
	benchIn    = 117
	benchGroup = 22
	benchArms  = 2
	benchBatch = 64
	benchRows  = 4096
)

var benchHidden = []int{100, 100}

// banditData returns benchRows one-hot contexts (one active category in
// each of 22 groups spanning 117 columns) with mushroom rewards: pass 0;
// eat +5, or -35 with probability 1/2 if the mushroom is poisonous.
func banditData(rng *rand.Rand) View {
	sizes := make([]int, benchGroup)
	for g := range sizes {
		sizes[g] = benchIn / benchGroup
	}
	for g := range benchIn % benchGroup {
		sizes[g]++
	}
	d := NewData(benchIn, benchArms)
	x := make([]float64, benchIn)
	for range benchRows {
		clear(x)
		off := 0
		for _, s := range sizes {
			x[off+rng.IntN(s)] = 1
			off += s
		}
		poisonous := x[0] == 1 || x[1] == 1
		arm, y := rng.IntN(benchArms), 0.0
		if arm == 0 {
			y = 5
			if poisonous && rng.IntN(2) == 0 {
				y = -35
			}
		}
		d.Append(x, arm, y)
	}
	return d.View()
}

// trainer is what a mean-field trainer does per iteration, without the KL
// term: draw a minibatch, sigma = softplus(rho), ExpectedLogLik, chain rule
// to rho, one Adam descent step on theta = [mu | rho]. Under Deterministic
// it is a point trainer instead: LogLik's gradient in w and an Adam step
// on w alone.
type trainer struct {
	lik   *Likelihood
	ev    *evaluator
	theta []float64 // [mu | rho]
	sigma []float64
	dsdr  []float64 // d sigma / d rho = logistic(rho)
	grad  []float64 // [dMu | dSigma], then the loss gradient in [mu | rho]
	rows  []int
	opt   *Adam
	rng   *rand.Rand
}

func newTrainer(est Estimator) *trainer {
	rng := rand.New(rand.NewPCG(1, 2))
	data := banditData(rng)
	a := NewArch(benchIn, benchHidden, benchArms)
	lik := NewLikelihood(a, data, Options{Estimator: est, NoiseVar: 1, Standardization: FitStandardization(data)})
	n := a.NumParams()
	tr := &trainer{
		lik:   lik,
		ev:    newEvaluator(lik, benchBatch),
		theta: make([]float64, 2*n),
		sigma: make([]float64, n),
		dsdr:  make([]float64, n),
		grad:  make([]float64, 2*n),
		rows:  make([]int, benchBatch),
		opt:   NewAdam(2*n, 0),
		rng:   rng,
	}
	if est == Deterministic {
		tr.opt = NewAdam(n, 0)
	}
	a.InitHe(tr.theta[:n], rng)
	for j := n; j < 2*n; j++ {
		tr.theta[j] = -5 // sigma = softplus(-5) ≈ 0.0067
	}
	return tr
}

func (tr *trainer) step() {
	n := len(tr.sigma)
	mu, rho := tr.theta[:n], tr.theta[n:]
	for i := range tr.rows {
		tr.rows[i] = tr.rng.IntN(tr.lik.NumRows())
	}
	if tr.lik.opt.Estimator == Deterministic {
		// A point (MAP-style) trainer: w = mu only, no sigma.
		tr.ev.LogLik(tr.grad[:n], nil, mu, nil, tr.rows)
		for j := range n {
			tr.grad[j] = -tr.grad[j]
		}
		tr.opt.Step(mu, tr.grad[:n])
		return
	}
	softplus(tr.sigma, tr.dsdr, rho)
	tr.ev.ExpectedLogLik(tr.grad[:n], tr.grad[n:], nil, mu, tr.sigma, nil, tr.rows, tr.rng)
	dMu, dSigma := tr.grad[:n], tr.grad[n:2*n]
	for j, d := range tr.dsdr {
		dMu[j] = -dMu[j]
		dSigma[j] *= -d
	}
	tr.opt.Step(tr.theta, tr.grad)
}

// softplus sets sigma = log(1 + e^rho) and dsdr = e^rho/(1 + e^rho), its
// derivative (the logistic function), with one exponential per entry.
func softplus(sigma, dsdr, rho []float64) {
	sigma, dsdr = sigma[:len(rho)], dsdr[:len(rho)]
	for j, r := range rho {
		if r > 30 { // e^r overflows long after log1p(e^r) == r in float64
			sigma[j], dsdr[j] = r, 1
			continue
		}
		e := math.Exp(r)
		sigma[j] = math.Log1p(e)
		dsdr[j] = e / (1 + e)
	}
}

// products replays the Gemm products of the last iteration of tr with
// the values (and so the sparsity) its operands had, writing into sinks.
//
// In mode actual it issues exactly the calls of the evaluator: forward
// products A (W^T) against transposed weight copies, the first layer's
// weight gradient through its transposed path when the contexts are sparse
// (with the transpose-add it needs), through the tiling gemm helper.
//
// In the canonical modes it issues the textbook list, the baseline of
// bench/nn.md: per layer the forward Z = A W^T, and backward dW = G^T A and
// (except for the first layer) dA = G W; under LocalReparam each doubled
// for the variance path (V = A² (σ²)^T, dσ² = D^T A², D σ²_W). Mode
// canonical calls blas64.Gemm directly, as a caller would, which lets
// gonum split the larger products across goroutines; canonicalSerial goes
// through the tiling helper and stays on one core.
type products struct {
	tr           *trainer
	est          Estimator
	mode         int
	sinkZ, sinkG []float64
	sinkW        []float64
	count        int // products per iteration
	flops        float64
}

const (
	actual = iota
	canonical
	canonicalSerial
)

var modeNames = []string{"products", "products-canonical", "products-canonical-serial"}

func newProducts(tr *trainer, mode int) *products {
	a := tr.lik.arch
	p := &products{tr: tr, est: tr.lik.opt.Estimator, mode: mode, sinkW: make([]float64, a.NumParams())}
	maxW := 0
	for _, ly := range a.layers {
		maxW = max(maxW, ly.In, ly.Out)
	}
	p.sinkZ = make([]float64, benchBatch*maxW)
	p.sinkG = make([]float64, benchBatch*maxW)
	p.run() // count
	return p
}

func (p *products) mul(tA, tB blas.Transpose, m, n, k int, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	p.count++
	p.flops += 2 * float64(m) * float64(n) * float64(k)
	if p.mode != canonical {
		gemm(tA, tB, m, n, k, 1, a, lda, b, ldb, beta, c, ldc)
		return
	}
	ar, ac := m, k
	if tA != blas.NoTrans {
		ar, ac = k, m
	}
	br, bc := k, n
	if tB != blas.NoTrans {
		br, bc = n, k
	}
	blas64.Gemm(tA, tB, 1,
		blas64.General{Rows: ar, Cols: ac, Stride: lda, Data: a},
		blas64.General{Rows: br, Cols: bc, Stride: ldb, Data: b},
		beta, blas64.General{Rows: m, Cols: n, Stride: ldc, Data: c})
}

func (p *products) run() {
	p.count, p.flops = 0, 0
	e := p.tr.ev
	n := benchBatch
	mu := p.tr.theta[:e.arch.n]
	w := mu
	if p.est == WeightReparam {
		w = e.w
	}
	lrt := p.est == LocalReparam
	x := e.xb
	for l, ly := range e.arch.layers { // forward
		in := e.input(l, x)
		if p.mode == actual {
			p.mul(noTrans, noTrans, n, ly.Out, ly.In, in, ly.In, ly.Weights(e.wT), ly.Out, 1, p.sinkZ, ly.Out)
			if lrt {
				p.mul(noTrans, noTrans, n, ly.Out, ly.In, e.sq[l], ly.In, ly.Weights(e.s2T), ly.Out, 1, p.sinkZ, ly.Out)
			}
			continue
		}
		p.mul(noTrans, trans, n, ly.Out, ly.In, in, ly.In, ly.Weights(w), ly.In, 1, p.sinkZ, ly.Out)
		if lrt {
			p.mul(noTrans, trans, n, ly.Out, ly.In, e.sq[l], ly.In, ly.Weights(e.s2), ly.In, 1, p.sinkZ, ly.Out)
		}
	}
	for l := e.last(); l >= 0; l-- { // backward
		ly := e.arch.layers[l]
		in := e.input(l, x)
		g := e.grad[l]
		if p.mode == actual {
			p.count++
			p.flops += 2 * float64(ly.Out*ly.In*n)
			e.weightGrad(l, ly.Weights(p.sinkW), g[:n*ly.Out], in, n, 0)
			if lrt {
				p.count++
				p.flops += 2 * float64(ly.Out*ly.In*n)
				e.weightGrad(l, ly.Weights(p.sinkW), e.leps[l][:n*ly.Out], e.sq[l], n, 0)
			}
		} else {
			p.mul(trans, noTrans, ly.Out, ly.In, n, g, ly.Out, in, ly.In, 0, ly.Weights(p.sinkW), ly.In)
			if lrt {
				p.mul(trans, noTrans, ly.Out, ly.In, n, e.leps[l], ly.Out, e.sq[l], ly.In, 0, ly.Weights(p.sinkW), ly.In)
			}
		}
		if l > 0 {
			p.mul(noTrans, noTrans, n, ly.In, ly.Out, g, ly.Out, ly.Weights(w), ly.In, 0, p.sinkG, ly.In)
			if lrt {
				p.mul(noTrans, noTrans, n, ly.In, ly.Out, e.leps[l], ly.Out, ly.Weights(e.s2), ly.In, 0, p.sinkG, ly.In)
			}
		}
	}
}

// BenchmarkIteration measures one training iteration of the bandit network
// (see trainer.step) under each estimator, and beside it the bare Gemm
// products of that iteration in the three modes of products. GFLOP/s counts
// 2mnk per product, as if dense.
func BenchmarkIteration(b *testing.B) {
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic} {
		tr := newTrainer(est)
		for range 20 { // leave the initial state: realistic ReLU sparsity
			tr.step()
		}
		b.Run(est.String()+"/iteration", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tr.step()
			}
		})
		for mode, name := range modeNames {
			p := newProducts(tr, mode)
			b.Run(est.String()+"/"+name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					p.run()
				}
				b.ReportMetric(float64(p.count), "gemms/op")
				b.ReportMetric(p.flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkIterationParts times the per-parameter work of a mean-field
// iteration outside the products, for the bandit network's 22,102
// parameters: the softplus transform and its derivative, one standard
// normal per parameter (WeightReparam), and the Adam step on [mu | rho].
func BenchmarkIterationParts(b *testing.B) {
	n := NewArch(benchIn, benchHidden, benchArms).NumParams()
	rho := make([]float64, n)
	s := make([]float64, n)
	g := make([]float64, 2*n)
	for j := range rho {
		rho[j] = -5 + float64(j%7)*0.1
	}
	d := make([]float64, n)
	b.Run("softplus", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			softplus(s, d, rho)
		}
	})
	b.Run("normals", func(b *testing.B) {
		b.ReportAllocs()
		rng := rand.New(rand.NewPCG(1, 2))
		for b.Loop() {
			for j := range s {
				s[j] = rng.NormFloat64()
			}
		}
	})
	b.Run("adam", func(b *testing.B) {
		b.ReportAllocs()
		x := make([]float64, 2*n)
		opt := NewAdam(2*n, 0)
		for b.Loop() {
			opt.Step(x, g)
		}
	})
}

// BenchmarkOverheadRatio times, within each loop turn, one iteration, then
// the evaluator alone on the same minibatch (ExpectedLogLik, or LogLik with
// its gradient under Deterministic: gather, forward, backward), then the
// iteration's products in the three modes, so that all of them see the same
// load on a machine shared with other work. It reports the time of each per
// iteration and the ratios. Its allocations are those of the canonical
// mode's goroutines (BenchmarkIteration shows the iteration alone allocates
// nothing).
func BenchmarkOverheadRatio(b *testing.B) {
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic} {
		tr := newTrainer(est)
		for range 20 {
			tr.step()
		}
		ps := make([]*products, len(modeNames))
		for mode := range ps {
			ps[mode] = newProducts(tr, mode)
		}
		n := len(tr.sigma)
		eval := func() {
			if est == Deterministic {
				tr.ev.LogLik(tr.grad[:n], nil, tr.theta[:n], nil, tr.rows)
				return
			}
			tr.ev.ExpectedLogLik(tr.grad[:n], tr.grad[n:], nil, tr.theta[:n], tr.sigma, nil, tr.rows, tr.rng)
		}
		b.Run(est.String(), func(b *testing.B) {
			b.ReportAllocs()
			var it, ev time.Duration
			pt := make([]time.Duration, len(ps))
			for b.Loop() {
				t0 := time.Now()
				tr.step()
				it += time.Since(t0)
				t0 = time.Now()
				eval()
				ev += time.Since(t0)
				for mode, p := range ps {
					t0 = time.Now()
					p.run()
					pt[mode] += time.Since(t0)
				}
			}
			per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
			b.ReportMetric(per(it), "iter-ns")
			b.ReportMetric(per(ev), "eval-ns")
			b.ReportMetric(per(pt[actual]), "prod-ns")
			b.ReportMetric(per(pt[canonicalSerial]), "canon-serial-ns")
			b.ReportMetric(per(pt[canonical]), "canon-ns")
			b.ReportMetric(float64(it)/float64(pt[canonicalSerial]), "iter/canon-serial")
			b.ReportMetric(float64(it)/float64(pt[canonical]), "iter/canon")
			b.ReportMetric(float64(it)/float64(pt[actual]), "iter/prod")
			b.ReportMetric(float64(ev)/float64(pt[actual]), "eval/prod")
		})
	}
}

// denseFlops is the dense-equivalent floating-point work of one evaluator
// call on n rows, 2mnk per product as if every operand were dense: per
// layer the forward product, the weight gradient and (above the first
// layer) the gradient with respect to the layer's input, each doubled for
// the variance path of LocalReparam.
func denseFlops(a Arch, est Estimator, n int) float64 {
	var f float64
	for l, ly := range a.layers {
		products := 2.0
		if l > 0 {
			products = 3
		}
		f += products * 2 * float64(n*ly.In*ly.Out)
	}
	if est == LocalReparam || est == RIS {
		f *= 2
	}
	return f
}

// engineBench is one evaluator call on each engine on the same minibatch
// of the bandit network, from the state of a trainer after 20 iterations
// (realistic ReLU sparsity).
type engineBench struct {
	tr                    *trainer
	fast                  Evaluator32
	mu, sigma             []float32
	dMu, dSigma           []float32
	refMu, refSigma, flop float64
}

func newEngineBench(est Estimator) *engineBench {
	tr := newTrainer(est)
	for range 20 {
		tr.step()
	}
	a := tr.lik.arch
	n := a.NumParams()
	softplus(tr.sigma, tr.dsdr, tr.theta[n:])
	if est == Deterministic {
		clear(tr.sigma)
	}
	e := &engineBench{
		tr:   tr,
		fast: tr.lik.NewEvaluator32(benchBatch),
		mu:   make([]float32, n), sigma: make([]float32, n),
		dMu: make([]float32, n), dSigma: make([]float32, n),
		flop: denseFlops(a, est, benchBatch),
	}
	a.ToEngine(e.mu, tr.theta[:n])
	a.ToEngine(e.sigma, tr.sigma)
	return e
}

func (e *engineBench) reference() {
	n := len(e.mu)
	e.tr.ev.ExpectedLogLik(e.tr.grad[:n], e.tr.grad[n:], nil, e.tr.theta[:n], e.tr.sigma, nil, e.tr.rows, e.tr.rng)
}

func (e *engineBench) fastEngine() {
	e.fast.ExpectedLogLik(e.dMu, e.dSigma, nil, e.mu, e.sigma, nil, e.tr.rows, e.tr.rng)
}

// BenchmarkEngines measures one ExpectedLogLik call of the bandit network
// (batch 64: gather, forward, backward) per estimator on the float64
// reference and on the float32 fast engine, with the kernel level in use
// (REFINERY_KERN; it ends the fast benchmarks' names), and in a paired loop both on the same minibatches with
// the ratio reference/fast. GFLOP/s is the dense-equivalent rate of
// denseFlops. make bench-nn runs it.
func BenchmarkEngines(b *testing.B) {
	fastName := "/fast-" + kern.Current().String()
	for _, est := range []Estimator{LocalReparam, WeightReparam, Deterministic, RIS} {
		e := newEngineBench(est)
		gflops := func(b *testing.B, d time.Duration) {
			b.ReportMetric(e.flop*float64(b.N)/d.Seconds()/1e9, "GFLOP/s")
		}
		b.Run(est.String()+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.reference()
			}
			gflops(b, b.Elapsed())
		})
		b.Run(est.String()+fastName, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.fastEngine()
			}
			gflops(b, b.Elapsed())
		})
		b.Run(est.String()+"/paired", func(b *testing.B) {
			var ref, fast time.Duration
			for b.Loop() {
				for i := range e.tr.rows {
					e.tr.rows[i] = e.tr.rng.IntN(benchRows)
				}
				t0 := time.Now()
				e.reference()
				t1 := time.Now()
				e.fastEngine()
				fast += time.Since(t1)
				ref += t1.Sub(t0)
			}
			b.ReportMetric(float64(ref.Nanoseconds())/float64(b.N), "ref-ns")
			b.ReportMetric(float64(fast.Nanoseconds())/float64(b.N), "fast-ns")
			b.ReportMetric(float64(ref)/float64(fast), "ref/fast")
		})
	}
}
