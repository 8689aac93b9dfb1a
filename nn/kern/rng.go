package kern

import (
	"math"
	"math/bits"
)

// RNG is a fast source of float32 standard normal numbers for the
// engine's noise draws: eight xoshiro256++ generators (Blackman & Vigna,
// "Scrambled linear pseudorandom number generators", ACM TOMS 2021)
// seeded by splitmix64, whose 32-bit words feed the Box-Muller transform
// (Box & Muller 1958) in float32. Every level computes the same numbers:
// the SIMD transform rounds the same operations in the same order as the
// portable code, so a seed names one sequence on every machine.
//
// The uniforms have 23 bits, so |z| <= sqrt(2 log 2^24) = 5.77: the
// normal's tails beyond are cut (probability 8e-9 a draw). An RNG is not
// safe for concurrent use; give each goroutine its own.
type RNG struct {
	state [4][rngLanes]uint64 // word i of lane l's xoshiro256++ state
	buf   [rngBlock]float32   // a block drawn for a partial tail
}

const (
	rngLanes = 8  // generators, one per 64-bit vector lane
	rngBlock = 32 // normals per block: two steps of the eight generators
)

// NewRNG returns an RNG seeded with seed.
func NewRNG(seed uint64) *RNG {
	r := new(RNG)
	r.Seed(seed)
	return r
}

// Seed resets r to the sequence named by seed: the 32 words of state are
// consecutive outputs of splitmix64 (Steele, Lea & Flood 2014) from seed,
// never all zero for a generator.
func (r *RNG) Seed(seed uint64) {
	for l := range rngLanes {
		for i := range 4 {
			seed += 0x9e3779b97f4a7c15
			z := seed
			z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
			z = (z ^ z>>27) * 0x94d049bb133111eb
			r.state[i][l] = z ^ z>>31
		}
	}
}

// Normals fills dst with independent standard normal numbers. Each call
// draws whole blocks of 32 and discards the rest of the last, so the
// numbers depend only on the seed and the lengths of the calls.
func (r *RNG) Normals(dst []float32) {
	full := len(dst) / rngBlock
	if full > 0 {
		cur.rngFill(full, dst, &r.state)
		cur.normXf(full, dst)
	}
	if tail := dst[full*rngBlock:]; len(tail) > 0 {
		cur.rngFill(1, r.buf[:], &r.state)
		cur.normXf(1, r.buf[:])
		copy(tail, r.buf[:])
	}
}

// rngFillGo writes blocks*32 raw words (as float32 bit patterns) into dst:
// per block, two steps of the eight generators, each 64-bit output split
// into its low and high 32-bit words.
func rngFillGo(blocks int, dst []float32, st *[4][rngLanes]uint64) {
	for b := range blocks {
		for half := range 2 {
			out := dst[b*rngBlock+half*16:]
			for l := range rngLanes {
				s0, s1, s2, s3 := st[0][l], st[1][l], st[2][l], st[3][l]
				x := bits.RotateLeft64(s0+s3, 23) + s0
				out[2*l] = math.Float32frombits(uint32(x))
				out[2*l+1] = math.Float32frombits(uint32(x >> 32))
				t := s1 << 17
				s2 ^= s0
				s3 ^= s1
				s1 ^= s2
				s0 ^= s3
				s2 ^= t
				st[0][l], st[1][l], st[2][l], st[3][l] = s0, s1, s2, bits.RotateLeft64(s3, 45)
			}
		}
	}
}

// Cephes sinf and cosf on [-pi/4, pi/4], logf on [sqrt(1/2)-1, sqrt(2)-1]
// (S. L. Moshier, Cephes Math Library 2.2); internal/asmgen uses the same.
var (
	sinPoly = [...]float32{-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1}
	cosPoly = [...]float32{2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2}
	logPoly = [...]float32{7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1,
		1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}
)

// horner evaluates p at x, rounding each product (no fused multiply-add).
func horner(p []float32, x float32) float32 {
	y := p[0]
	for _, c := range p[1:] {
		y = float32(y*x) + c
	}
	return y
}

// normalTransformGo turns each block of 32 raw words in dst into 32
// standard normals: words j and 16+j (j < 16) make the pair
//
//	u = (a>>9 + 1/2) 2^-23,  f = (b>>9 + 1/2) 2^-23 - 1/2,
//	R = sqrt(-2 log u),  theta = f pi/2,
//	(z_j, z_16+j) = R (cos theta, sin theta),
//
// swapped when bit 0 of b is set and negated by bits 1 and 2: the eight
// symmetries of the square map theta, uniform on (-pi/4, pi/4), onto the
// whole circle. Every operation is rounded to float32 in the order the
// SIMD kernels use.
func normalTransformGo(blocks int, dst []float32) {
	const (
		lnC1, lnC2 = 0.693359375, -2.12194440e-4 // ln 2 = lnC1 + lnC2 (Cody-Waite)
		sqrtHalf   = 0.70710677
		piO2       = float32(math.Pi / 2)
	)
	for blk := range blocks {
		d := dst[blk*rngBlock : (blk+1)*rngBlock]
		for j := range 16 {
			a, b := math.Float32bits(d[j]), math.Float32bits(d[16+j])

			u := (float32(a>>9) + 0.5) * 0x1p-23
			ub := math.Float32bits(u)
			e := int32(ub>>23) - 126
			m := math.Float32frombits(ub&0x007fffff | 0x3f000000)
			x := m
			if m-sqrtHalf < 0 {
				e--
				x += m
			}
			x--
			ef := float32(e)
			z := float32(x * x)
			y := float32(float32(horner(logPoly[:], x)*x) * z)
			y += float32(ef * lnC2)
			y -= float32(0.5 * z)
			y += x
			y += float32(ef * lnC1)
			r := float32(math.Sqrt(float64(-2 * y)))

			th := float32((float32((float32(b>>9)+0.5)*0x1p-23) - 0.5) * piO2)
			zz := float32(th * th)
			sn := float32(float32(horner(sinPoly[:], zz)*zz)*th) + th
			cs := float32(float32(horner(cosPoly[:], zz)*zz)*zz) - float32(0.5*zz)
			cs++
			if b&1 != 0 {
				sn, cs = cs, sn
			}
			p := math.Float32bits(r*cs) ^ (b<<30)&(1<<31)
			q := math.Float32bits(r*sn) ^ (b<<29)&(1<<31)
			d[j], d[16+j] = math.Float32frombits(p), math.Float32frombits(q)
		}
	}
}
