// Package ticks places round ticks on a chart's axis: 1, 2 or 5 times a
// power of ten apart (Heckbert 1990), labelled with the fewest decimals
// the step needs, in a power of a thousand with its SI prefix on large or
// tiny axes. The dashboard's charts (api) and the simulator's plots
// (simulators) use it.
package ticks

import (
	"math"
	"strconv"
)

// Nice returns a "nice" number, 1, 2 or 5 times a power of ten, close
// to x > 0: the nearest when round, otherwise the smallest not below x
// (Heckbert, "Nice numbers for graph labels", Graphics Gems, 1990).
func Nice(x float64, round bool) float64 {
	e := math.Floor(math.Log10(x))
	p := math.Pow(10, e)
	f := x / p
	var n float64
	if round {
		switch {
		case f < 1.5:
			n = 1
		case f < 3:
			n = 2
		case f < 7:
			n = 5
		default:
			n = 10
		}
	} else {
		switch {
		case f <= 1:
			n = 1
		case f <= 2:
			n = 2
		case f <= 5:
			n = 5
		default:
			n = 10
		}
	}
	return n * p
}

// Step is the tick step for about n ticks over [lo, hi] (hi > lo): a
// nice number (Nice), at least 1 when integer.
func Step(lo, hi float64, n int, integer bool) float64 {
	step := Nice((hi-lo)/float64(max(n-1, 1)), true)
	if integer && step < 1 {
		step = 1
	}
	return step
}

// Within returns the multiples of step in [lo, hi], computed as
// k*step so that they carry no accumulated rounding.
func Within(lo, hi, step float64) []float64 {
	var ts []float64
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9 && len(ts) < 100; k++ {
		t := k * step
		if t == 0 {
			t = 0 // not -0
		}
		ts = append(ts, t)
	}
	return ts
}

// Range widens [lo, hi] to an enclosing range whose ends are ticks:
// the y axis. A single value is widened around itself first.
func Range(lo, hi float64, n int, integer bool) (lo2, hi2, step float64) {
	if hi-lo <= 1e-9*math.Max(math.Abs(lo), math.Abs(hi)) || hi-lo < 1e-300 {
		pad := math.Abs(lo) * 0.1
		if pad == 0 || integer {
			pad = math.Max(pad, 1)
		}
		lo, hi = lo-pad, hi+pad
	}
	step = Step(lo, hi, n, integer)
	return math.Floor(lo/step+1e-9) * step, math.Ceil(hi/step-1e-9) * step, step
}

// siPrefixes name the powers of a thousand tick labels are written in.
var siPrefixes = map[int]string{-4: "p", -3: "n", -2: "µ", -1: "m", 0: "", 1: "k", 2: "M", 3: "G", 4: "T"}

// Format returns the labeller of ticks that are multiples of step
// with the largest magnitude maxAbs: every label with the same number of
// decimals, as few as step needs (none on an axis of whole numbers), in
// a power of a thousand with its SI prefix once maxAbs reaches 10,000 or
// step falls below 0.001 ("500k", "1.5M", "20µ").
func Format(step, maxAbs float64) func(float64) string {
	g := 0
	if maxAbs >= 1e4 || step < 1e-3 {
		g = int(math.Floor(math.Log10(math.Max(maxAbs, step)) / 3))
		g = min(max(g, -4), 4)
	}
	unit := math.Pow(1000, float64(g))
	dec := max(0, int(-math.Floor(math.Log10(step/unit)+1e-9)))
	return func(v float64) string {
		if math.Abs(v) < step*1e-6 {
			return "0"
		}
		return strconv.FormatFloat(v/unit, 'f', dec, 64) + siPrefixes[g]
	}
}
