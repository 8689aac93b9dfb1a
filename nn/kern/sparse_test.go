package kern

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// sparseCase draws a sparse row of nk entries (rows of a 117-row w, with
// repeats) and a w with row stride ldw >= n.
func sparseCase(rng *rand.Rand, n, nk int) (w []float32, ldw int, idx []int32, alpha []float32) {
	ldw = n + rng.IntN(3)
	w = withOffset(rng, 116*ldw+n)
	idx = make([]int32, nk)
	for k := range idx {
		idx[k] = int32(rng.IntN(117))
	}
	return w, ldw, idx, withOffset(rng, nk+rng.IntN(2))
}

// TestGatherScatterAgainstSaxpy checks GatherAxpy and ScatterAxpy at
// every level for equality with the sequence of Saxpy calls that defines
// them (portable level), and that sequence against float64 with the
// bound nk*eps32*sum|terms| of any float32 summation.
func TestGatherScatterAgainstSaxpy(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(19, 20))
		for _, n := range sizes {
			for _, nk := range []int{0, 1, 2, 22, 40} {
				w, ldw, idx, alpha := sparseCase(rng, n, nk)
				y := withOffset(rng, n)

				want := append([]float32(nil), y...)
				want64 := make([]float64, n)
				bound := make([]float64, n)
				for i := range y {
					want64[i], bound[i] = float64(y[i]), math.Abs(float64(y[i]))
				}
				portableDo(func() {
					for k, r := range idx {
						row := w[int(r)*ldw : int(r)*ldw+n]
						Saxpy(alpha[k], row, want)
						for i, v := range row {
							p := float64(alpha[k]) * float64(v)
							want64[i] += p
							bound[i] += math.Abs(p)
						}
					}
				})
				got := append([]float32(nil), y...)
				GatherAxpy(got, w, ldw, idx, alpha)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("GatherAxpy n=%d nk=%d: y[%d] = %g, want %g", n, nk, i, got[i], want[i])
					}
					if math.Abs(float64(got[i])-want64[i]) > float64(nk+1)*eps32*bound[i] {
						t.Fatalf("GatherAxpy n=%d nk=%d: y[%d] = %g, float64 %g", n, nk, i, got[i], want64[i])
					}
				}

				ws := append([]float32(nil), w...)
				portableDo(func() {
					for k, r := range idx {
						Saxpy(alpha[k], y, ws[int(r)*ldw:int(r)*ldw+n])
					}
				})
				wg := append([]float32(nil), w...)
				ScatterAxpy(wg, ldw, idx, alpha, y)
				for i := range ws {
					if wg[i] != ws[i] {
						t.Fatalf("ScatterAxpy n=%d nk=%d: w[%d] = %g, want %g", n, nk, i, wg[i], ws[i])
					}
				}
			}
		}
	})
}

// TestGatherAxpyRowsMatchesGatherAxpy checks GatherAxpyRows at every level
// bit for bit against a GatherAxpy per row (portable level), with empty
// rows, rows of one entry and offsets that do not start at 0.
func TestGatherAxpyRowsMatchesGatherAxpy(t *testing.T) {
	eachLevel(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(23, 24))
		for _, n := range sizes {
			for _, rows := range []int{0, 1, 5, 40} {
				w, ldw, idx, alpha := sparseCase(rng, n, 30*rows+3)
				off := make([]int32, rows+1)
				off[0] = int32(rng.IntN(3))
				for i := range rows {
					step := rng.IntN(4) * rng.IntN(12) // many empty rows
					off[i+1] = off[i] + int32(min(step, 3+30*rows-int(off[i])))
				}
				ldy := n + rng.IntN(3)
				y := withOffset(rng, max(0, (rows-1)*ldy+n))
				want := append([]float32(nil), y...)
				portableDo(func() {
					for i := range rows {
						GatherAxpy(want[i*ldy:i*ldy+n], w, ldw, idx[off[i]:off[i+1]], alpha[off[i]:off[i+1]])
					}
				})
				got := append([]float32(nil), y...)
				GatherAxpyRows(got, ldy, n, w, ldw, off, idx, alpha)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d rows=%d: y[%d] = %g, want %g", n, rows, i, got[i], want[i])
					}
				}
			}
		}
	})
}

// TestSparseBadInput checks the messages of misuse.
func TestSparseBadInput(t *testing.T) {
	w := make([]float32, 20)
	y := make([]float32, 5)
	for _, c := range []struct {
		name string
		run  func()
		want string
	}{
		{"row past the end", func() { GatherAxpy(y, w, 5, []int32{4}, []float32{1}) }, "row 4 outside w"},
		{"negative row", func() { ScatterAxpy(w, 5, []int32{-1}, []float32{1}, y) }, "row -1 outside w"},
		{"short alpha", func() { GatherAxpy(y, w, 5, []int32{0, 1}, []float32{1}) }, "alpha shorter than idx"},
		{"short stride", func() { GatherAxpy(y, w, 4, []int32{0}, []float32{1}) }, "row stride shorter"},
		{"rows: row past the end", func() { GatherAxpyRows(y, 5, 5, w, 5, []int32{0, 1}, []int32{4}, []float32{1}) }, "row 4 outside w"},
		{"rows: decreasing off", func() { GatherAxpyRows(y, 5, 5, w, 5, []int32{1, 0}, []int32{0}, []float32{1}) }, "off decreasing"},
		{"rows: off past idx", func() { GatherAxpyRows(y, 5, 5, w, 5, []int32{0, 2}, []int32{0}, []float32{1, 1}) }, "off outside idx"},
		{"rows: short y", func() { GatherAxpyRows(y, 5, 5, w, 5, []int32{0, 0, 0}, nil, nil) }, "y too short"},
		{"rows: empty off", func() { GatherAxpyRows(y, 5, 5, w, 5, nil, nil, nil) }, "empty off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, c.want) {
					t.Errorf("panic %q, want one containing %q", msg, c.want)
				}
			}()
			c.run()
		})
	}
}

// BenchmarkGather is the first layer of the paper's network on one-hot
// mushroom contexts: 64 rows of 22 non-zeros into 100 units, by
// GatherAxpy and ScatterAxpy against the loop of Saxpy calls they replace.
func BenchmarkGather(b *testing.B) {
	const rows, nk, n = 64, 22, 100
	rng := rand.New(rand.NewPCG(21, 22))
	w, _, idx, alpha := sparseCase(rng, n, rows*nk)
	ldw := n
	w = w[:117*n]
	y := make([]float32, rows*n)
	flops := 2 * float64(rows*nk*n)
	b.Run("GatherAxpy", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				for i := range rows {
					GatherAxpy(y[i*n:(i+1)*n], w, ldw, idx[i*nk:(i+1)*nk], alpha[i*nk:])
				}
			}
			reportFlops(b, flops)
		})
	})
	b.Run("ScatterAxpy", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				for i := range rows {
					ScatterAxpy(w, ldw, idx[i*nk:(i+1)*nk], alpha[i*nk:], y[i*n:(i+1)*n])
				}
			}
			reportFlops(b, flops)
		})
	})
	b.Run("SaxpyLoop", func(b *testing.B) {
		benchLevels(b, func(b *testing.B) {
			for b.Loop() {
				for i := range rows {
					yi := y[i*n : (i+1)*n]
					for k, r := range idx[i*nk : (i+1)*nk] {
						Saxpy(alpha[i*nk+k], w[int(r)*ldw:int(r)*ldw+n], yi)
					}
				}
			}
			reportFlops(b, flops)
		})
	})
}
