package posterior

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/refinery-bandits/refinery/nn"
)

// smallBandit returns a likelihood of a 2x16 ReLU network on 300 one-hot
// rows of dimension 24 with 2 arms and learned noise, and a mean-field
// posterior with He means and sigma 0.05 under a unit prior. With
// referenceNoise the fast engine draws the float64 path's normals
// (nn.Options.ReferenceNoise).
func smallBandit(est nn.Estimator, referenceNoise bool) (*nn.Likelihood, *MeanField) {
	rng := rand.New(rand.NewPCG(21, 22))
	const dim = 24
	d := nn.NewData(dim, 2)
	x := make([]float64, dim)
	for range 300 {
		clear(x)
		for g := range 4 {
			x[6*g+rng.IntN(6)] = 1
		}
		arm := rng.IntN(2)
		y := 0.0
		if arm == 0 {
			y = 5
			if x[0] == 1 || x[1] == 1 {
				y = -35
			}
		}
		d.Append(x, arm, y)
	}
	arch := nn.NewArch(dim, []int{16, 16}, 2)
	lik := nn.NewLikelihood(arch, d.View(), nn.Options{Estimator: est, LearnNoise: true, Standardization: nn.FitStandardization(d.View()), ReferenceNoise: referenceNoise})
	q := NewMeanField(arch.NumParams(), 1, ones(arch.NumParams(), 1), 0.05)
	arch.InitHe(q.Mu, rng)
	q.Hyper[0] = math.Log(4)
	return lik, q
}

// TestFastTrainerStepMatchesReference takes one trainer step on each
// engine from the same posterior with the same seed and reference noise
// (hence the same minibatch and noise draws). Adam's first step moves every coordinate by
// LR g/(|g| + Eps), about LR sign(g): the engines must agree to float32
// rounding of the parameters (1e-6 relative plus 1e-9) wherever the
// reference gradient g is larger than 1e-4 of its largest entry. Below
// that, float32 rounding of the gradient (about 1e-7 of the largest
// entry, see nn's TestFastEngineMatchesReference) can decide the sign, so
// those coordinates may differ by up to 2 LR; at most 1% may.
// Exact zeros (a point estimate's rho, inputs outside the batch) are
// structural on both engines and held to the tight tolerance.
func TestFastTrainerStepMatchesReference(t *testing.T) {
	type tcase struct {
		est   nn.Estimator
		point bool
		bound Bound
	}
	cases := []tcase{{est: nn.Deterministic, point: true}}
	for _, est := range []nn.Estimator{nn.LocalReparam, nn.WeightReparam, nn.Deterministic, nn.RIS} {
		cases = append(cases, tcase{est: est})
	}
	// The collapsed bounds (Eqs. 9 and 10) on the fast engine: the learned
	// prior given q from the float32 values, then the fused pass.
	for _, b := range []Bound{BoundCollapsedMean, BoundCollapsedMeanVar} {
		cases = append(cases, tcase{est: nn.LocalReparam, bound: b})
	}
	for _, c := range cases {
		est, point := c.est, c.point
		{
			name := est.String()
			if point {
				name += " point estimate"
			}
			if c.bound != BoundELBO {
				name += " " + c.bound.String()
			}
			t.Run(name, func(t *testing.T) {
				lik, q0 := smallBandit(est, true)
				const lr = 1e-3
				cfg := TrainConfig{BatchSize: 32, LR: lr, Point: point, Bound: c.bound}
				ref, fast := q0.Clone(), q0.Clone()
				cfg.Reference = true
				trR, _ := NewTrainer(lik, cfg)
				cfg.Reference = false
				trF, _ := NewTrainer(lik, cfg)
				llR := trR.Step(ref, rand.New(rand.NewPCG(5, 5)))
				llF := trF.Step(fast, rand.New(rand.NewPCG(5, 5)))
				if math.Abs(llR-llF) > 1e-5*math.Abs(llR) {
					t.Errorf("data term: fast %.9g, reference %.9g", llF, llR)
				}
				g := trR.grad // gradient of -ELBO in [mu | rho | hyper]
				gmax := 0.0
				for _, v := range g {
					gmax = math.Max(gmax, math.Abs(v))
				}
				pr, pf, p0 := ref.Params(), fast.Params(), q0.Params()
				flips, worst := 0, 0.0
				for j := range pr {
					d := math.Abs(pr[j] - pf[j])
					tol := 1e-6*math.Abs(pr[j]) + 1e-9
					if d <= tol {
						worst = math.Max(worst, d/tol)
						continue
					}
					if g[j] == 0 || math.Abs(g[j]) >= 1e-4*gmax || d > 2*lr*(1+1e-6) {
						t.Errorf("param %d (g %.3g of max %.3g): fast %.9g, reference %.9g (started at %.9g)", j, g[j], gmax, pf[j], pr[j], p0[j])
					}
					flips++
				}
				if flips > len(pr)/100 {
					t.Errorf("%d of %d parameters moved differently, want under 1%%", flips, len(pr))
				}
				t.Logf("%d parameters: worst difference %.3g of the tolerance; %d flipped on tiny gradients", len(pr), worst, flips)
			})
		}
	}
}

// TestConcurrentRefinersMatchSerial refines on two goroutines from one
// shared q0 and likelihood and checks that every sample equals, bit for
// bit, the one the same refiner and seed give serially.
func TestConcurrentRefinersMatchSerial(t *testing.T) {
	forEngines(t, func(t *testing.T, reference bool) {
		lik, q0 := smallBandit(nn.LocalReparam, false)
		cfg := RefineConfig{Fractions: []float64{0.7, 0.3}, Iterations: 100, BatchSize: 32, Reference: reference}
		const workers, samples = 2, 3
		run := func(w int) [][]float64 {
			ref, err := NewRefiner(lik, cfg)
			if err != nil {
				t.Error(err)
				return nil
			}
			rng := rand.New(rand.NewPCG(uint64(w), 77))
			var out [][]float64
			for range samples {
				s, _, err := ref.Refine(context.Background(), nil, q0, rng)
				if err != nil {
					t.Error(err)
				}
				out = append(out, s)
			}
			return out
		}
		serial := make([][][]float64, workers)
		for w := range workers {
			serial[w] = run(w)
		}
		conc := make([][][]float64, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { conc[w] = run(w) })
		}
		wg.Wait()
		for w := range workers {
			for s := range samples {
				for j := range serial[w][s] {
					if serial[w][s][j] != conc[w][s][j] {
						t.Fatalf("worker %d sample %d param %d: %v concurrently, %v serially", w, s, j, conc[w][s][j], serial[w][s][j])
					}
				}
			}
		}
		if serial[0][0][0] == serial[1][0][0] {
			t.Errorf("two seeds gave the same sample")
		}
	})
}

func TestFastRefinerAllocatesNothingPerSample(t *testing.T) {
	lik, q0 := smallBandit(nn.LocalReparam, false)
	ref, err := NewRefiner(lik, RefineConfig{Iterations: 20, BatchSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	w := make([]float64, lik.NumParams())
	ctx := context.Background()
	if a := testing.AllocsPerRun(10, func() { ref.Refine(ctx, w, q0, rng) }); a != 0 {
		t.Errorf("Refine allocates %v times per sample, want 0", a)
	}
	tr, _ := NewTrainer(lik, TrainConfig{BatchSize: 16})
	q := q0.Clone()
	if a := testing.AllocsPerRun(20, func() { tr.Step(q, rng) }); a != 0 {
		t.Errorf("Step allocates %v times, want 0", a)
	}
}

// TestStaggered checks staggered's slices: length n, disjoint, one
// whole number of 64-byte lines apart, and at that stride in k distinct
// sets of a 64-set L1 (the same line offset modulo 4 KB would put them in
// one set).
func TestStaggered(t *testing.T) {
	for _, n := range []int{0, 1, 15, 16, 17, 1024, 1040, 22102, 22112} {
		const k = 12
		next := staggered(n, k)
		var base uintptr
		sets := map[uintptr]bool{}
		for i := range k {
			s := next()
			if len(s) != n || cap(s) != n {
				t.Fatalf("n=%d: slice %d has len %d cap %d", n, i, len(s), cap(s))
			}
			if n == 0 {
				continue
			}
			p := uintptr(unsafe.Pointer(&s[0]))
			if i == 0 {
				base = p
			}
			off := p - base
			if off%64 != 0 || off < uintptr(4*n*i) {
				t.Fatalf("n=%d: slice %d at offset %d bytes", n, i, off)
			}
			set := off / 64 % 64
			if sets[set] {
				t.Fatalf("n=%d: slice %d shares L1 set %d with an earlier one", n, i, set)
			}
			sets[set] = true
		}
	}
}
