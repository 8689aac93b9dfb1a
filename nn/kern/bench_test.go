package kern

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/refinery-bandits/refinery/internal/cpustat"
)

// benchLevels runs f as a sub-benchmark per available level and reports,
// besides the wall-clock ns/op, the CPU time of f's thread per op
// (cpustat.Measure): on a machine shared with other work, the first grows
// with the load and the second much less.
func benchLevels(b *testing.B, f func(b *testing.B)) {
	runLevels(b, Portable, func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpustat.Measure(func() { f(b) })
		if cpu > 0 {
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	})
}

// reportFlops reports GFLOP/s for flops floating-point operations per
// iteration.
func reportFlops(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkSgemm runs the engine's products (batch 64, the paper's
// 2x100 network): NN is C += A·B with A row-major, TN the weight gradient
// C += Xᵀ·G with the transposed operand given by strides.
func BenchmarkSgemm(b *testing.B) {
	for _, sh := range []struct {
		m, n, k int
		trans   bool
	}{
		{64, 100, 100, false}, {100, 100, 64, true}, {64, 2, 100, false},
		{100, 2, 64, true}, {64, 100, 2, false}, {64, 100, 117, false},
	} {
		name := fmt.Sprintf("NN_%dx%dx%d", sh.m, sh.n, sh.k)
		rsA, csA := sh.k, 1
		if sh.trans {
			name = fmt.Sprintf("TN_%dx%dx%d", sh.m, sh.n, sh.k)
			rsA, csA = 1, sh.m
		}
		rng := rand.New(rand.NewPCG(1, 2))
		a, bb, c := randSlice(rng, sh.m*sh.k), randSlice(rng, sh.k*sh.n), randSlice(rng, sh.m*sh.n)
		b.Run(name, func(b *testing.B) {
			benchLevels(b, func(b *testing.B) {
				for b.Loop() {
					Sgemm(sh.m, sh.n, sh.k, a, rsA, csA, bb, sh.n, c, sh.n)
				}
				reportFlops(b, 2*float64(sh.m*sh.n*sh.k))
			})
		})
	}
}

// BenchmarkElementwise runs each elementwise kernel on 6,400 elements
// (a batch of 64 by 100 units); GFLOP/s counts the arithmetic of the
// portable formula.
func BenchmarkElementwise(b *testing.B) {
	const n = 6400
	rng := rand.New(rand.NewPCG(3, 4))
	x, y, z := randSlice(rng, n), randSlice(rng, n), randSlice(rng, n)
	v := randSlice(rng, n)
	Square(v, v)
	for _, k := range []struct {
		name  string
		flops float64
		run   func()
	}{
		{"Saxpy", 2, func() { Saxpy(1e-9, x, y) }},
		{"Sdot", 2, func() { Sdot(x, y) }},
		{"Mul", 2, func() { Mul(z, x, y, 2) }},
		{"AddMul", 2, func() { AddMul(z, x, y, v) }},
		{"Relu", 1, func() { Relu(z) }},
		{"Square", 1, func() { Square(z, x) }},
		{"LRTForward", 3, func() { LRTForward(z, v, x) }},
		{"LRTBackward", 3, func() { LRTBackward(z, y, v) }},
		{"ReluBackward", 3, func() { ReluBackward(z, v, y) }},
		{"ReluMask", 1, func() { ReluMask(z, v) }},
		{"Softplus", 0, func() { Softplus(z, y, x) }},
	} {
		b.Run(k.name, func(b *testing.B) {
			benchLevels(b, func(b *testing.B) {
				for b.Loop() {
					k.run()
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/n, "ns/elem")
				if k.flops > 0 {
					reportFlops(b, k.flops*n)
				}
			})
		})
	}
}

// BenchmarkAdam runs the fused per-parameter passes over the paper's
// network: 117*100 + 100*100 + 100*2 weights and 202 biases.
func BenchmarkAdam(b *testing.B) {
	const n = 117*100 + 100 + 100*100 + 100 + 100*2 + 2
	rng := rand.New(rand.NewPCG(5, 6))
	mf := adamState(rng, n, false)
	b.Run("MeanField", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			s := cloneStep(mf)
			for b.Loop() {
				MeanFieldAdam(s, n)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/n, "ns/elem")
		})
	})
	b.Run("Point", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			s := cloneStep(mf)
			p := &PointStep{Mu: s.Mu, DMu: s.DMu, PriorPrec: s.PriorPrec, MMu: s.MMu, VMu: s.VMu, Scale: s.Scale, Adam: s.Adam}
			for b.Loop() {
				PointAdam(p, n)
			}
			b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/n, "ns/elem")
		})
	})
}

// BenchmarkTranspose transposes the 100x100 hidden weights (the engine's
// canonical copy of its weights, twice an LRT iteration).
func BenchmarkTranspose(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	src, dst := randSlice(rng, 100*100), make([]float32, 100*100)
	benchLevels(b, func(b *testing.B) {
		for b.Loop() {
			Transpose(dst, src, 100, 100)
		}
		b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/1e4, "ns/elem")
	})
}
