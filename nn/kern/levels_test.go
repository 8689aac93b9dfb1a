package kern

import (
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// The tests in this file run every kernel at every level this CPU supports
// (AVX-512 CPUs also test AVX2 by forcing the level) against the portable
// kernel and, where rounding differs, against float64 arithmetic.

// sizes are the vector lengths tested: every tail length around the
// 8- and 16-lane vectors, and the engine's sizes.
var sizes = []int{0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 117, 1000}

const eps32 = 1.0 / (1 << 23)

// simdLevels runs f once per non-portable level available.
func simdLevels(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	runLevels(t, AVX2, f)
}

// ulps is the distance between a and b in float32 units in the last place
// (0 for equal values, +0 and -0 included).
func ulps(a, b float32) int64 {
	key := func(x float32) int64 {
		i := int64(math.Float32bits(x))
		if i&(1<<31) != 0 {
			return -(i &^ (1 << 31))
		}
		return i
	}
	d := key(a) - key(b)
	if d < 0 {
		return -d
	}
	return d
}

// withOffset returns a slice of n values at a random offset into a larger
// random array, so that kernels see unaligned bases.
func withOffset(rng *rand.Rand, n int) []float32 {
	off := rng.IntN(16)
	return randSlice(rng, n+off+rng.IntN(4))[off : off+n]
}

// portableDo runs f at the portable level.
func portableDo(f func()) {
	prev := Use(Portable)
	defer Use(prev)
	f()
}

func TestSgemmLevelsAgainstFloat64(t *testing.T) {
	dims := []int{1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 100, 117}
	simdLevels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		check := func(m, n, k int, transA bool) {
			t.Helper()
			ldb, ldc := n+rng.IntN(5), n+rng.IntN(5)
			rsA, csA := k+rng.IntN(3), 1
			lenA := (m-1)*rsA + k
			if transA {
				rsA, csA = 1, m+rng.IntN(3)
				lenA = m + (k-1)*csA
			}
			a := withOffset(rng, lenA)
			b := withOffset(rng, (k-1)*ldb+n)
			c := withOffset(rng, (m-1)*ldc+n)
			want := make([]float64, len(c))
			bound := make([]float64, len(c))
			for i := range c {
				want[i] = float64(c[i])
			}
			for i := range m {
				for j := range n {
					s, ab := float64(c[i*ldc+j]), math.Abs(float64(c[i*ldc+j]))
					for p := range k {
						x := float64(a[i*rsA+p*csA]) * float64(b[p*ldb+j])
						s += x
						ab += math.Abs(x)
					}
					want[i*ldc+j] = s
					// Any order of k fused or unfused float32 additions
					// errs by at most k*eps32*sum|terms| (Higham 2002, Sec. 3.1).
					bound[i*ldc+j] = float64(k+1) * eps32 * ab
				}
			}
			Sgemm(m, n, k, a, rsA, csA, b, ldb, c, ldc)
			for i, w := range want {
				if math.Abs(float64(c[i])-w) > bound[i] {
					t.Fatalf("m,n,k=%d,%d,%d transA=%v: C[%d] = %g, want %g ± %g", m, n, k, transA, i, c[i], w, bound[i])
				}
			}
		}
		for _, m := range dims {
			for _, n := range dims {
				k := dims[rng.IntN(len(dims))]
				check(m, n, k, false)
				check(m, n, k, true)
			}
		}
		for _, sz := range [][3]int{{64, 100, 100}, {64, 2, 100}, {100, 2, 64}, {100, 100, 64}, {3, 1000, 5}, {1000, 3, 2}, {2, 5, 1000},
			// Narrow C (n <= 4): several 256-deep slices of the NN
			// kernels, several row chunks of the TN kernels.
			{70, 3, 600}, {9, 4, 513}, {300, 4, 20}, {257, 1, 3}, {16, 2, 16}} {
			check(sz[0], sz[1], sz[2], false)
			check(sz[0], sz[1], sz[2], true)
		}
	})
}

// TestSgemmZeroSize checks that empty products leave C alone at every
// level, also when the slices are empty.
func TestSgemmZeroSize(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		c := []float32{1, 2}
		Sgemm(0, 2, 3, nil, 0, 0, nil, 0, c, 2)
		Sgemm(1, 2, 0, nil, 0, 0, nil, 0, c, 2)
		Sgemm(1, 0, 3, nil, 0, 0, nil, 0, nil, 0)
		if c[0] != 1 || c[1] != 2 {
			t.Errorf("C = %v after empty products, want [1 2]", c)
		}
	})
}

// TestExactKernels checks the kernels that round like the portable code
// (or not at all) for equality with it.
func TestExactKernels(t *testing.T) {
	simdLevels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range sizes {
			x, y := withOffset(rng, n), withOffset(rng, n)
			z := withOffset(rng, n)
			// Some exact zeros and a NaN exercise the > 0 tests.
			if n > 4 {
				x[1], y[2], z[3] = 0, 0, 0
				x[4] = float32(math.NaN())
			}
			type kernel struct {
				name string
				run  func(a, b, c []float32)
				out  []int // which of a, b, c are written
			}
			for _, k := range []kernel{
				{"Relu", func(a, _, _ []float32) { Relu(a) }, []int{0}},
				{"Square", func(a, b, _ []float32) { Square(a, b) }, []int{0}},
				{"Square in place", func(a, _, _ []float32) { Square(a, a) }, []int{0}},
				{"ReluMask", func(a, b, _ []float32) { ReluMask(a, b) }, []int{0}},
				{"LRTBackward", func(a, b, c []float32) { LRTBackward(a, b, c) }, []int{0}},
				{"LRTForward sqrt", func(a, b, c []float32) {
					for i := range b {
						b[i] = float32(math.Abs(float64(b[i])))
					}
					LRTForward(a, b, c)
				}, []int{1}},
			} {
				args := func() [3][]float32 {
					return [3][]float32{append([]float32(nil), x...), append([]float32(nil), y...), append([]float32(nil), z...)}
				}
				want, got := args(), args()
				portableDo(func() { k.run(want[0], want[1], want[2]) })
				k.run(got[0], got[1], got[2])
				for _, o := range k.out {
					for i := range want[o] {
						w, g := want[o][i], got[o][i]
						if !(w == g || w != w && g != g) {
							t.Fatalf("%s n=%d: out %d [%d] = %g, want %g", k.name, n, o, i, g, w)
						}
					}
				}
			}
		}
	})
}

// TestUnfusedKernels checks Saxpy, ReluBackward, LRTForward, Mul and
// AddMul, which round operation by operation like the portable code, for
// equality with it (and the last two against float64).
func TestUnfusedKernels(t *testing.T) {
	simdLevels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, n := range sizes {
			x, y, z := withOffset(rng, n), withOffset(rng, n), withOffset(rng, n)
			alpha := float32(rng.NormFloat64())
			close := func(name string, got, want []float32) {
				t.Helper()
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("%s n=%d: [%d] = %g, want %g", name, n, i, got[i], want[i])
					}
				}
			}

			yw, yg := append([]float32(nil), y...), append([]float32(nil), y...)
			portableDo(func() { Saxpy(alpha, x, yw) })
			Saxpy(alpha, x, yg)
			close("Saxpy", yg, yw)

			a := append([]float32(nil), x...)
			Relu(a)
			gw, gg := append([]float32(nil), y...), append([]float32(nil), y...)
			portableDo(func() { ReluBackward(gw, a, z) })
			ReluBackward(gg, a, z)
			close("ReluBackward", gg, gw)

			v := append([]float32(nil), x...)
			Square(v, v)
			zw, zg := append([]float32(nil), y...), append([]float32(nil), y...)
			vw, vg := append([]float32(nil), v...), append([]float32(nil), v...)
			portableDo(func() { LRTForward(zw, vw, z) })
			LRTForward(zg, vg, z)
			close("LRTForward", zg, zw)

			for _, alpha := range []float32{1, 2, float32(rng.NormFloat64())} {
				mw, mg := make([]float32, n), make([]float32, n)
				portableDo(func() { Mul(mw, x, y, alpha) })
				Mul(mg, x, y, alpha)
				close("Mul", mg, mw)
				in := append([]float32(nil), y...)
				Mul(in, x, in, alpha)
				close("Mul in place", in, mw)
				if alpha == 2 {
					// 2xy is rounded once: the nearest float32 to the
					// float64 product (exact in float64).
					for i := range x {
						if w := float32(2 * float64(x[i]) * float64(y[i])); mg[i] != w {
							t.Fatalf("Mul(2) n=%d: [%d] = %g, want %g", n, i, mg[i], w)
						}
					}
				}
			}

			aw, ag := make([]float32, n), append([]float32(nil), z...)
			portableDo(func() { AddMul(aw, z, x, y) })
			AddMul(ag, ag, x, y)
			close("AddMul", ag, aw)
			for i := range aw {
				// Two roundings: within eps32 (|z| + |xy|) of the exact value.
				exact := float64(z[i]) + float64(x[i])*float64(y[i])
				if math.Abs(float64(aw[i])-exact) > eps32*(math.Abs(float64(z[i]))+math.Abs(float64(x[i])*float64(y[i]))) {
					t.Fatalf("AddMul n=%d: [%d] = %g, want %g", n, i, aw[i], exact)
				}
			}
		}
	})
}

// TestSdotAgainstFloat64: a float32 dot product in any order errs by at
// most n*eps32*sum|x_i y_i|.
func TestSdotAgainstFloat64(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 10))
		for _, n := range sizes {
			x, y := withOffset(rng, n), withOffset(rng, n+rng.IntN(3))
			var want, ab float64
			for i := range x {
				p := float64(x[i]) * float64(y[i])
				want += p
				ab += math.Abs(p)
			}
			if got := Sdot(x, y); math.Abs(float64(got)-want) > float64(n)*eps32*ab {
				t.Errorf("Sdot n=%d = %g, want %g ± %g", n, got, want, float64(n)*eps32*ab)
			}
		}
	})
}

// softplus64 is softplus and sigmoid in float64, the truth for the ulp
// bounds.
func softplus64(r float32) (float64, float64) {
	x := float64(r)
	e := math.Exp(-math.Abs(x))
	if x > 0 {
		return x + math.Log1p(e), 1 / (1 + e)
	}
	return math.Log1p(e), e / (1 + e)
}

// ulps64 is the distance of got from the float64 value want in float32
// ulps at want (2^-149 in the subnormal range).
func ulps64(got float32, want float64) float64 {
	if want == 0 {
		return math.Abs(float64(got)) / math.Ldexp(1, -149)
	}
	if math.IsInf(want, 0) {
		if float64(got) == want {
			return 0
		}
		return math.Inf(1)
	}
	_, e := math.Frexp(want)
	ulp := math.Ldexp(1, max(e-24, -149))
	return math.Abs(float64(got)-want) / ulp
}

// softplusMaxUlps bounds the error of the vectorized Softplus (Cephes
// expf and logf in float32, see kern_amd64.go): measured 1.74 ulps on
// sigma and 2.50 on sigmoid over the grid of TestSoftplusUlps (the
// portable path, float64 rounded once, has 0.5).
const softplusMaxUlps = 3

// TestSoftplusUlps measures the error of Softplus against float64 on a
// grid of 2^20 points over [-110, 110] (subnormal and zero results
// included) and on the tested sizes at random offsets.
func TestSoftplusUlps(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		const n = 1 << 20
		rho := make([]float32, n)
		for i := range rho {
			rho[i] = float32(-110 + 220*float64(i)/(n-1))
		}
		rng := rand.New(rand.NewPCG(11, 12))
		for _, sz := range sizes {
			rho = append(rho, withOffset(rng, sz)...)
		}
		rho = append(rho, 0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 88.7, -88.7, 1e30, -1e30,
			float32(math.Inf(1)), float32(math.Inf(-1)))
		sg, sm := make([]float32, len(rho)), make([]float32, len(rho))
		Softplus(sg, sm, rho)
		var worstS, worstM float64
		for i, r := range rho {
			ws, wm := softplus64(r)
			us, um := ulps64(sg[i], ws), ulps64(sm[i], wm)
			if us > softplusMaxUlps || um > softplusMaxUlps {
				t.Fatalf("Softplus(%g) = %g, %g; want %g, %g (%.1f, %.1f ulps)", r, sg[i], sm[i], ws, wm, us, um)
			}
			worstS, worstM = max(worstS, us), max(worstM, um)
		}
		t.Logf("max error: sigma %.2f ulps, sigmoid %.2f ulps", worstS, worstM)
	})
}

// adamState builds a random MeanFieldStep of n parameters, realistic in
// scale: rho in [-8, 2], positive second moments.
func adamState(rng *rand.Rand, n int, withMean bool) *MeanFieldStep {
	s := &MeanFieldStep{
		Mu: withOffset(rng, n), Rho: withOffset(rng, n),
		Sigma: make([]float32, n), Sigmoid: make([]float32, n),
		DMu: withOffset(rng, n), DSigma: withOffset(rng, n),
		PriorPrec: withOffset(rng, n),
		MMu:       withOffset(rng, n), VMu: withOffset(rng, n),
		MRho: withOffset(rng, n), VRho: withOffset(rng, n),
		Scale: 130,
		Adam:  AdamCoef{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, C1: 1 / (1 - 0.9*0.9*0.9), C2: 1 / (1 - 0.999*0.999*0.999), Eps: 1e-8},
	}
	for i := range n {
		s.Rho[i] = -3 + 2.5*s.Rho[i]
		s.PriorPrec[i] = 1 + float32(math.Abs(float64(s.PriorPrec[i])))
		s.VMu[i] *= s.VMu[i]
		s.VRho[i] *= s.VRho[i]
	}
	if withMean {
		s.PriorMean = withOffset(rng, n)
	}
	portableDo(func() { Softplus(s.Sigma, s.Sigmoid, s.Rho) })
	return s
}

func cloneStep(s *MeanFieldStep) *MeanFieldStep {
	c := *s
	for _, p := range []*[]float32{&c.Mu, &c.Rho, &c.Sigma, &c.Sigmoid, &c.DMu, &c.DSigma, &c.PriorMean, &c.PriorPrec, &c.MMu, &c.VMu, &c.MRho, &c.VRho} {
		if *p != nil {
			*p = append([]float32(nil), *p...)
		}
	}
	return &c
}

// Tolerances of the Adam kernels against the portable ones: the
// parameters and moments are rounded operation by operation in the same
// order, hence equal; Sigma and Sigmoid come from the vectorized softplus
// of the same rho.
const (
	adamMaxUlps     = 0
	adamSoftMaxUlps = softplusMaxUlps
)

func TestMeanFieldAdamLevels(t *testing.T) {
	simdLevels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(13, 14))
		for _, n := range sizes {
			for _, withMean := range []bool{false, true} {
				want := adamState(rng, n, withMean)
				for range 3 {
					// Every step starts both paths from the same state: the
					// KL gradient of rho cancels (sigma prec - 1/sigma), so
					// ulp differences of Sigma would grow across steps.
					got := cloneStep(want)
					portableDo(func() { MeanFieldAdam(want, n) })
					MeanFieldAdam(got, n)
					compareSteps(t, n, withMean, got, want)
				}
			}
		}
	})
}

func compareSteps(t *testing.T, n int, withMean bool, got, want *MeanFieldStep) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want []float32
		tol       int64
	}{
		{"Mu", got.Mu, want.Mu, adamMaxUlps}, {"Rho", got.Rho, want.Rho, adamMaxUlps},
		{"MMu", got.MMu, want.MMu, adamMaxUlps}, {"VMu", got.VMu, want.VMu, adamMaxUlps},
		{"MRho", got.MRho, want.MRho, adamMaxUlps}, {"VRho", got.VRho, want.VRho, adamMaxUlps},
		{"Sigma", got.Sigma, want.Sigma, adamSoftMaxUlps}, {"Sigmoid", got.Sigmoid, want.Sigmoid, adamSoftMaxUlps},
	} {
		for i := range n {
			if d := ulps(f.got[i], f.want[i]); d > f.tol {
				t.Fatalf("n=%d mean=%v: %s[%d] = %g, want %g (%d ulps)", n, withMean, f.name, i, f.got[i], f.want[i], d)
			}
		}
	}
}

func TestPointAdamLevels(t *testing.T) {
	simdLevels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(15, 16))
		for _, n := range sizes {
			for _, withMean := range []bool{false, true} {
				mf := adamState(rng, n, withMean)
				want := &PointStep{Mu: mf.Mu, DMu: mf.DMu, PriorMean: mf.PriorMean, PriorPrec: mf.PriorPrec, MMu: mf.MMu, VMu: mf.VMu, Scale: mf.Scale, Adam: mf.Adam}
				for range 3 {
					c := cloneStep(mf)
					got := &PointStep{Mu: c.Mu, DMu: c.DMu, PriorMean: c.PriorMean, PriorPrec: c.PriorPrec, MMu: c.MMu, VMu: c.VMu, Scale: c.Scale, Adam: c.Adam}
					portableDo(func() { PointAdam(want, n) })
					PointAdam(got, n)
					for i := range n {
						for _, f := range [][2]float32{{got.Mu[i], want.Mu[i]}, {got.MMu[i], want.MMu[i]}, {got.VMu[i], want.VMu[i]}} {
							if d := ulps(f[0], f[1]); d > adamMaxUlps {
								t.Fatalf("n=%d mean=%v: [%d] = %g, want %g (%d ulps)", n, withMean, i, f[0], f[1], d)
							}
						}
					}
				}
			}
		}
	})
}

// TestAdamSubnormals checks the flush-to-zero contract of the SIMD Adam
// kernels: subnormal moments and gradients read as zero, which moves
// results by less than 2^-126 from the portable path's, and the caller's
// floating-point mode is restored (a subnormal product survives after).
func TestAdamSubnormals(t *testing.T) {
	simdLevels(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(17, 18))
		const n = 33
		want := adamState(rng, n, false)
		for i := range n {
			want.VMu[i] = 1e-39 // subnormal
			want.MMu[i] = -1e-40
			want.DMu[i] = 1e-42
			want.Mu[i] = 0
		}
		got := cloneStep(want)
		portableDo(func() { MeanFieldAdam(want, n) })
		MeanFieldAdam(got, n)
		const tiny = 0x1p-126
		for i := range n {
			for _, f := range [][2]float32{{got.MMu[i], want.MMu[i]}, {got.VMu[i], want.VMu[i]}} {
				if math.Abs(float64(f[0]-f[1])) > tiny {
					t.Fatalf("[%d] = %g, want %g ± 2^-126", i, f[0], f[1])
				}
			}
			// A moment change below 2^-126 moves mu by at most
			// lr c1 2^-126 / eps.
			muTol := float64(got.Adam.LR*got.Adam.C1) * tiny / float64(got.Adam.Eps)
			if d := ulps(got.Mu[i], want.Mu[i]); d > adamMaxUlps && math.Abs(float64(got.Mu[i]-want.Mu[i])) > muTol {
				t.Fatalf("Mu[%d] = %g, want %g", i, got.Mu[i], want.Mu[i])
			}
		}
		y := []float32{0x1p-70}
		Square(y, y) // 2^-140, subnormal, flushed to 0 only if FTZ leaked
		if y[0] != 0x1p-140 {
			t.Errorf("after MeanFieldAdam, (2^-70)^2 = %g, want 2^-140: MXCSR not restored", y[0])
		}
	})
}

// TestEnvLevel checks REFINERY_KERN: the test binary is re-run with each
// available level forced, and must report it as Current with no
// EnvError; and with a name no CPU runs, which must leave the best level
// in use and be reported by EnvError.
func TestEnvLevel(t *testing.T) {
	const bogus = "avx9000"
	if env := os.Getenv("REFINERY_KERN"); env != "" {
		if env == bogus {
			if EnvError() == nil {
				t.Fatalf("REFINERY_KERN=%s: EnvError() = nil", env)
			}
			for l := Current() + 1; l <= AVX512; l++ {
				if Available(l) {
					t.Fatalf("REFINERY_KERN=%s: Current() = %v, but %v is available", env, Current(), l)
				}
			}
			return
		}
		if Current().String() != env || EnvError() != nil {
			t.Fatalf("REFINERY_KERN=%s: Current() = %v, EnvError() = %v", env, Current(), EnvError())
		}
		return
	}
	names := []string{bogus}
	for _, l := range []Level{Portable, AVX2, AVX512} {
		if Available(l) {
			names = append(names, l.String())
		}
	}
	for _, name := range names {
		cmd := exec.Command(os.Args[0], "-test.run=^(TestEnvLevel|TestSoftplusAgainstFloat64|TestSgemmAgainstFloat64)$", "-test.count=1")
		cmd.Env = append(os.Environ(), "REFINERY_KERN="+name)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("REFINERY_KERN=%s: %v\n%s", name, err, out)
		}
	}
}

// TestUseUnavailable checks that Use refuses a level this CPU lacks.
func TestUseUnavailable(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Use(Level(7)) did not panic")
		}
	}()
	Use(Level(7))
}

// TestTranspose checks Transpose at every level for equality with the
// definition, on all shapes from sizes up to 117 and a few larger ones,
// with the rest of dst untouched.
func TestTranspose(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		var shapes [][2]int
		for _, r := range sizes[:len(sizes)-1] {
			for _, c := range sizes[:len(sizes)-1] {
				shapes = append(shapes, [2]int{r, c})
			}
		}
		shapes = append(shapes, [2]int{1000, 9}, [2]int{8, 1000}, [2]int{300, 200})
		for _, sh := range shapes {
			r, c := sh[0], sh[1]
			src := withOffset(rng, r*c)
			dst := withOffset(rng, r*c+3)
			tail := append([]float32(nil), dst[r*c:]...)
			Transpose(dst, src, r, c)
			for i := range r {
				for j := range c {
					if dst[j*r+i] != src[i*c+j] {
						t.Fatalf("r,c=%d,%d: dst[%d] = %g, want src[%d] = %g", r, c, j*r+i, dst[j*r+i], i*c+j, src[i*c+j])
					}
				}
			}
			for i, v := range tail {
				if dst[r*c+i] != v {
					t.Fatalf("r,c=%d,%d: dst[%d] past r*c changed", r, c, r*c+i)
				}
			}
		}
	})
}
