package api

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/refinery-bandits/refinery/internal/ticks"
)

// The dashboard's charts are SVG drawn here, on the server: no script
// library, nothing fetched by the browser.

// palette colours series in order (Okabe-Ito, readable by the colour
// blind).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

// colour is the i-th series' colour: the palette's, then, so that a
// bandit with more arms than it has (26 letters) draws no two alike,
// hues 137.5° (the golden angle) apart in two lightnesses.
func colour(i int) string {
	if i < len(palette) {
		return palette[i]
	}
	j := i - len(palette)
	return fmt.Sprintf("hsl(%.1f,65%%,%d%%)", math.Mod(20+137.508*float64(j), 360), [...]int{42, 62}[j%2])
}

// series is one line of a chart; NaN values leave gaps.
type series struct {
	name   string
	colour string
	x, y   []float64
}

// chart is the frame of a line or area chart.
type chart struct {
	title  string
	w, h   int
	xTitle string
	// xTime makes the x axis seconds relative to now (x <= 0), from
	// the oldest point to now, labelled by secondsAgo on whole seconds
	// or minutes (timeStep).
	xTime bool
	// xInt and yInt make an axis's ticks whole numbers (counts,
	// versions).
	xInt, yInt bool
	// yMin0 makes the y range include 0.
	yMin0 bool
	// yFix, when yHi > yLo, fixes the y range.
	yLo, yHi float64
}

const (
	padLeft, padRight, padTop, padBottom = 52, 10, 22, 30
	// legendRow is the height of one row of legend entries drawn below
	// the title when they do not fit beside it.
	legendRow = 14
	// yTicks and xTicks are the number of tick labels aimed at
	// (niceTicks may give one or two more or fewer).
	yTicks, xTicks = 4, 4
)

// fmtNum formats a single value (a bar's label), to about three
// significant digits.
func fmtNum(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 1e5 || a < 1e-3:
		return strconv.FormatFloat(v, 'e', 1, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// The axes' ticks: internal/ticks, shared with the simulator's plots.
var (
	niceStep    = ticks.Step
	ticksWithin = ticks.Within
	niceRange   = ticks.Range
	tickFormat  = ticks.Format
)

// timeSteps are the tick steps of a time axis, in seconds: whole
// seconds, then whole minutes.
var timeSteps = []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600}

// timeStep is the smallest of timeSteps that puts at most n ticks in
// [lo, hi].
func timeStep(lo, hi float64, n int) float64 {
	for _, s := range timeSteps {
		if (hi-lo)/s <= float64(n-1) {
			return s
		}
	}
	return niceStep(lo, hi, n, true)
}

// secondsAgo returns the labeller of a time axis in seconds relative to
// now whose ticks are step apart: "now", then "-30s" or, on a step of
// whole minutes, "-2m".
func secondsAgo(step float64) func(float64) string {
	return func(v float64) string {
		switch {
		case v >= -0.5:
			return "now"
		case step >= 60:
			return fmt.Sprintf("%.0fm", v/60)
		default:
			return fmt.Sprintf("%.0fs", v)
		}
	}
}

// bounds returns the ranges of the finite points of ss.
func bounds(ss []series) (x0, x1, y0, y1 float64, ok bool) {
	x0, y0 = math.Inf(1), math.Inf(1)
	x1, y1 = math.Inf(-1), math.Inf(-1)
	for _, s := range ss {
		for i, y := range s.y {
			x := s.x[i]
			if math.IsNaN(y) || math.IsInf(y, 0) || math.IsNaN(x) {
				continue
			}
			ok = true
			x0, x1 = math.Min(x0, x), math.Max(x1, x)
			y0, y1 = math.Min(y0, y), math.Max(y1, y)
		}
	}
	return
}

// frame holds the mapping from data to pixels and the ticks.
type frame struct {
	c              chart
	x0, x1, y0, y1 float64
	// top is the y of the plot area's top edge: below the title and the
	// legend rows (c.h has grown by the rows).
	top            float64
	xticks, yticks []float64
	xfmt, yfmt     func(float64) string
	legend         []legendEntry
}

func (f frame) px(x float64) float64 {
	return padLeft + (x-f.x0)/(f.x1-f.x0)*float64(f.c.w-padLeft-padRight)
}

func (f frame) py(y float64) float64 {
	return float64(f.c.h-padBottom) - (y-f.y0)/(f.y1-f.y0)*(float64(f.c.h-padBottom)-f.top)
}

// legendEntry is one series' swatch and name, placed.
type legendEntry struct {
	x, y   float64 // the swatch's top left corner
	colour string
	name   string
}

// Estimated text widths in pixels per character of the chart's fonts
// (dashboard.css: titles 12px bold, legend 11px); generous, so that a
// legend placed by them does not touch the title (the browser test
// measures the drawn boxes).
const titleCharW, legendCharW, tickCharW = 7.5, 7.0, 7.0

// layoutLegend places the legend of ss: on the title's row, right
// aligned, when it fits beside the title, otherwise left aligned in rows
// below it, as many as it takes. It returns the entries and the number
// of rows added below the title.
func layoutLegend(title string, w int, ss []series) ([]legendEntry, int) {
	width := func(s series) float64 { return legendCharW*float64(len([]rune(s.name))) + 18 }
	var total float64
	for _, s := range ss {
		total += width(s)
	}
	titleEnd := 4 + titleCharW*float64(len([]rune(title))) + 12
	right := float64(w - padRight)
	out := make([]legendEntry, len(ss))
	if titleEnd+total <= right {
		x := right - total
		for i, s := range ss {
			out[i] = legendEntry{x: x, y: 6, colour: s.colour, name: s.name}
			x += width(s)
		}
		return out, 0
	}
	rows, x := 1, 4.0
	for i, s := range ss {
		if x > 4 && x+width(s) > right {
			rows++
			x = 4
		}
		out[i] = legendEntry{x: x, y: float64(padTop + (rows-1)*legendRow), colour: s.colour, name: s.name}
		x += width(s)
	}
	return out, rows
}

// open starts the SVG with its title, legend, axes and tick labels.
func (f frame) open(b *strings.Builder) {
	c := f.c
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`, c.w, c.h, c.w, c.h, html.EscapeString(c.title))
	fmt.Fprintf(b, `<text x="4" y="14" class="ct">%s</text>`, html.EscapeString(c.title))
	for _, e := range f.legend {
		fmt.Fprintf(b, `<g class="lge"><rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f" class="lg">%s</text></g>`, e.x, e.y, e.colour, e.x+13, e.y+9, html.EscapeString(e.name))
	}
	bottom, right := float64(c.h-padBottom), float64(c.w-padRight)
	for _, y := range f.yticks {
		fmt.Fprintf(b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" class="grid"/>`, padLeft, right, f.py(y), f.py(y))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" class="tk yt" text-anchor="end">%s</text>`, padLeft-4, f.py(y)+4, html.EscapeString(f.yfmt(y)))
	}
	for _, x := range f.xticks {
		anchor := "middle"
		if px := f.px(x); px < padLeft+12 {
			anchor = "start"
		} else if px > right-12 {
			anchor = "end"
		}
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" class="tk xt" text-anchor="%s">%s</text>`, f.px(x), bottom+14, anchor, html.EscapeString(f.xfmt(x)))
	}
	if c.xTitle != "" {
		fmt.Fprintf(b, `<text x="%.0f" y="%d" class="tk" text-anchor="middle">%s</text>`, float64(padLeft+c.w-padRight)/2, c.h-2, html.EscapeString(c.xTitle))
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.0f" y2="%.0f" class="axis"/><line x1="%d" x2="%.0f" y1="%.0f" y2="%.0f" class="axis"/>`,
		padLeft, padLeft, f.top, bottom, padLeft, right, bottom, bottom)
}

// empty is a chart with no data yet.
func (c chart) empty() string { return c.note("waiting for data") }

// note is a chart without data that says why.
func (c chart) note(msg string) string {
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s"><text x="4" y="14" class="ct">%s</text><text x="%d" y="%d" class="tk" text-anchor="middle">%s</text></svg>`,
		c.w, c.h, c.w, c.h, html.EscapeString(c.title), html.EscapeString(c.title), c.w/2, c.h/2, html.EscapeString(msg))
}

func (c chart) frame(ss []series) (frame, bool) {
	x0, x1, y0, y1, ok := bounds(ss)
	if !ok {
		return frame{}, false
	}
	if c.yHi > c.yLo {
		y0, y1 = c.yLo, c.yHi
	}
	if c.yMin0 {
		y0, y1 = math.Min(y0, 0), math.Max(y1, 0)
	}
	f := frame{c: c}
	var rows int
	f.legend, rows = layoutLegend(c.title, c.w, ss)
	f.c.h += rows * legendRow
	f.top = float64(padTop + rows*legendRow)

	// y: widened to ticks at both ends (a fixed range is kept).
	var ystep float64
	if c.yHi > c.yLo {
		ystep = niceStep(y0, y1, yTicks, c.yInt)
	} else {
		y0, y1, ystep = niceRange(y0, y1, yTicks, c.yInt)
	}
	f.y0, f.y1 = y0, y1
	f.yticks = ticksWithin(y0, y1, ystep)
	f.yfmt = tickFormat(ystep, math.Max(math.Abs(y0), math.Abs(y1)))

	// x: the data's range, ticks inside it.
	if c.xTime {
		x1 = 0 // the right edge is now
	}
	if x1-x0 < 1e-9 {
		x0, x1 = x0-1, x1+1
	}
	f.x0, f.x1 = x0, x1
	if c.xTime {
		xstep := timeStep(x0, x1, xTicks)
		f.xticks, f.xfmt = ticksWithin(x0, x1, xstep), secondsAgo(xstep)
	} else {
		xstep := niceStep(x0, x1, xTicks, c.xInt)
		f.xticks = ticksWithin(x0, x1, xstep)
		f.xfmt = tickFormat(xstep, math.Max(math.Abs(x0), math.Abs(x1)))
	}
	return f, true
}

// lines draws ss as polylines. Each series' last line carries its last
// finite value as data-last, so that what a chart draws can be checked
// against the numbers beside it (the browser test does).
func (c chart) lines(ss []series) string {
	f, ok := c.frame(ss)
	if !ok {
		return c.empty()
	}
	var b strings.Builder
	f.open(&b)
	for _, s := range ss {
		lastIdx := -1
		for i, y := range s.y {
			if !math.IsNaN(y) && !math.IsInf(y, 0) {
				lastIdx = i
			}
		}
		var pts []string
		var attr string // on the run holding the last finite value
		flush := func() {
			if len(pts) == 1 {
				fmt.Fprintf(&b, `<circle r="2" fill="%s" cx="%s" cy="%s"%s/>`, s.colour, strings.Split(pts[0], ",")[0], strings.Split(pts[0], ",")[1], attr)
			} else if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"%s/>`, s.colour, strings.Join(pts, " "), attr)
			}
			pts = pts[:0]
		}
		for i, y := range s.y {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.px(s.x[i]), f.py(y)))
			if i == lastIdx {
				attr = fmt.Sprintf(` data-last="%s"`, strconv.FormatFloat(y, 'g', -1, 64))
			}
		}
		flush()
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// stacked draws ss as areas stacked in order; the y values of each
// point should add up to at most 1. A point where no series has a value
// (no decisions in the window) is a gap: each run of points with values
// is drawn on its own, so no area is drawn across it.
func (c chart) stacked(ss []series) string {
	c.yLo, c.yHi = 0, 1
	f, ok := c.frame(ss)
	if !ok {
		return c.empty()
	}
	var b strings.Builder
	f.open(&b)
	// The runs of consecutive points where some series has a value.
	var runs [][]int
	var run []int
	for i := range ss[0].x {
		has := false
		for _, s := range ss {
			has = has || !math.IsNaN(s.y[i])
		}
		if has {
			run = append(run, i)
			continue
		}
		if len(run) > 0 {
			runs = append(runs, run)
		}
		run = nil
	}
	if len(run) > 0 {
		runs = append(runs, run)
	}
	base := make([]float64, len(ss[0].x))
	for _, s := range ss {
		for _, run := range runs {
			var top, bot []string
			for _, i := range run {
				y := s.y[i]
				if math.IsNaN(y) {
					y = 0
				}
				top = append(top, fmt.Sprintf("%.1f,%.1f", f.px(s.x[i]), f.py(base[i]+y)))
				bot = append(bot, fmt.Sprintf("%.1f,%.1f", f.px(s.x[i]), f.py(base[i])))
				base[i] += y
			}
			slices.Reverse(bot)
			fmt.Fprintf(&b, `<polygon fill="%s" fill-opacity="0.8" stroke="none" points="%s %s"/>`, s.colour, strings.Join(top, " "), strings.Join(bot, " "))
		}
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// bars draws one horizontal bar per value with its label and value.
func (c chart) bars(labels []string, values []float64) string {
	if len(values) == 0 {
		return c.empty()
	}
	var hi float64
	for _, v := range values {
		hi = math.Max(hi, v)
	}
	if hi <= 0 {
		hi = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`, c.w, c.h, c.w, c.h, html.EscapeString(c.title))
	fmt.Fprintf(&b, `<text x="4" y="14" class="ct">%s</text>`, html.EscapeString(c.title))
	// The labels' column is as wide as the longest label needs (at the
	// tick font's width per character), so that none is cut.
	const valueW = 60
	labelW := 90
	for _, l := range labels {
		labelW = max(labelW, int(tickCharW*float64(len([]rune(l))))+8)
	}
	row := float64(c.h-padTop-4) / float64(len(values))
	for i, v := range values {
		y := float64(padTop) + float64(i)*row
		w := v / hi * float64(c.w-labelW-valueW)
		fmt.Fprintf(&b, `<text x="4" y="%.1f" class="tk">%s</text>`, y+row/2+4, html.EscapeString(labels[i]))
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`, labelW, y+2, math.Max(w, 1), math.Max(row-4, 2), colour(0))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="tk">%s</text>`, float64(labelW)+w+4, y+row/2+4, fmtNum(v))
	}
	b.WriteString(`</svg>`)
	return b.String()
}
