// Command asmgen generates nn/kern's amd64 assembly (kern_amd64.s) and its
// Go declarations (stubs_amd64.go) with avo. It lives in its own module so
// that avo stays out of Refinery's dependencies; run it through
// `cd nn/kern && go generate`.
//
// Every kernel is generated twice from one description: for AVX-512
// (F, DQ, BW, VL; 16 float32 lanes, opmask tails) and for AVX2+FMA (8 lanes,
// VMASKMOVPS tails). The semantics are those of the portable Go kernels in
// kern.go; the comments there and in kern_amd64.go say where the assembly
// rounds differently.
package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

// isa describes one vector instruction set.
type isa struct {
	name   string // suffix of the generated functions: AVX512 or AVX2
	lanes  int    // float32 lanes per vector
	avx512 bool
}

var (
	avx512 = isa{name: "AVX512", lanes: 16, avx512: true}
	avx2   = isa{name: "AVX2", lanes: 8}
)

func (s isa) vec() VecVirtual {
	if s.avx512 {
		return ZMM()
	}
	return YMM()
}

// consts caches the 64-byte tables of broadcast float32 constants, usable
// as m256 or m512 operands.
var consts = map[uint32]Mem{}

func cf(v float32) Mem {
	bits := math.Float32bits(v)
	if m, ok := consts[bits]; ok {
		return m
	}
	m := GLOBL(fmt.Sprintf("f32_%08x", bits), RODATA|NOPTR)
	for i := range 16 {
		DATA(4*i, U32(bits))
	}
	consts[bits] = m
	return m
}

// maskTab holds eight all-ones int32 then eight zeros: the AVX2 mask of
// the first r lanes starts at byte 4*(8-r).
var maskTab Mem

// Comparison predicates of VCMPPS.
const (
	cmpGTOQ = 0x1e
	cmpGEOQ = 0x1d
)

func main() {
	ConstraintExpr("amd64,!purego")
	maskTab = GLOBL("masktab", RODATA|NOPTR)
	for i := range 16 {
		v := uint32(0)
		if i < 8 {
			v = 0xffffffff
		}
		DATA(4*i, U32(v))
	}
	transpose8()
	for _, s := range []isa{avx512, avx2} {
		s.sgemmKernels()
		s.sgemmNarrow()
		s.saxpy()
		s.mul()
		s.addMul()
		s.sdot()
		s.relu()
		s.square()
		s.lrtForward()
		s.lrtBackward()
		s.reluBackward()
		s.reluMask()
		s.softplus()
		s.meanFieldAdam()
		s.pointAdam()
		s.rngFill()
		s.normalTransform()
		for nv := 1; nv <= 8; nv++ {
			s.sparseAxpy(nv, false)
			s.sparseAxpy(nv, true)
		}
	}
	Generate()
}

// ---------------------------------------------------------------------------
// Sgemm

// sgemmShape returns the largest microkernel: rows of A and vectors of C.
func (s isa) sgemmShape() (mr, nv int) {
	if s.avx512 {
		return 6, 4 // 24 zmm accumulators, 4 for B, 1 broadcast
	}
	return 4, 3 // 12 ymm accumulators, 3 for B, 1 broadcast
}

func (s isa) sgemmKernels() {
	mrMax, nvMax := s.sgemmShape()
	for mr := 1; mr <= mrMax; mr++ {
		for nv := 1; nv <= nvMax; nv++ {
			if s.avx512 {
				s.sgemmKernel(mr, nv, true)
			} else {
				s.sgemmKernel(mr, nv, false)
				s.sgemmKernel(mr, nv, true)
			}
		}
	}
}

// sgemmKernel generates C[0:mr, 0:w] += A[0:mr, 0:k]·B[0:k, 0:w] for
// w = (nv-1)*lanes + rem, 1 <= rem <= lanes: mr*nv vector accumulators are
// loaded from C, updated by one FMA per row and vector for each p with
// A[i,p] broadcast, and stored back. The last vector of each row is
// masked to its first rem lanes (masked is always true for AVX-512; the
// AVX2 kernels without it need rem = lanes).
func (s isa) sgemmKernel(mr, nv int, masked bool) {
	name := fmt.Sprintf("sgemm%s_%dx%d", s.name, mr, nv)
	if !s.avx512 && masked {
		name += "m"
	}
	TEXT(name, NOSPLIT, "func(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, rem int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the %dx%d-vector microkernel of Sgemm at level %s.", name, mr, nv, s.name))
	kk := Load(Param("k"), GP64())
	pa := Load(Param("a"), GP64())
	rs := Load(Param("rsA"), GP64())
	cs := Load(Param("csA"), GP64())
	pb := Load(Param("b"), GP64())
	ldb := Load(Param("ldb"), GP64())
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	rem := GP64()
	Load(Param("rem"), rem)
	SHLQ(U8(2), rs)
	SHLQ(U8(2), cs)
	SHLQ(U8(2), ldb)
	SHLQ(U8(2), ldc)
	vb := 4 * s.lanes // bytes per vector

	// Rows 0-2 are addressed from base, rows 3-5 from base + 3*stride.
	pa3 := GP64()
	LEAQ(Mem{Base: pa, Index: rs, Scale: 2}, pa3)
	ADDQ(rs, pa3)
	pc3 := GP64()
	LEAQ(Mem{Base: pc, Index: ldc, Scale: 2}, pc3)
	ADDQ(ldc, pc3)
	row := func(base, base3, stride Register, i int) Mem {
		switch i {
		case 0:
			return Mem{Base: base}
		case 1:
			return Mem{Base: base, Index: stride, Scale: 1}
		case 2:
			return Mem{Base: base, Index: stride, Scale: 2}
		case 3:
			return Mem{Base: base3}
		case 4:
			return Mem{Base: base3, Index: stride, Scale: 1}
		}
		return Mem{Base: base3, Index: stride, Scale: 2}
	}

	var km OpmaskVirtual
	var maddr GPVirtual
	if s.avx512 {
		t := GP32()
		MOVL(U32(0xffff), t)
		BZHIL(rem.As32(), t, t)
		km = K()
		KMOVW(t, km)
	} else if masked {
		maddr = GP64()
		LEAQ(maskTab, maddr)
		NEGQ(rem)
		LEAQ(Mem{Base: maddr, Index: rem, Scale: 4, Disp: 32}, maddr)
	}
	last := func(v int) bool { return v == nv-1 && (s.avx512 || masked) }
	load := func(m Mem, dst VecVirtual) {
		switch {
		case s.avx512:
			VMOVUPS_Z(m, km, dst)
		default:
			VMOVUPS(Mem{Base: maddr}, dst)
			VMASKMOVPS(m, dst, dst)
		}
	}

	acc := make([][]VecVirtual, mr)
	for i := range mr {
		acc[i] = make([]VecVirtual, nv)
		for v := range nv {
			acc[i][v] = s.vec()
			m := row(pc, pc3, ldc, i).Offset(v * vb)
			if last(v) {
				load(m, acc[i][v])
			} else {
				VMOVUPS(m, acc[i][v])
			}
		}
	}
	Label("loop")
	bv := make([]VecVirtual, nv)
	for v := range nv {
		bv[v] = s.vec()
		m := Mem{Base: pb, Disp: v * vb}
		if last(v) {
			load(m, bv[v])
		} else {
			VMOVUPS(m, bv[v])
		}
	}
	for i := range mr {
		t := s.vec()
		VBROADCASTSS(row(pa, pa3, rs, i), t)
		for v := range nv {
			VFMADD231PS(bv[v], t, acc[i][v])
		}
	}
	ADDQ(cs, pa)
	ADDQ(cs, pa3)
	ADDQ(ldb, pb)
	DECQ(kk)
	JNZ(LabelRef("loop"))

	var mreg VecVirtual
	if !s.avx512 && masked {
		mreg = s.vec()
		VMOVUPS(Mem{Base: maddr}, mreg)
	}
	for i := range mr {
		for v := range nv {
			m := row(pc, pc3, ldc, i).Offset(v * vb)
			switch {
			case !last(v):
				VMOVUPS(acc[i][v], m)
			case s.avx512:
				VMOVUPS(acc[i][v], km, m)
			default:
				VMASKMOVPS(acc[i][v], mreg, m)
			}
		}
	}
	VZEROUPPER()
	RET()
}

// narrowTNVectors is the widest chunk of rows (in vectors) of the narrow
// TN kernel for n columns: n*nv accumulators, nv loads of A, n broadcasts
// of B and (AVX2) a mask must fit the registers.
func (s isa) narrowTNVectors(n int) int {
	if s.avx512 {
		return min(8, (32-n)/(n+1))
	}
	return (15 - n) / (n + 1)
}

// sgemmNarrowTN generates the product for C with n <= 4 columns and A
// given by columns (rsA = 1): it computes the transpose
//
//	out[j*W + i] = sum_p a[p*csA + i] * b[p*ldb + j],  i < W = nv*lanes,
//
// vectorized over the rows i of a chunk (the last vector masked to rem
// lanes), n*nv accumulators, B broadcast. The caller adds out's
// transpose into C.
func (s isa) sgemmNarrowTN(n, nv int) {
	loop := fmt.Sprintf("tn%dx%d", n, nv)
	kk := Load(Param("k"), GP64())
	pa := Load(Param("a"), GP64())
	cs := Load(Param("csA"), GP64())
	pb := Load(Param("b"), GP64())
	ldb := Load(Param("ldb"), GP64())
	out := Load(Param("out"), GP64())
	rem := GP64()
	Load(Param("rem"), rem)
	SHLQ(U8(2), cs)
	SHLQ(U8(2), ldb)
	ld, _ := s.chunkMask(rem)
	vb := 4 * s.lanes
	acc := make([][]VecVirtual, n)
	for j := range n {
		acc[j] = make([]VecVirtual, nv)
		for v := range nv {
			acc[j][v] = s.zero()
		}
	}
	Label(loop)
	av := make([]VecVirtual, nv)
	for v := range nv {
		av[v] = s.vec()
		m := Mem{Base: pa, Disp: v * vb}
		if v == nv-1 {
			ld(m, av[v])
		} else {
			VMOVUPS(m, av[v])
		}
	}
	for j := range n {
		t := s.vec()
		VBROADCASTSS(Mem{Base: pb, Disp: 4 * j}, t)
		for v := range nv {
			VFMADD231PS(av[v], t, acc[j][v])
		}
	}
	ADDQ(cs, pa)
	ADDQ(ldb, pb)
	DECQ(kk)
	JNZ(LabelRef(loop))
	for j := range n {
		for v := range nv {
			VMOVUPS(acc[j][v], Mem{Base: out, Disp: (j*nv + v) * vb})
		}
	}
	VZEROUPPER()
	RET()
}

// sgemmNarrowNN generates the product for C with n <= 4 columns and A
// given by rows (csA = 1): for each of the m rows i,
//
//	C[i*ldc + j] += sum_p a[i*rsA + p] * bt[j*ldbt + p],
//
// a dot product vectorized over p (the last vector masked to rem lanes)
// against the transposed B, bt, which the caller zero-pads to whole
// vectors.
func (s isa) sgemmNarrowNN(n int) {
	lbl := func(l string) string { return fmt.Sprintf("nn%d%s", n, l) }
	mm := Load(Param("m"), GP64())
	nvec := Load(Param("nvec"), GP64())
	pa := Load(Param("a"), GP64())
	rs := Load(Param("rsA"), GP64())
	bt := Load(Param("bt"), GP64())
	ldbt := Load(Param("ldbt"), GP64())
	pc := Load(Param("c"), GP64())
	ldc := Load(Param("ldc"), GP64())
	rem := GP64()
	Load(Param("rem"), rem)
	SHLQ(U8(2), rs)
	SHLQ(U8(2), ldbt)
	SHLQ(U8(2), ldc)
	ld, _ := s.chunkMask(rem)
	vb := 4 * s.lanes
	col := func(j int, p Register) Mem {
		switch j {
		case 0:
			return Mem{Base: p}
		case 1:
			return Mem{Base: p, Index: ldbt, Scale: 1}
		case 2:
			return Mem{Base: p, Index: ldbt, Scale: 2}
		}
		return Mem{Base: p, Index: ldbt, Scale: 1} // j = 3 uses p + 2 ldbt
	}

	Label(lbl("row"))
	acc := make([]VecVirtual, n)
	for j := range n {
		acc[j] = s.zero()
	}
	ra, rb, cnt := GP64(), GP64(), GP64()
	MOVQ(pa, ra)
	MOVQ(bt, rb)
	MOVQ(nvec, cnt)
	// Full vectors, then the masked last one.
	DECQ(cnt)
	JZ(LabelRef(lbl("last")))
	Label(lbl("vec"))
	x := s.vec()
	VMOVUPS(Mem{Base: ra}, x)
	s.narrowNNStep(n, x, acc, rb, ldbt, col)
	ADDQ(U32(vb), ra)
	ADDQ(U32(vb), rb)
	DECQ(cnt)
	JNZ(LabelRef(lbl("vec")))
	Label(lbl("last"))
	x = s.vec()
	ld(Mem{Base: ra}, x)
	s.narrowNNStep(n, x, acc, rb, ldbt, col)
	for j := range n {
		h := s.hsum(acc[j])
		VADDSS(Mem{Base: pc, Disp: 4 * j}, h, h)
		VMOVSS(h, Mem{Base: pc, Disp: 4 * j})
	}
	ADDQ(rs, pa)
	ADDQ(ldc, pc)
	DECQ(mm)
	JNZ(LabelRef(lbl("row")))
	VZEROUPPER()
	RET()
}

// sgemmNarrow generates the two entry points of the narrow kernels:
// sgemmNarrowTN dispatches on (n, nv) and sgemmNarrowNN on n to the
// specialized bodies, so that Go calls them directly (a call through a
// func value would make the caller's scratch arrays escape).
func (s isa) sgemmNarrow() {
	TEXT("sgemmNarrowTN"+s.name, NOSPLIT, "func(n, nv, k int, a *float32, csA int, b *float32, ldb int, out *float32, rem int)")
	Pragma("noescape")
	Doc("sgemmNarrowTN" + s.name + " is the narrow TN product for n columns on nv vectors of rows (see sgemmNarrowTN in asmgen).")
	code := Load(Param("n"), GP64())
	nv := Load(Param("nv"), GP64())
	SHLQ(U8(4), code)
	ADDQ(nv, code)
	for n := 1; n <= 4; n++ {
		for v := 1; v <= s.narrowTNVectors(n); v++ {
			CMPQ(code, U32(16*n+v))
			JE(LabelRef(fmt.Sprintf("body%dx%d", n, v)))
		}
	}
	RET()
	for n := 1; n <= 4; n++ {
		for v := 1; v <= s.narrowTNVectors(n); v++ {
			Label(fmt.Sprintf("body%dx%d", n, v))
			s.sgemmNarrowTN(n, v)
		}
	}

	TEXT("sgemmNarrowNN"+s.name, NOSPLIT, "func(n, m, nvec int, a *float32, rsA int, bt *float32, ldbt int, c *float32, ldc int, rem int)")
	Pragma("noescape")
	Doc("sgemmNarrowNN" + s.name + " is the narrow NN product for n columns (see sgemmNarrowNN in asmgen).")
	nn := Load(Param("n"), GP64())
	for n := 1; n <= 4; n++ {
		CMPQ(nn, U32(n))
		JE(LabelRef(fmt.Sprintf("body%d", n)))
	}
	RET()
	for n := 1; n <= 4; n++ {
		Label(fmt.Sprintf("body%d", n))
		s.sgemmNarrowNN(n)
	}
}

// narrowNNStep adds x times the current vector of each column of bt into
// acc.
func (s isa) narrowNNStep(n int, x VecVirtual, acc []VecVirtual, rb, ldbt Register, col func(int, Register) Mem) {
	for j := range n {
		if j == 3 {
			r3 := GP64()
			LEAQ(Mem{Base: rb, Index: ldbt, Scale: 2}, r3)
			VFMADD231PS(col(j, r3), x, acc[j])
			continue
		}
		VFMADD231PS(col(j, rb), x, acc[j])
	}
}

// ---------------------------------------------------------------------------
// Elementwise kernels

// access loads and stores the current vector of the kernel's slices.
type access struct {
	ld func(j int) VecVirtual    // a new register holding slice j's vector
	st func(j int, x VecVirtual) // store x into slice j's vector
	s  isa
	km OpmaskVirtual // AVX-512 tail mask (nil in the main loop)
}

// stream generates a kernel over n float32 elements of the slices named in
// ptrs: body runs once per full vector, then once more under a mask for
// the n mod lanes remaining elements. setup runs before the loop (for
// loop-invariant registers); fini after it (for reductions).
func (s isa) stream(name, sig string, ptrs []string, setup func(), body func(a access), fini func()) {
	s.streamK(name, sig, ptrs, 1, setup, func(as []access) { body(as[0]) }, fini)
}

// streamK is stream with its main loop unrolled by k vectors: body gets
// the accesses of k consecutive vectors and generates their work as k
// independent chains (k = 1 generates stream's code). Whole vectors left
// over, and the masked tail, then run one at a time (body with k = 1).
// It is for a body whose dependency chain is long against the core's
// out-of-order window: the mean-field Adam step, about 140 instructions
// and a chain of two divides, a square root and two polynomials per
// vector, overlaps fewer than two iterations in Zen 3's 256-entry reorder
// buffer, and two interleaved chains run it 25% faster there
// (bench/kern.md).
func (s isa) streamK(name, sig string, ptrs []string, k int, setup func(), body func(as []access), fini func()) {
	TEXT(name+s.name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s%s is the %s kernel at level %s; n is the element count.", name, s.name, name, s.name))
	n := Load(Param("n"), GP64())
	base := make([]Register, len(ptrs))
	for j, p := range ptrs {
		base[j] = Load(Param(p), GP64())
	}
	if setup != nil {
		setup()
	}
	idx := GP64()
	XORQ(idx, idx)
	end := GP64()
	at := func(j int) Mem { return Mem{Base: base[j], Index: idx, Scale: 4} }
	// whole returns the access of the whole vector u after idx.
	whole := func(u int) access {
		return access{
			s: s,
			ld: func(j int) VecVirtual {
				x := s.vec()
				VMOVUPS(at(j).Offset(4*s.lanes*u), x)
				return x
			},
			st: func(j int, x VecVirtual) { VMOVUPS(x, at(j).Offset(4*s.lanes*u)) },
		}
	}
	if k > 1 {
		// end is idx's bound in each loop (a twelve-slice kernel has no
		// general register to spare for a second one).
		MOVQ(n, end)
		SUBQ(I32(k*s.lanes-1), end)
		Label("loopk")
		CMPQ(idx, end)
		JGE(LabelRef("whole"))
		as := make([]access, k)
		for u := range as {
			as[u] = whole(u)
		}
		body(as)
		ADDQ(I32(k*s.lanes), idx)
		JMP(LabelRef("loopk"))
		Label("whole")
	}
	MOVQ(n, end)
	ANDQ(I32(-s.lanes), end)
	Label("loop")
	CMPQ(idx, end)
	JGE(LabelRef("tail"))
	body([]access{whole(0)})
	ADDQ(I32(s.lanes), idx)
	JMP(LabelRef("loop"))

	Label("tail")
	rem := GP64()
	MOVQ(n, rem)
	SUBQ(idx, rem)
	JZ(LabelRef("done"))
	a := access{s: s}
	if s.avx512 {
		t := GP32()
		MOVL(U32(0xffff), t)
		BZHIL(rem.As32(), t, t)
		km := K()
		KMOVW(t, km)
		a.km = km
		a.ld = func(j int) VecVirtual {
			x := s.vec()
			VMOVUPS_Z(at(j), km, x)
			return x
		}
		a.st = func(j int, x VecVirtual) { VMOVUPS(x, km, at(j)) }
	} else {
		maddr := GP64()
		LEAQ(maskTab, maddr)
		NEGQ(rem)
		LEAQ(Mem{Base: maddr, Index: rem, Scale: 4, Disp: 32}, maddr)
		a.ld = func(j int) VecVirtual {
			x := s.vec()
			VMOVUPS(Mem{Base: maddr}, x)
			VMASKMOVPS(at(j), x, x)
			return x
		}
		a.st = func(j int, x VecVirtual) {
			m := s.vec()
			VMOVUPS(Mem{Base: maddr}, m)
			VMASKMOVPS(x, m, at(j))
		}
	}
	body([]access{a})
	Label("done")
	if fini != nil {
		fini()
	}
	VZEROUPPER()
	RET()
}

// bcast returns a new register holding the float32 parameter p in every lane.
func (s isa) bcast(p string) VecVirtual {
	b, err := Param(p).Resolve()
	if err != nil {
		panic(err)
	}
	x := s.vec()
	VBROADCASTSS(b.Addr, x)
	return x
}

func (s isa) zero() VecVirtual {
	x := s.vec()
	VXORPS(x, x, x)
	return x
}

// selectPos sets x to 0 in the lanes where c > 0 is false (also for NaN).
func (a access) selectPos(x, c VecVirtual) {
	if a.s.avx512 {
		k := K()
		VCMPPS(U8(cmpGTOQ), a.s.zero(), c, k)
		VMOVUPS_Z(x, k, x)
		return
	}
	m := a.s.vec()
	VCMPPS(U8(cmpGTOQ), a.s.zero(), c, m)
	VANDPS(x, m, x)
}

func (s isa) saxpy() {
	var alpha VecVirtual
	s.stream("saxpy", "func(n int, alpha float32, x, y *float32)", []string{"x", "y"},
		func() { alpha = s.bcast("alpha") },
		func(a access) {
			// y + alpha*x, rounded twice like the portable kernel.
			x, y := a.ld(0), a.ld(1)
			VMULPS(x, alpha, x)
			VADDPS(x, y, y)
			a.st(1, y)
		}, nil)
}

func (s isa) mul() {
	var alpha VecVirtual
	s.stream("mul", "func(n int, alpha float32, dst, x, y *float32)", []string{"dst", "x", "y"},
		func() { alpha = s.bcast("alpha") },
		func(a access) {
			// (alpha*x)*y, rounded twice like the portable kernel.
			x, y := a.ld(1), a.ld(2)
			VMULPS(alpha, x, x)
			VMULPS(y, x, x)
			a.st(0, x)
		}, nil)
}

func (s isa) addMul() {
	s.stream("addMul", "func(n int, dst, a, b, c *float32)", []string{"dst", "a", "b", "c"}, nil,
		func(a access) {
			// a + b*c, the product rounded first.
			x, b, c := a.ld(1), a.ld(2), a.ld(3)
			VMULPS(c, b, b)
			VADDPS(b, x, x)
			a.st(0, x)
		}, nil)
}

func (s isa) sdot() {
	var acc VecVirtual
	s.stream("sdot", "func(n int, x, y *float32) float32", []string{"x", "y"},
		func() { acc = s.zero() },
		func(a access) {
			x, y := a.ld(0), a.ld(1)
			VFMADD231PS(x, y, acc)
		},
		func() { Store(s.hsum(acc), ReturnIndex(0)) })
}

// hsum returns the sum of the lanes of acc in the low lane of a new
// register.
func (s isa) hsum(acc VecVirtual) VecVirtual {
	var y VecVirtual
	if s.avx512 {
		y = YMM()
		VEXTRACTF64X4(U8(1), acc, y)
		VADDPS(acc.AsY(), y, y)
	} else {
		y = acc
	}
	x := XMM()
	VEXTRACTF128(U8(1), y, x)
	VADDPS(y.AsX(), x, x)
	h := XMM()
	VMOVHLPS(x, x, h)
	VADDPS(h, x, x)
	VMOVSHDUP(x, h)
	VADDSS(h, x, x)
	return x
}

func (s isa) relu() {
	var zero VecVirtual
	s.stream("relu", "func(n int, z *float32)", []string{"z"},
		func() { zero = s.zero() },
		func(a access) {
			// max(0, z) keeps NaN, like Go's max.
			z := a.ld(0)
			VMAXPS(z, zero, z)
			a.st(0, z)
		}, nil)
}

func (s isa) square() {
	s.stream("square", "func(n int, dst, src *float32)", []string{"dst", "src"}, nil,
		func(a access) {
			x := a.ld(1)
			VMULPS(x, x, x)
			a.st(0, x)
		}, nil)
}

func (s isa) lrtForward() {
	s.stream("lrtForward", "func(n int, z, v, eps *float32)", []string{"z", "v", "eps"}, nil,
		func(a access) {
			v := a.ld(1)
			VSQRTPS(v, v)
			a.st(1, v)
			e := a.ld(2)
			VMULPS(e, v, e)
			z := a.ld(0)
			VADDPS(e, z, z)
			a.st(0, z)
		}, nil)
}

func (s isa) lrtBackward() {
	s.stream("lrtBackward", "func(n int, d, grad, sd *float32)", []string{"d", "grad", "sd"}, nil,
		func(a access) {
			// (g*d) / (2*sd) where sd > 0, else 0.
			d, g, sd := a.ld(0), a.ld(1), a.ld(2)
			VMULPS(d, g, g)
			t := s.vec()
			VADDPS(sd, sd, t)
			VDIVPS(t, g, g)
			a.selectPos(g, sd)
			a.st(0, g)
		}, nil)
}

func (s isa) reluBackward() {
	s.stream("reluBackward", "func(n int, gp, a, t *float32)", []string{"gp", "a", "t"}, nil,
		func(a access) {
			// gp + (2*a)*t where a > 0, else 0.
			g, x, t := a.ld(0), a.ld(1), a.ld(2)
			u := s.vec()
			VADDPS(x, x, u)
			VMULPS(t, u, u)
			VADDPS(u, g, g)
			a.selectPos(g, x)
			a.st(0, g)
		}, nil)
}

func (s isa) reluMask() {
	s.stream("reluMask", "func(n int, grad, a *float32)", []string{"grad", "a"}, nil,
		func(a access) {
			g, x := a.ld(0), a.ld(1)
			a.selectPos(g, x)
			a.st(0, g)
		}, nil)
}

// ---------------------------------------------------------------------------
// Softplus: log(1 + exp(r)) and 1/(1 + exp(-r)) through e = exp(-|r|).

// Cephes expf and logf (S. L. Moshier, Cephes Math Library 2.2, expf.c
// and logf.c): Cody-Waite reduction by ln 2 = C1 + C2 and minimax
// polynomials on [-ln2/2, ln2/2] and [sqrt(1/2)-1, sqrt(2)-1].
const (
	lnC1 = 0.693359375
	lnC2 = -2.12194440e-4
)

var (
	expPoly = []float32{1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1}
	logPoly = []float32{7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1}
)

// softplusVec returns softplus(r) and sigmoid(r) for the vector r, which
// it leaves unchanged.
func (s isa) softplusVec(r VecVirtual) (sg, sm VecVirtual) {
	sgs, sms := s.softplusVecs([]VecVirtual{r})
	return sgs[0], sms[0]
}

// each calls f(0), ..., f(k-1): the generators of k interleaved chains
// emit an operation for every chain before the next operation.
func each(k int, f func(i int)) {
	for i := range k {
		f(i)
	}
}

// vecs returns k new vector registers.
func (s isa) vecs(k int) []VecVirtual {
	xs := make([]VecVirtual, k)
	for i := range xs {
		xs[i] = s.vec()
	}
	return xs
}

// softplusVecs is softplusVec on the vectors rs as len(rs) interleaved
// chains: each operation is generated for every chain before the next
// one, so that the chains' latencies overlap (see streamK). Every chain
// rounds exactly as softplusVec does.
func (s isa) softplusVecs(rs []VecVirtual) (sg, sm []VecVirtual) {
	k := len(rs)
	// a = -|r|, clamped at -104 where exp(a) < 2^-150 rounds to 0.
	a := s.vecs(k)
	each(k, func(i int) {
		VORPS(cf(float32(math.Copysign(0, -1))), rs[i], a[i])
		VMAXPS(cf(-104), a[i], a[i])
	})

	// e = exp(a) = 2^n exp(f), n = round(a/ln2), f = a - n ln2.
	n := s.vecs(k)
	each(k, func(i int) {
		VMULPS(cf(math.Log2E), a[i], n[i])
		if s.avx512 {
			VRNDSCALEPS(U8(8), n[i], n[i])
		} else {
			VROUNDPS(U8(8), n[i], n[i])
		}
	})
	f := a
	each(k, func(i int) { VFNMADD231PS(cf(lnC1), n[i], f[i]) })
	each(k, func(i int) { VFNMADD231PS(cf(lnC2), n[i], f[i]) })
	y := s.vecs(k)
	each(k, func(i int) { VMOVUPS(cf(expPoly[0]), y[i]) })
	for _, c := range expPoly[1:] {
		each(k, func(i int) { VFMADD213PS(cf(c), f[i], y[i]) })
	}
	z := s.vecs(k)
	each(k, func(i int) {
		VMULPS(f[i], f[i], z[i])
		VFMADD213PS(f[i], z[i], y[i])
		VADDPS(cf(1), y[i], y[i])
	})
	e := y
	if s.avx512 {
		each(k, func(i int) { VSCALEFPS(n[i], y[i], e[i]) })
	} else {
		// 2^n as 2^(n>>1) * 2^(n - n>>1): both factors are normal for
		// n >= -150, so the product rounds once, also into subnormals.
		ni, n1, bias := s.vecs(k), s.vecs(k), s.vecs(k)
		each(k, func(i int) {
			VCVTPS2DQ(n[i], ni[i])
			VPSRAD(U8(1), ni[i], n1[i])
			VPSUBD(n1[i], ni[i], ni[i])
		})
		each(k, func(i int) {
			VPCMPEQD(bias[i], bias[i], bias[i])
			VPSRLD(U8(25), bias[i], bias[i]) // 127
			VPADDD(bias[i], n1[i], n1[i])
			VPADDD(bias[i], ni[i], ni[i])
		})
		each(k, func(i int) {
			VPSLLD(U8(23), n1[i], n1[i])
			VPSLLD(U8(23), ni[i], ni[i])
			VMULPS(n1[i], e[i], e[i])
		})
		each(k, func(i int) { VMULPS(ni[i], e[i], e[i]) })
	}

	// The rest runs chain after chain: its live registers (eight) would
	// not fit twice in AVX2's sixteen, and whole chains of about forty
	// instructions still overlap in the out-of-order window.
	sg, sm = make([]VecVirtual, k), make([]VecVirtual, k)
	for i := range k {
		sg[i], sm[i] = s.softplusLog(rs[i], e[i])
	}
	return sg, sm
}

// softplusLog is the end of softplusVecs for one vector r, given
// e = exp(-|r|).
func (s isa) softplusLog(r, e VecVirtual) (sg, sm VecVirtual) {
	// u = 1 + e in [1, 2]; log1p(e) = log(u) + (e - (u-1))/u.
	u := s.vec()
	VADDPS(cf(1), e, u)
	inv := s.vec()
	VMOVUPS(cf(1), inv)
	VDIVPS(u, inv, inv)

	// log(u) = k ln2 + log(1 + x), x = u/2^k - 1, k = [u >= sqrt 2].
	x := s.vec()
	kf := s.vec()
	if s.avx512 {
		km := K()
		VCMPPS(U8(cmpGEOQ), cf(math.Sqrt2), u, km)
		VMOVUPS(u, x)
		VMULPS(cf(0.5), u, km, x)
		VMOVUPS_Z(cf(1), km, kf)
	} else {
		m := s.vec()
		VCMPPS(U8(cmpGEOQ), cf(math.Sqrt2), u, m)
		h := s.vec()
		VMULPS(cf(0.5), u, h)
		VBLENDVPS(m, h, u, x)
		VANDPS(cf(1), m, kf)
	}
	VSUBPS(cf(1), x, x)
	x2 := s.vec()
	VMULPS(x, x, x2)
	p := s.vec()
	VMOVUPS(cf(logPoly[0]), p)
	for _, c := range logPoly[1:] {
		VFMADD213PS(cf(c), x, p)
	}
	VMULPS(x, p, p)
	VMULPS(x2, p, p)
	VFMADD231PS(cf(lnC2), kf, p)
	VFNMADD231PS(cf(0.5), x2, p)
	VADDPS(x, p, p)
	VFMADD231PS(cf(lnC1), kf, p)

	// Correction (e - (u-1))/u: u-1 is exact, so e - (u-1) is the
	// rounding error of u.
	c := s.vec()
	VSUBPS(cf(1), u, c)
	VSUBPS(c, e, c)
	VFMADD231PS(c, inv, p)

	// sigma = max(r, 0) + log1p(e); sigmoid = 1/u if r > 0, else e/u.
	sg = s.vec()
	VXORPS(sg, sg, sg)
	VMAXPS(r, sg, sg)
	VADDPS(p, sg, sg)
	sm = s.vec()
	VMULPS(inv, e, sm)
	if s.avx512 {
		kp := K()
		VCMPPS(U8(cmpGTOQ), s.zero(), r, kp)
		VMOVUPS(inv, kp, sm)
	} else {
		m := s.vec()
		VCMPPS(U8(cmpGTOQ), s.zero(), r, m)
		VBLENDVPS(m, inv, sm, sm)
	}
	return sg, sm
}

func (s isa) softplus() {
	s.stream("softplus", "func(n int, sigma, sigmoid, rho *float32)", []string{"sigma", "sigmoid", "rho"}, nil,
		func(a access) {
			sg, sm := s.softplusVec(a.ld(2))
			a.st(0, sg)
			a.st(1, sm)
		}, nil)
}

// ---------------------------------------------------------------------------
// Adam

// The Adam kernels run with MXCSR's flush-to-zero and denormals-are-zero
// bits set, so that decaying moment estimates never take the slow
// subnormal path; the caller's MXCSR is restored before return.
func setFTZ() Mem {
	save := AllocLocal(8)
	VSTMXCSR(save)
	t := GP32()
	MOVL(save, t)
	ORL(U32(0x8040), t)
	MOVL(t, save.Offset(4))
	VLDMXCSR(save.Offset(4))
	return save
}

// adamVecs is one Adam step (Kingma & Ba 2015, Algorithm 1) of each
// parameter vector xs[i] with gradient gs[i] and moments at slices mj, vj
// of as[i], as interleaved chains (see softplusVecs), rounded operation by
// operation like kern.go's adam1 (no FMA):
//
//	m = b1 m + (1-b1) g;  v = b2 v + ((1-b2) g) g;
//	x = x - (lr (m c1)) / (sqrt(v c2) + eps).
func (s isa) adamVecs(as []access, xs, gs []VecVirtual, mj, vj int) {
	k := len(as)
	m, v, t := make([]VecVirtual, k), make([]VecVirtual, k), make([]VecVirtual, k)
	each(k, func(i int) { m[i], v[i] = as[i].ld(mj), as[i].ld(vj) })
	each(k, func(i int) { t[i] = s.vec() })
	// One broadcast of each scalar serves every chain.
	bc := func(p string, f func(b VecVirtual, i int)) {
		b := s.bcast(p)
		each(k, func(i int) { f(b, i) })
	}
	bc("b1", func(b VecVirtual, i int) { VMULPS(b, m[i], m[i]) })
	bc("omb1", func(b VecVirtual, i int) { VMULPS(b, gs[i], t[i]) })
	each(k, func(i int) {
		VADDPS(t[i], m[i], m[i])
		as[i].st(mj, m[i])
	})
	bc("b2", func(b VecVirtual, i int) { VMULPS(b, v[i], v[i]) })
	bc("omb2", func(b VecVirtual, i int) { VMULPS(b, gs[i], t[i]) })
	each(k, func(i int) {
		VMULPS(gs[i], t[i], t[i])
		VADDPS(t[i], v[i], v[i])
		as[i].st(vj, v[i])
	})
	bc("c2", func(b VecVirtual, i int) { VMULPS(b, v[i], v[i]) })
	each(k, func(i int) { VSQRTPS(v[i], v[i]) })
	bc("eps", func(b VecVirtual, i int) { VADDPS(b, v[i], v[i]) })
	bc("c1", func(b VecVirtual, i int) { VMULPS(b, m[i], m[i]) })
	bc("lr", func(b VecVirtual, i int) { VMULPS(b, m[i], m[i]) })
	each(k, func(i int) { VDIVPS(v[i], m[i], m[i]) })
	each(k, func(i int) { VSUBPS(m[i], xs[i], xs[i]) })
}

const adamSig = "scale, lr, b1, omb1, b2, omb2, c1, c2, eps float32"

// adamUnroll is the number of interleaved vectors of the AVX2 mean-field
// Adam kernel (streamK). The AVX-512 kernel keeps one: this change was
// measured on Zen 3 only, and no AVX-512 machine was at hand to test a
// new AVX-512 kernel; three AVX2 chains do not fit sixteen registers.
func (s isa) adamUnroll() int {
	if s.avx512 {
		return 1
	}
	return 2
}

func (s isa) meanFieldAdam() {
	for _, withMean := range []bool{false, true} {
		name := "meanFieldAdam"
		if withMean {
			name += "Mean"
		}
		ptrs := []string{"mu", "rho", "sigma", "sigmoid", "dmu", "dsigma", "pprec", "mmu", "vmu", "mrho", "vrho", "pmean"}
		if !withMean {
			ptrs = ptrs[:len(ptrs)-1]
		}
		var save Mem
		s.streamK(name, "func(n int, mu, rho, sigma, sigmoid, dmu, dsigma, pprec, mmu, vmu, mrho, vrho, pmean *float32, "+adamSig+")", ptrs,
			s.adamUnroll(),
			func() { save = setFTZ() },
			func(as []access) {
				k := len(as)
				// gmu = (mu - m) prec - scale dmu
				// grho = ((sigma prec - 1/sigma) - scale dsigma) sigmoid
				mu, prec, d := make([]VecVirtual, k), make([]VecVirtual, k), make([]VecVirtual, k)
				each(k, func(i int) { mu[i], prec[i] = as[i].ld(0), as[i].ld(6) })
				copy(d, mu)
				if withMean {
					each(k, func(i int) {
						d[i] = s.vec()
						VSUBPS(as[i].ld(11), mu[i], d[i])
					})
				}
				gmu := s.vecs(k)
				each(k, func(i int) { VMULPS(prec[i], d[i], gmu[i]) })
				t := make([]VecVirtual, k)
				each(k, func(i int) { t[i] = as[i].ld(4) })
				scale := s.bcast("scale")
				each(k, func(i int) { VMULPS(scale, t[i], t[i]) })
				each(k, func(i int) { VSUBPS(t[i], gmu[i], gmu[i]) })
				s.adamVecs(as, mu, gmu, 7, 8)
				each(k, func(i int) { as[i].st(0, mu[i]) })

				sg, grho, inv := make([]VecVirtual, k), make([]VecVirtual, k), make([]VecVirtual, k)
				each(k, func(i int) {
					sg[i] = as[i].ld(2)
					grho[i] = s.vec()
					VMULPS(prec[i], sg[i], grho[i])
					inv[i] = s.vec()
					VMOVUPS(cf(1), inv[i])
				})
				each(k, func(i int) {
					VDIVPS(sg[i], inv[i], inv[i])
					VSUBPS(inv[i], grho[i], grho[i])
				})
				each(k, func(i int) { t[i] = as[i].ld(5) })
				scale = s.bcast("scale")
				each(k, func(i int) { VMULPS(scale, t[i], t[i]) })
				each(k, func(i int) {
					VSUBPS(t[i], grho[i], grho[i])
					VMULPS(as[i].ld(3), grho[i], grho[i])
				})
				rho := make([]VecVirtual, k)
				each(k, func(i int) { rho[i] = as[i].ld(1) })
				s.adamVecs(as, rho, grho, 9, 10)
				each(k, func(i int) { as[i].st(1, rho[i]) })
				sgs, sms := s.softplusVecs(rho)
				each(k, func(i int) {
					as[i].st(2, sgs[i])
					as[i].st(3, sms[i])
				})
			},
			func() { VLDMXCSR(save) })
	}
}

func (s isa) pointAdam() {
	for _, withMean := range []bool{false, true} {
		name := "pointAdam"
		if withMean {
			name += "Mean"
		}
		ptrs := []string{"mu", "dmu", "pprec", "mmu", "vmu", "pmean"}
		if !withMean {
			ptrs = ptrs[:len(ptrs)-1]
		}
		var save Mem
		s.stream(name, "func(n int, mu, dmu, pprec, mmu, vmu, pmean *float32, "+adamSig+")", ptrs,
			func() { save = setFTZ() },
			func(a access) {
				mu := a.ld(0)
				d := mu
				if withMean {
					d = s.vec()
					VSUBPS(a.ld(5), mu, d)
				}
				g := s.vec()
				VMULPS(a.ld(2), d, g)
				t := a.ld(1)
				VMULPS(s.bcast("scale"), t, t)
				VSUBPS(t, g, g)
				s.adamVecs([]access{a}, []VecVirtual{mu}, []VecVirtual{g}, 3, 4)
				a.st(0, mu)
			},
			func() { VLDMXCSR(save) })
	}
}

// ---------------------------------------------------------------------------
// Normal random numbers (rng.go): eight xoshiro256++ streams in the 64-bit
// lanes, then Box-Muller on pairs of 32-bit words, all rounded operation by
// operation like the portable code (no FMA) so that every level gives the
// same numbers.

// rotl64 sets x = x rotated left by r bits (64-bit lanes).
func (s isa) rotl64(x VecVirtual, r int) {
	if s.avx512 {
		VPROLQ(U8(r), x, x)
		return
	}
	t := s.vec()
	VPSRLQ(U8(64-r), x, t)
	VPSLLQ(U8(r), x, x)
	VPOR(t, x, x)
}

// xor sets x ^= y (integer lanes).
func (s isa) xor(y, x VecVirtual) {
	if s.avx512 {
		VPXORQ(y, x, x)
		return
	}
	VPXOR(y, x, x)
}

// sqrtHalf is float32(sqrt(1/2)), Cephes logf's SQRTHF.
const sqrtHalf = 0.70710677

// rngFill writes 32 raw 32-bit words per block into dst, two steps of the
// eight xoshiro256++ streams (Blackman & Vigna 2021), and advances the
// state (4 words x 8 lanes of uint64).
func (s isa) rngFill() {
	TEXT("rngFill"+s.name, NOSPLIT, "func(blocks int, dst *float32, state *uint64)")
	Pragma("noescape")
	Doc("rngFill" + s.name + " fills blocks*32 words of dst from the generator state.")
	nb := Load(Param("blocks"), GP64())
	dst := Load(Param("dst"), GP64())
	st := Load(Param("state"), GP64())
	parts := 1
	if !s.avx512 {
		parts = 2 // lanes 0-3 and 4-7
	}
	var sv [4][2]VecVirtual
	for i := range 4 {
		for h := range parts {
			sv[i][h] = s.vec()
			VMOVUPS(Mem{Base: st, Disp: 64*i + 32*h}, sv[i][h])
		}
	}
	Label("loop")
	for half := range 2 {
		for h := range parts {
			s0, s1, s2, s3 := sv[0][h], sv[1][h], sv[2][h], sv[3][h]
			// result = rotl(s0 + s3, 23) + s0
			r := s.vec()
			VPADDQ(s3, s0, r)
			s.rotl64(r, 23)
			VPADDQ(s0, r, r)
			VMOVUPS(r, Mem{Base: dst, Disp: 64*half + 32*h})
			// t = s1 << 17; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3;
			// s2 ^= t; s3 = rotl(s3, 45)
			t := s.vec()
			VPSLLQ(U8(17), s1, t)
			s.xor(s0, s2)
			s.xor(s1, s3)
			s.xor(s2, s1)
			s.xor(s3, s0)
			s.xor(t, s2)
			s.rotl64(s3, 45)
		}
	}
	ADDQ(U32(128), dst)
	DECQ(nb)
	JNZ(LabelRef("loop"))
	for i := range 4 {
		for h := range parts {
			VMOVUPS(sv[i][h], Mem{Base: st, Disp: 64*i + 32*h})
		}
	}
	VZEROUPPER()
	RET()
}

// Cephes sinf and cosf (S. L. Moshier, Cephes Math Library 2.2) on
// [-pi/4, pi/4].
var (
	sinPoly = []float32{-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1}
	cosPoly = []float32{2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2}
)

// horner evaluates the polynomial p at x (highest coefficient first) with
// separate multiplies and adds.
func (s isa) horner(p []float32, x VecVirtual) VecVirtual {
	y := s.vec()
	VMOVUPS(cf(p[0]), y)
	for _, c := range p[1:] {
		VMULPS(x, y, y)
		VADDPS(cf(c), y, y)
	}
	return y
}

// normalTransform turns each block of 32 raw words in dst into 32
// standard normals in place: words j and 16+j (j < 16) make the pair
//
//	u = (a>>9 + 1/2) 2^-23,  f = (b>>9 + 1/2) 2^-23 - 1/2,
//	R = sqrt(-2 log u),  theta = f pi/2,
//	(z_j, z_16+j) = R (cos theta, sin theta),
//
// swapped when bit 0 of b is set and negated by bits 1 and 2: the eight
// symmetries of the square map theta in (-pi/4, pi/4) onto the whole
// circle (Box & Muller 1958).
func (s isa) normalTransform() {
	TEXT("normalTransform"+s.name, NOSPLIT, "func(blocks int, dst *float32)")
	Pragma("noescape")
	Doc("normalTransform" + s.name + " is the Box-Muller transform of rngFill's words.")
	nb := Load(Param("blocks"), GP64())
	dst := Load(Param("dst"), GP64())
	vb := 4 * s.lanes
	Label("loop")
	for off := 0; off < 64; off += vb {
		a, b := s.vec(), s.vec()
		VMOVUPS(Mem{Base: dst, Disp: off}, a)
		VMOVUPS(Mem{Base: dst, Disp: 64 + off}, b)

		// u in (0, 1) and its logarithm (Cephes logf, unfused): u = 2^e m
		// with m in [1/2, 1); below sqrt(1/2) use 2m and e-1.
		u := s.vec()
		VPSRLD(U8(9), a, u)
		VCVTDQ2PS(u, u)
		VADDPS(cf(0.5), u, u)
		VMULPS(cf(0x1p-23), u, u)
		e := s.vec()
		VPSRLD(U8(23), u, e)
		VPSUBD(cf(math.Float32frombits(126)), e, e)
		m := u
		VANDPS(cf(math.Float32frombits(0x007fffff)), u, m)
		VORPS(cf(0.5), m, m)
		lt := s.vec()
		VSUBPS(cf(sqrtHalf), m, lt)
		VPSRAD(U8(31), lt, lt) // all ones where m < sqrt(1/2)
		VPADDD(lt, e, e)
		ef := s.vec()
		VCVTDQ2PS(e, ef)
		x := s.vec()
		VANDPS(m, lt, x)
		VADDPS(m, x, x) // 2m or m
		VSUBPS(cf(1), x, x)

		z := s.vec()
		VMULPS(x, x, z)
		y := s.horner(logPoly, x)
		VMULPS(x, y, y)
		VMULPS(z, y, y)
		t := s.vec()
		VMULPS(cf(lnC2), ef, t)
		VADDPS(t, y, y)
		VMULPS(cf(0.5), z, t)
		VSUBPS(t, y, y)
		VADDPS(x, y, y)
		VMULPS(cf(lnC1), ef, t)
		VADDPS(t, y, y) // log u
		VMULPS(cf(-2), y, y)
		r := y
		VSQRTPS(y, r)

		// theta = f pi/2 and its sine and cosine.
		f := s.vec()
		VPSRLD(U8(9), b, f)
		VCVTDQ2PS(f, f)
		VADDPS(cf(0.5), f, f)
		VMULPS(cf(0x1p-23), f, f)
		VSUBPS(cf(0.5), f, f)
		VMULPS(cf(math.Pi/2), f, f)
		th := f
		zz := s.vec()
		VMULPS(th, th, zz)
		sn := s.horner(sinPoly, zz)
		VMULPS(zz, sn, sn)
		VMULPS(th, sn, sn)
		VADDPS(th, sn, sn)
		cs := s.horner(cosPoly, zz)
		VMULPS(zz, cs, cs)
		VMULPS(zz, cs, cs)
		VMULPS(cf(0.5), zz, t)
		VSUBPS(t, cs, cs)
		VADDPS(cf(1), cs, cs)

		// Swap by bit 0, signs from bits 1 and 2, scale by R.
		sw := s.vec()
		VPSLLD(U8(31), b, sw)
		VPSRAD(U8(31), sw, sw) // all ones where bit 0 is set
		d := s.vec()
		VXORPS(cs, sn, d)
		VANDPS(sw, d, d)
		p, q := cs, sn
		VXORPS(d, p, p) // sw ? sin : cos
		VXORPS(d, q, q) // sw ? cos : sin
		VMULPS(r, p, p)
		VMULPS(r, q, q)
		sg := s.vec()
		VPSLLD(U8(30), b, sg)
		VANDPS(cf(float32(math.Copysign(0, -1))), sg, sg)
		VXORPS(sg, p, p)
		VPSLLD(U8(29), b, sg)
		VANDPS(cf(float32(math.Copysign(0, -1))), sg, sg)
		VXORPS(sg, q, q)
		VMOVUPS(p, Mem{Base: dst, Disp: off})
		VMOVUPS(q, Mem{Base: dst, Disp: 64 + off})
	}
	ADDQ(U32(128), dst)
	DECQ(nb)
	JNZ(LabelRef("loop"))
	VZEROUPPER()
	RET()
}

// ---------------------------------------------------------------------------
// Sparse rows: GatherAxpy and ScatterAxpy (kern.go) on a chunk of nv
// vectors of columns, the last one masked to rem lanes. Each product is
// rounded before it is added, as in a sequence of Saxpy calls.

// chunkMask prepares the tail mask of rem lanes and returns the masked
// load and store of a chunk's last vector.
func (s isa) chunkMask(rem GPVirtual) (load func(m Mem, x VecVirtual), store func(x VecVirtual, m Mem)) {
	if s.avx512 {
		t := GP32()
		MOVL(U32(0xffff), t)
		BZHIL(rem.As32(), t, t)
		km := K()
		KMOVW(t, km)
		return func(m Mem, x VecVirtual) { VMOVUPS_Z(m, km, x) },
			func(x VecVirtual, m Mem) { VMOVUPS(x, km, m) }
	}
	maddr := GP64()
	LEAQ(maskTab, maddr)
	NEGQ(rem)
	mk := s.vec()
	VMOVUPS(Mem{Base: maddr, Index: rem, Scale: 4, Disp: 32}, mk)
	return func(m Mem, x VecVirtual) { VMASKMOVPS(m, mk, x) },
		func(x VecVirtual, m Mem) { VMASKMOVPS(x, mk, m) }
}

// sparseAxpy generates GatherAxpy (scatter false: y += alpha_k w_row(k),
// y in registers) or ScatterAxpy (scatter true: w_row(k) += alpha_k x, x
// in registers) on one chunk of nv vectors. The operand kept in
// registers is the parameter v, the rows are in w.
func (s isa) sparseAxpy(nv int, scatter bool) {
	name, sig := "gatherAxpy", "func(nk int, y, w *float32, ldw int, idx *int32, alpha *float32, rem int)"
	if scatter {
		name, sig = "scatterAxpy", "func(nk int, w *float32, ldw int, idx *int32, alpha, x *float32, rem int)"
	}
	name = fmt.Sprintf("%s%s_%d", name, s.name, nv)
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(fmt.Sprintf("%s is the kernel on %d vectors of columns.", name, nv))
	vp := "y"
	if scatter {
		vp = "x"
	}
	nk := Load(Param("nk"), GP64())
	vec := Load(Param(vp), GP64())
	w := Load(Param("w"), GP64())
	ldw := Load(Param("ldw"), GP64())
	idx := Load(Param("idx"), GP64())
	alpha := Load(Param("alpha"), GP64())
	rem := GP64()
	Load(Param("rem"), rem)
	SHLQ(U8(2), ldw)
	ld, st := s.chunkMask(rem)
	vb := 4 * s.lanes
	load := func(m Mem, x VecVirtual, v int) {
		if v == nv-1 {
			ld(m, x)
		} else {
			VMOVUPS(m, x)
		}
	}
	store := func(x VecVirtual, m Mem, v int) {
		if v == nv-1 {
			st(x, m)
		} else {
			VMOVUPS(x, m)
		}
	}
	reg := make([]VecVirtual, nv)
	for v := range nv {
		reg[v] = s.vec()
		load(Mem{Base: vec, Disp: v * vb}, reg[v], v)
	}
	TESTQ(nk, nk)
	JZ(LabelRef("done"))
	Label("loop")
	row := GP64()
	MOVLQSX(Mem{Base: idx}, row)
	IMULQ(ldw, row)
	ADDQ(w, row)
	bc := s.vec()
	VBROADCASTSS(Mem{Base: alpha}, bc)
	for v := range nv {
		m := Mem{Base: row, Disp: v * vb}
		t := s.vec()
		if scatter {
			r := s.vec()
			VMULPS(bc, reg[v], t)
			load(m, r, v)
			VADDPS(t, r, r)
			store(r, m, v)
		} else {
			load(m, t, v)
			VMULPS(bc, t, t)
			VADDPS(t, reg[v], reg[v])
		}
	}
	ADDQ(U8(4), idx)
	ADDQ(U8(4), alpha)
	DECQ(nk)
	JNZ(LabelRef("loop"))
	Label("done")
	if !scatter {
		for v := range nv {
			store(reg[v], Mem{Base: vec, Disp: v * vb}, v)
		}
	}
	VZEROUPPER()
	RET()
}

// ---------------------------------------------------------------------------
// Transpose

// transpose8 generates the transpose of a row of nb 8x8 blocks: block b
// of the 8 rows at src (row stride lds) goes to the 8 rows at
// dst + 8b*ldd (row stride ldd). It uses AVX (ymm) only, at both levels:
// 8 loads, 24 shuffles and 8 stores a block (unpack pairs of rows,
// shuffle pairs of pairs, exchange 128-bit halves).
func transpose8() {
	TEXT("transpose8x8", NOSPLIT, "func(nb int, src *float32, lds int, dst *float32, ldd int)")
	Pragma("noescape")
	Doc("transpose8x8 transposes nb 8x8 blocks side by side (see Transpose).")
	nb := Load(Param("nb"), GP64())
	src := Load(Param("src"), GP64())
	lds := Load(Param("lds"), GP64())
	dst := Load(Param("dst"), GP64())
	ldd := Load(Param("ldd"), GP64())
	SHLQ(U8(2), lds)
	SHLQ(U8(2), ldd)
	// Row i of a block is at base + i*stride: rows 0-2 from base, 3-5
	// from base + 3 stride, 6-7 from base + 6 stride.
	rowAddr := func(base, stride Register, i int) Mem {
		b := GP64()
		switch {
		case i < 3:
			MOVQ(base, b)
		case i < 6:
			LEAQ(Mem{Base: base, Index: stride, Scale: 2}, b)
			ADDQ(stride, b)
		default:
			LEAQ(Mem{Base: base, Index: stride, Scale: 4}, b)
			ADDQ(stride, b)
			ADDQ(stride, b)
		}
		switch i % 3 {
		case 0:
			return Mem{Base: b}
		case 1:
			return Mem{Base: b, Index: stride, Scale: 1}
		}
		return Mem{Base: b, Index: stride, Scale: 2}
	}
	Label("block")
	var r, t, u [8]VecVirtual
	for i := range 8 {
		r[i] = YMM()
		VMOVUPS(rowAddr(src, lds, i), r[i])
	}
	for i := 0; i < 8; i += 2 {
		t[i], t[i+1] = YMM(), YMM()
		VUNPCKLPS(r[i+1], r[i], t[i])
		VUNPCKHPS(r[i+1], r[i], t[i+1])
	}
	for _, g := range []int{0, 4} {
		for h, pair := range [][2]int{{0, 2}, {1, 3}} {
			a, b := t[g+pair[0]], t[g+pair[1]]
			u[g+2*h], u[g+2*h+1] = YMM(), YMM()
			VSHUFPS(U8(0x44), b, a, u[g+2*h])
			VSHUFPS(U8(0xee), b, a, u[g+2*h+1])
		}
	}
	for j := range 4 {
		lo, hi := YMM(), YMM()
		VPERM2F128(U8(0x20), u[j+4], u[j], lo)
		VPERM2F128(U8(0x31), u[j+4], u[j], hi)
		VMOVUPS(lo, rowAddr(dst, ldd, j))
		VMOVUPS(hi, rowAddr(dst, ldd, j+4))
	}
	ADDQ(U8(32), src)
	LEAQ(Mem{Base: dst, Index: ldd, Scale: 8}, dst)
	DECQ(nb)
	JNZ(LabelRef("block"))
	VZEROUPPER()
	RET()
}
