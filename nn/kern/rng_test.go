package kern

import (
	"math"
	"slices"
	"testing"
)

// TestNormalsSameOnEveryLevel checks that a seed names one sequence: the
// SIMD transforms round like the portable one, so the numbers are equal,
// whatever the lengths of the calls.
func TestNormalsSameOnEveryLevel(t *testing.T) {
	draw := func() []float32 {
		r := NewRNG(42)
		var all []float32
		for _, n := range sizes {
			d := make([]float32, n)
			r.Normals(d)
			all = append(all, d...)
		}
		return all
	}
	var want []float32
	portableDo(func() { want = draw() })
	simdLevels(t, func(t *testing.T) {
		got := draw()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("draw %d = %g, portable %g", i, got[i], want[i])
			}
		}
	})
}

// TestNormalsSeeds checks that Seed restarts the sequence and that
// different seeds give different sequences.
func TestNormalsSeeds(t *testing.T) {
	a, b := make([]float32, 100), make([]float32, 100)
	r := NewRNG(1)
	r.Normals(a)
	r.Seed(1)
	r.Normals(b)
	if !slices.Equal(a, b) {
		t.Error("Seed(1) did not restart the sequence")
	}
	NewRNG(2).Normals(b)
	if slices.Equal(a, b) {
		t.Error("seeds 1 and 2 gave the same numbers")
	}
}

// normalCDF is Φ.
func normalCDF(x float64) float64 { return 0.5 * math.Erfc(-x/math.Sqrt2) }

// TestNormalsDistribution draws 2^21 numbers (seeded) and checks, at
// every level:
//   - the first four moments: mean 0, variance 1, skewness 0, kurtosis 3,
//     each within 5 standard errors (sqrt(1/n), sqrt(2/n), sqrt(6/n),
//     sqrt(96/n));
//   - the Kolmogorov-Smirnov distance to Φ below 1.95/sqrt(n), the
//     0.001 critical value;
//   - the frequencies of |z| > 1, 2, 3, 4 within 5 binomial standard
//     errors of 2(1 - Φ(t));
//   - the correlation of the two members of each Box-Muller pair, and of
//     consecutive numbers, within 5/sqrt(pairs).
func TestNormalsDistribution(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		const n = 1 << 21
		z := make([]float32, n)
		NewRNG(7).Normals(z)
		var m1, m2, m3, m4 float64
		for _, v := range z {
			x := float64(v)
			m1 += x
			m2 += x * x
			m3 += x * x * x
			m4 += x * x * x * x
		}
		m1, m2, m3, m4 = m1/n, m2/n, m3/n, m4/n
		se := func(v float64) float64 { return 5 * math.Sqrt(v/n) }
		for _, c := range []struct {
			name      string
			got, want float64
			tol       float64
		}{
			{"mean", m1, 0, se(1)}, {"E z^2", m2, 1, se(2)}, {"E z^3", m3, 0, se(15)}, {"E z^4", m4, 3, se(96)},
		} {
			if math.Abs(c.got-c.want) > c.tol {
				t.Errorf("%s = %g, want %g ± %g", c.name, c.got, c.want, c.tol)
			}
		}

		s := make([]float64, n)
		for i, v := range z {
			s[i] = float64(v)
		}
		slices.Sort(s)
		var ks float64
		for i, x := range s {
			f := normalCDF(x)
			ks = max(ks, math.Abs(f-float64(i)/n), math.Abs(float64(i+1)/n-f))
		}
		if crit := 1.95 / math.Sqrt(n); ks > crit {
			t.Errorf("KS distance to Φ = %g, want < %g", ks, crit)
		}

		for _, th := range []float64{1, 2, 3, 4} {
			p := 2 * (1 - normalCDF(th))
			i := sort64(s, -th)
			j := sort64(s, th)
			freq := float64(i+n-j) / n
			if tol := 5 * math.Sqrt(p*(1-p)/n); math.Abs(freq-p) > tol {
				t.Errorf("P(|z| > %g) = %g, want %g ± %g", th, freq, p, tol)
			}
		}

		var pair, next float64
		for b := 0; b < n; b += rngBlock {
			for j := range 16 {
				pair += float64(z[b+j]) * float64(z[b+16+j])
			}
		}
		for i := 1; i < n; i++ {
			next += float64(z[i-1]) * float64(z[i])
		}
		if tol := 5 / math.Sqrt(n/2); math.Abs(pair/(n/2)) > tol {
			t.Errorf("pair correlation %g, want 0 ± %g", pair/(n/2), tol)
		}
		if tol := 5 / math.Sqrt(n); math.Abs(next/n) > tol {
			t.Errorf("lag-1 correlation %g, want 0 ± %g", next/n, tol)
		}
	})
}

// sort64 returns the number of elements of the sorted s below x.
func sort64(s []float64, x float64) int {
	i, _ := slices.BinarySearch(s, x)
	return i
}

func BenchmarkNormals(b *testing.B) {
	const n = 12928 // the engine's draws per LRT iteration
	dst := make([]float32, n)
	benchLevels(b, func(b *testing.B) {
		r := NewRNG(1)
		for b.Loop() {
			r.Normals(dst)
		}
		b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/n, "ns/normal")
	})
}
