package nn

import (
	"slices"
	"sync"
)

// Data is an append-only bandit dataset: for each row a context x (Dim
// floats), the arm that was played and the reward observed for it. Only the
// played arm's reward is known (bandit feedback). Each row's non-zero
// entries are also kept as (column, value) pairs in float32, which the fast
// engine's first layer gathers and scatters instead of multiplying the
// zeros of one-hot contexts (see Evaluator32).
//
// One goroutine appends while any number of goroutines read Views taken
// earlier: Append writes only past the end of every existing View (into
// spare capacity or a new backing array), so a View is an immutable prefix
// that shares storage with the Data and costs nothing to take. Append and
// View may be called from different goroutines.
type Data struct {
	mu   sync.Mutex
	dim  int
	arms int
	x    []float64
	arm  []int
	y    []float64
	nz   nonzeros
}

// nonzeros holds the non-zero entries of the rows of a row-major matrix:
// row i's are idx[off[i]:off[i+1]] (columns) and val[off[i]:off[i+1]].
type nonzeros struct {
	off []int
	idx []int32
	val []float32
}

// appendRow appends the non-zero entries of x as the next row.
func (z *nonzeros) appendRow(x []float64) {
	if len(z.off) == 0 {
		z.off = append(z.off, 0)
	}
	for j, v := range x {
		if v != 0 {
			z.idx = append(z.idx, int32(j))
			z.val = append(z.val, float32(v))
		}
	}
	z.off = append(z.off, len(z.idx))
}

// prefix returns the entries of the first n rows, with capacities cut so
// that appends to z never write into them.
func (z nonzeros) prefix(n int) nonzeros {
	if len(z.off) == 0 {
		return nonzeros{}
	}
	k := z.off[n]
	return nonzeros{off: z.off[: n+1 : n+1], idx: z.idx[:k:k], val: z.val[:k:k]}
}

// row returns the columns and values of the non-zero entries of row i.
func (z nonzeros) row(i int) ([]int32, []float32) {
	lo, hi := z.off[i], z.off[i+1]
	return z.idx[lo:hi], z.val[lo:hi]
}

// NewData returns an empty dataset of contexts of dimension dim for a
// bandit with the given number of arms.
func NewData(dim, arms int) *Data {
	if dim < 1 || arms < 1 {
		panic("nn: dataset dimension and number of arms must be positive")
	}
	return &Data{dim: dim, arms: arms}
}

// Append copies one row onto the end of d. It panics if len(x) != Dim or
// the arm is out of range.
func (d *Data) Append(x []float64, arm int, y float64) {
	if len(x) != d.dim {
		panic("nn: context length does not match the dataset dimension")
	}
	if arm < 0 || arm >= d.arms {
		panic("nn: arm out of range")
	}
	d.mu.Lock()
	if cap(d.x)-len(d.x) < len(x) {
		// Double: a row at a time onto millions of values, append's
		// 1.25x growth of large slices copies each value about four
		// times over as the data grows, doubling about once (the copy
		// was a tenth of the service's CPU in its profile).
		d.x = slices.Grow(d.x, max(len(d.x), len(x)))
	}
	d.x = append(d.x, x...)
	d.arm = append(d.arm, arm)
	d.y = append(d.y, y)
	d.nz.appendRow(x)
	d.mu.Unlock()
}

// Len returns the number of rows appended so far.
func (d *Data) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.y)
}

// View returns the rows appended so far as an immutable View. Rows
// appended later are not visible through it.
func (d *Data) View() View {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.y)
	return View{
		dim:  d.dim,
		arms: d.arms,
		x:    d.x[: n*d.dim : n*d.dim],
		arm:  d.arm[:n:n],
		y:    d.y[:n:n],
		nz:   d.nz.prefix(n),
	}
}

// View is a fixed, read-only set of rows. Its methods may be called from any
// number of goroutines. The zero View has no rows and no dimension.
type View struct {
	dim, arms int
	x         []float64
	arm       []int
	y         []float64
	nz        nonzeros
}

// NewView wraps existing slices as a View without copying: x holds the
// contexts row-major (len(arm) rows of dim floats), arm the played arms and
// y the rewards. The caller must not modify the slices afterwards. It
// allocates only the list of the contexts' non-zero entries.
func NewView(dim, arms int, x []float64, arm []int, y []float64) View {
	if dim < 1 || arms < 1 {
		panic("nn: view dimension and number of arms must be positive")
	}
	if len(arm) != len(y) || len(x) != dim*len(y) {
		panic("nn: view slice lengths do not match")
	}
	for _, a := range arm {
		if a < 0 || a >= arms {
			panic("nn: arm out of range")
		}
	}
	n := len(y)
	var nz nonzeros
	for i := range n {
		nz.appendRow(x[i*dim : (i+1)*dim])
	}
	return View{dim: dim, arms: arms, x: x[: n*dim : n*dim], arm: arm[:n:n], y: y[:n:n], nz: nz.prefix(n)}
}

// Len returns the number of rows.
func (v View) Len() int { return len(v.y) }

// Dim returns the dimension of the contexts.
func (v View) Dim() int { return v.dim }

// Arms returns the number of arms.
func (v View) Arms() int { return v.arms }

// X returns the context of row i, a slice of shared storage that must not be
// modified.
func (v View) X(i int) []float64 { return v.x[i*v.dim : (i+1)*v.dim : (i+1)*v.dim] }

// Nonzeros returns the columns and values (as float32) of the non-zero
// entries of row i's context, slices of shared storage that must not be
// modified.
func (v View) Nonzeros(i int) (cols []int32, vals []float32) { return v.nz.row(i) }

// Arm returns the arm played in row i.
func (v View) Arm(i int) int { return v.arm[i] }

// Y returns the reward observed in row i.
func (v View) Y(i int) float64 { return v.y[i] }

// Prefix returns the View of the first n rows.
func (v View) Prefix(n int) View {
	if n < 0 || n > v.Len() {
		panic("nn: prefix length out of range")
	}
	v.x = v.x[: n*v.dim : n*v.dim]
	v.arm = v.arm[:n:n]
	v.y = v.y[:n:n]
	v.nz = v.nz.prefix(n)
	return v
}
