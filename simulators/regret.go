package simulators

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
)

// Regret accumulates the regret of one run (one policy, one seed) and
// keeps a thinned series of it for plots and CSV files.
//
// With context c_t, chosen arm a_t, expected rewards μ(c, a) and the
// oracle's arm a*_t = argmax_a μ(c_t, a) (Step.Best), after T steps
//
//	expected regret  R_T = Σ_t μ(c_t, a*_t) − μ(c_t, a_t)
//	realized regret  Q_T = Σ_t r_t(a*_t) − r_t(a_t)
//
// where r_t(a) is arm a's reward in step t, all arms' rewards being drawn
// together in Env.Next before the policy chooses (Step.Realized). The
// realized regret thus compares the chosen arm with the oracle on the
// very same draw of the noise: in the mushroom bandit, on the same toss
// of the poisonous coin. This is the definition of the Deep Bayesian
// Bandits benchmark (Riquelme et al. 2018, whose samplers store the
// optimal arm's reward r[opt_action] from the same reward vector as the
// others). The oracle is the best arm in expectation, not the best arm in
// hindsight, so Q can be negative: eating a poisonous mushroom that
// happens to pay +5 has realized regret 0 − 5 = −5 while its expected
// regret is 0 − (−15) = 15. E[Q_T] = E[R_T]; R_T has less variance and is
// the figure to compare policies by.
type Regret struct {
	every              int
	steps              int
	expected, realized float64
	points             []RegretPoint
}

// RegretPoint is the cumulative regret after Step steps (1-based).
type RegretPoint struct {
	Step     int
	Expected float64
	Realized float64
}

// NewRegret returns a tracker that keeps a point every `every` steps (1
// keeps every step); the last step is always reported by Points. It
// panics if every < 1.
func NewRegret(every int) *Regret {
	if every < 1 {
		panic(fmt.Sprintf("simulators: NewRegret(%d), want every >= 1", every))
	}
	return &Regret{every: every}
}

// Record adds the regret of choosing arm in step s and returns the
// step's instantaneous expected and realized regret.
func (r *Regret) Record(s Step, arm int) (expected, realized float64) {
	expected, realized = s.Regret(arm)
	r.steps++
	r.expected += expected
	r.realized += realized
	if r.steps%r.every == 0 {
		r.points = append(r.points, r.current())
	}
	return expected, realized
}

func (r *Regret) current() RegretPoint {
	return RegretPoint{Step: r.steps, Expected: r.expected, Realized: r.realized}
}

// Steps returns the number of steps recorded.
func (r *Regret) Steps() int { return r.steps }

// Cumulative returns the cumulative expected and realized regret so far.
func (r *Regret) Cumulative() (expected, realized float64) { return r.expected, r.realized }

// Points returns the kept series: every `every`-th step, and the last
// step recorded even if it is not a multiple of every. The caller may
// modify the result.
func (r *Regret) Points() []RegretPoint {
	pts := append([]RegretPoint(nil), r.points...)
	if r.steps > 0 && r.steps%r.every != 0 {
		pts = append(pts, r.current())
	}
	return pts
}

// WriteCSV writes the series with a header line:
//
//	step,cumulative_expected_regret,cumulative_realized_regret
//
// Numbers use the shortest representation that reads back exactly.
func (r *Regret) WriteCSV(w io.Writer) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("step,cumulative_expected_regret,cumulative_realized_regret\n")
	var buf []byte
	for _, p := range r.Points() {
		buf = strconv.AppendInt(buf[:0], int64(p.Step), 10)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, p.Expected, 'g', -1, 64)
		buf = append(buf, ',')
		buf = strconv.AppendFloat(buf, p.Realized, 'g', -1, 64)
		buf = append(buf, '\n')
		bw.Write(buf)
	}
	return bw.Flush()
}
