package nn

import "sync"

// Data is an append-only bandit dataset: for each row a context x (Dim
// floats), the arm that was played and the reward observed for it. Only the
// played arm's reward is known (bandit feedback).
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
	d.x = append(d.x, x...)
	d.arm = append(d.arm, arm)
	d.y = append(d.y, y)
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
	}
}

// View is a fixed, read-only set of rows. Its methods may be called from any
// number of goroutines. The zero View has no rows and no dimension.
type View struct {
	dim, arms int
	x         []float64
	arm       []int
	y         []float64
}

// NewView wraps existing slices as a View without copying: x holds the
// contexts row-major (len(arm) rows of dim floats), arm the played arms and
// y the rewards. The caller must not modify the slices afterwards.
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
	return View{dim: dim, arms: arms, x: x[: n*dim : n*dim], arm: arm[:n:n], y: y[:n:n]}
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
	return v
}
