package posterior_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/internal/cpustat"
	"github.com/refinery-bandits/refinery/nn"
	"github.com/refinery-bandits/refinery/nn/kern"
	"github.com/refinery-bandits/refinery/posterior"
)

// banditData returns n rows shaped like the one-hot mushroom bandit: 22
// categorical attributes (15 with 5 values, 7 with 6: 117 one-hot
// features), 2 arms, rewards +5 / -35 / 0 from a fixed random rule.
func banditData(n int, rng *rand.Rand) nn.View {
	const dim = 117
	d := nn.NewData(dim, 2)
	x := make([]float64, dim)
	for range n {
		clear(x)
		off := 0
		for a := range 22 {
			k := 5
			if a >= 15 {
				k = 6
			}
			x[off+rng.IntN(k)] = 1
			off += k
		}
		arm := rng.IntN(2)
		y := 0.0
		if arm == 0 {
			y = 5
			if x[0] == 1 && rng.IntN(2) == 0 {
				y = -35
			}
		}
		d.Append(x, arm, y)
	}
	return d.View()
}

// paperModel is the network of Havasi et al. (2021) Section 4.3 on 2,000
// rows: 117 inputs, two hidden layers of 100 ReLU units, 2 outputs, a
// standard normal prior, learned noise.
func paperModel(est nn.Estimator) (*nn.Likelihood, *posterior.MeanField) {
	rng := rand.New(rand.NewPCG(1, 2))
	arch := nn.NewArch(117, []int{100, 100}, 2)
	view := banditData(2000, rng)
	lik := nn.NewLikelihood(arch, view, nn.Options{Estimator: est, LearnNoise: true, Standardization: nn.FitStandardization(view)})
	prior := make([]float64, arch.NumParams())
	for i := range prior {
		prior[i] = 1
	}
	q := posterior.NewMeanField(arch.NumParams(), 1, prior, 0.01)
	arch.InitHe(q.Mu, rng)
	return lik, q
}

// engines names the trainer's two paths for the benchmarks; the fast
// engine's name ends with the kernel level in use (REFINERY_KERN).
var engines = []struct {
	name      string
	reference bool
}{{"reference", true}, {"fast-" + kern.Current().String(), false}}

// BenchmarkTrainerStep is one ELBO iteration of the trainer (minibatch of
// 64, forward, backward, KL gradient, Adam) on the paper's bandit network,
// per estimator on the float64 reference path and on the fast engine.
// BenchmarkTrainerStepBound is BenchmarkTrainerStep's local
// reparameterization under each bound (Tomczak et al. 2021, Eqs. 9 and 10: a
// per-parameter pre-pass for the learned prior).
func BenchmarkTrainerStepBound(b *testing.B) {
	for _, bound := range []posterior.Bound{posterior.BoundELBO, posterior.BoundCollapsedMean, posterior.BoundCollapsedMeanVar} {
		for _, eng := range engines {
			b.Run(bound.String()+"/"+eng.name, func(b *testing.B) {
				benchTrainerRun(b, nn.LocalReparam, posterior.TrainConfig{Reference: eng.reference, Bound: bound})
			})
		}
	}
}

// BenchmarkTrainerStepOptimizer: one training iteration of the paper's
// network under each optimizer (local reparameterization, the ELBO).
func BenchmarkTrainerStepOptimizer(b *testing.B) {
	for _, o := range []posterior.Optimizer{posterior.OptimizerAdam, posterior.OptimizerNGVI} {
		for _, eng := range engines {
			b.Run(o.String()+"/"+eng.name, func(b *testing.B) {
				benchTrainerRun(b, nn.LocalReparam, posterior.TrainConfig{Reference: eng.reference, Optimizer: o})
			})
		}
	}
}

func BenchmarkTrainerStep(b *testing.B) {
	for _, est := range []nn.Estimator{nn.LocalReparam, nn.WeightReparam, nn.Deterministic, nn.RIS} {
		for _, eng := range engines {
			b.Run(est.String()+"/"+eng.name, func(b *testing.B) {
				benchTrainerRun(b, est, posterior.TrainConfig{Reference: eng.reference})
			})
		}
	}
}

// benchTrainerRun times b.N training iterations of the paper's network
// under est and cfg: one Run, which loads q into the engine once and
// evaluates the KL twice, as training does. With a small b.N those
// one-time costs dominate ns/op (about 2 ms at the default -benchtime
// against 0.16 ms at -benchtime 500x for LocalReparam/fast).
func benchTrainerRun(b *testing.B, est nn.Estimator, cfg posterior.TrainConfig) {
	lik, q := paperModel(est)
	tr, err := posterior.NewTrainer(lik, cfg)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpustat.Measure(func() {
		if _, err := tr.Run(context.Background(), q, b.N, rng); err != nil {
			b.Fatal(err)
		}
	})
	reportCPU(b, cpu, b.N, 1e-3, "cpu-us/op")
}

// reportCPU reports the CPU time cpu (cpustat.Measure) per each of n
// units in the given unit (1e-3 for us, 1 for ms) under name, where
// thread CPU time can be read. On a machine shared with other work the
// wall-clock ns/op grows with the load; the CPU time much less.
func reportCPU(b *testing.B, cpu time.Duration, n int, unit float64, name string) {
	if cpu > 0 && n > 0 {
		b.ReportMetric(cpu.Seconds()*1e3/unit/float64(n), name)
	}
}

// trainedPaperModel is paperModel's posterior after 500 iterations on the
// reference path, the q0 of the refinement benchmarks.
func trainedPaperModel(b *testing.B) (*nn.Likelihood, *posterior.MeanField) {
	lik, q := paperModel(nn.LocalReparam)
	tr, err := posterior.NewTrainer(lik, posterior.TrainConfig{Reference: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tr.Run(context.Background(), q, 500, rand.New(rand.NewPCG(5, 6))); err != nil {
		b.Fatal(err)
	}
	return lik, q
}

// paperRefine is the refinement of the paper's bandit run (Havasi et al.
// 2021, Section 4.3: K = 2, fractions 0.7 / 0.3, 500 conditional
// iterations, batch 64).
func paperRefine(reference bool) posterior.RefineConfig {
	return posterior.RefineConfig{Fractions: []float64{0.7, 0.3}, Iterations: 500, Reference: reference}
}

// BenchmarkRefine is one refined sample of the paper's bandit network
// from a mean-field posterior trained for 500 iterations on 2,000 rows, on
// each engine.
//
//	go test -run '^$' -bench BenchmarkRefine -benchtime 10x ./posterior/
func BenchmarkRefine(b *testing.B) {
	lik, q := trainedPaperModel(b)
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			ref, err := posterior.NewRefiner(lik, paperRefine(eng.reference))
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(7, 8))
			w := make([]float64, lik.NumParams())
			b.ReportAllocs()
			cpu := cpustat.Measure(func() {
				for b.Loop() {
					if _, _, err := ref.Refine(context.Background(), w, q, rng); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/sample")
			reportCPU(b, cpu, b.N, 1, "cpu-ms/sample")
		})
	}
}

// BenchmarkRefineTwoWorkers refines on two goroutines at once, each with
// its own Refiner on the shared q0 and likelihood (one sample per core, as
// the service's refinement pool runs), b.N samples each; it reports the
// samples per second of the pair. Its allocations are the two goroutines'
// and rand.Rand's, once per run, not the refiners'.
func BenchmarkRefineTwoWorkers(b *testing.B) {
	lik, q := trainedPaperModel(b)
	for _, eng := range engines {
		b.Run(eng.name, func(b *testing.B) {
			const workers = 2
			refs := make([]*posterior.Refiner, workers)
			dsts := make([][]float64, workers)
			for w := range refs {
				var err error
				if refs[w], err = posterior.NewRefiner(lik, paperRefine(eng.reference)); err != nil {
					b.Fatal(err)
				}
				dsts[w] = make([]float64, lik.NumParams())
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			cpus := make([]time.Duration, workers)
			for w, ref := range refs {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 9))
					dst := dsts[w]
					cpus[w] = cpustat.Measure(func() {
						for range b.N {
							if _, _, err := ref.Refine(context.Background(), dst, q, rng); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			}
			wg.Wait()
			b.ReportMetric(float64(workers*b.N)/b.Elapsed().Seconds(), "samples/s")
			reportCPU(b, cpus[0]+cpus[1], workers*b.N, 1, "cpu-ms/sample")
		})
	}
}
