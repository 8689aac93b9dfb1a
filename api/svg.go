package api

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// The dashboard's charts are SVG drawn here, on the server: no script
// library, nothing fetched by the browser.

// palette colours series in order (Okabe-Ito, readable by the colour
// blind).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

func colour(i int) string { return palette[i%len(palette)] }

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
	// xFormat labels the x axis; nil means %g.
	xFormat func(float64) string
	// yMin0 makes the y range include 0.
	yMin0 bool
	// yFix, when yHi > yLo, fixes the y range.
	yLo, yHi float64
}

const (
	padLeft, padRight, padTop, padBottom = 52, 10, 22, 30
)

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

// secondsAgo labels a time axis in seconds relative to now.
func secondsAgo(v float64) string {
	if v >= -0.5 {
		return "now"
	}
	if v <= -60 {
		return fmt.Sprintf("%.0fm", math.Round(v/6)/10)
	}
	return fmt.Sprintf("%.0fs", v)
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

// frame holds the mapping from data to pixels.
type frame struct {
	c              chart
	x0, x1, y0, y1 float64
}

func (f frame) px(x float64) float64 {
	return padLeft + (x-f.x0)/(f.x1-f.x0)*float64(f.c.w-padLeft-padRight)
}

func (f frame) py(y float64) float64 {
	return float64(f.c.h-padBottom) - (y-f.y0)/(f.y1-f.y0)*float64(f.c.h-padTop-padBottom)
}

// open starts the SVG with its title, axes and tick labels.
func (f frame) open(b *strings.Builder, legend []series) {
	c := f.c
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s">`, c.w, c.h, c.w, c.h, html.EscapeString(c.title))
	fmt.Fprintf(b, `<text x="4" y="14" class="ct">%s</text>`, html.EscapeString(c.title))
	lx := float64(c.w - padRight)
	for i := len(legend) - 1; i >= 0; i-- {
		s := legend[i]
		lx -= float64(7*len(s.name) + 18)
		fmt.Fprintf(b, `<rect x="%.0f" y="6" width="10" height="10" fill="%s"/><text x="%.0f" y="15" class="lg">%s</text>`, lx, s.colour, lx+13, html.EscapeString(s.name))
	}
	bottom, right := float64(c.h-padBottom), float64(c.w-padRight)
	for i := range 3 {
		y := f.y0 + float64(i)*(f.y1-f.y0)/2
		fmt.Fprintf(b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" class="grid"/>`, padLeft, right, f.py(y), f.py(y))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" class="tk" text-anchor="end">%s</text>`, padLeft-4, f.py(y)+4, fmtNum(y))
	}
	xf := c.xFormat
	if xf == nil {
		xf = fmtNum
	}
	for i := range 3 {
		x := f.x0 + float64(i)*(f.x1-f.x0)/2
		anchor := [...]string{"start", "middle", "end"}[i]
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" class="tk" text-anchor="%s">%s</text>`, f.px(x), bottom+14, anchor, html.EscapeString(xf(x)))
	}
	if c.xTitle != "" {
		fmt.Fprintf(b, `<text x="%.0f" y="%d" class="tk" text-anchor="middle">%s</text>`, float64(padLeft+c.w-padRight)/2, c.h-2, html.EscapeString(c.xTitle))
	}
	fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%d" y2="%.0f" class="axis"/><line x1="%d" x2="%.0f" y1="%.0f" y2="%.0f" class="axis"/>`,
		padLeft, padLeft, padTop, bottom, padLeft, right, bottom, bottom)
}

// empty is a chart with no data yet.
func (c chart) empty() string {
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" aria-label="%s"><text x="4" y="14" class="ct">%s</text><text x="%d" y="%d" class="tk" text-anchor="middle">waiting for data</text></svg>`,
		c.w, c.h, c.w, c.h, html.EscapeString(c.title), html.EscapeString(c.title), c.w/2, c.h/2)
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
	if y1-y0 < 1e-9 {
		y0, y1 = y0-1, y1+1
	} else if !(c.yHi > c.yLo) {
		pad := (y1 - y0) * 0.05
		if !(c.yMin0 && y0 == 0) {
			y0 -= pad
		}
		y1 += pad
	}
	if x1-x0 < 1e-9 {
		x0, x1 = x0-1, x1+1
	}
	return frame{c: c, x0: x0, x1: x1, y0: y0, y1: y1}, true
}

// lines draws ss as polylines.
func (c chart) lines(ss []series) string {
	f, ok := c.frame(ss)
	if !ok {
		return c.empty()
	}
	var b strings.Builder
	f.open(&b, ss)
	for _, s := range ss {
		var pts []string
		flush := func() {
			if len(pts) == 1 {
				fmt.Fprintf(&b, `<circle r="2" fill="%s" cx="%s" cy="%s"/>`, s.colour, strings.Split(pts[0], ",")[0], strings.Split(pts[0], ",")[1])
			} else if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>`, s.colour, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for i, y := range s.y {
			if math.IsNaN(y) || math.IsInf(y, 0) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", f.px(s.x[i]), f.py(y)))
		}
		flush()
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// stacked draws ss as areas stacked in order; the y values of each
// point should add up to at most 1.
func (c chart) stacked(ss []series) string {
	c.yLo, c.yHi = 0, 1
	f, ok := c.frame(ss)
	if !ok {
		return c.empty()
	}
	var b strings.Builder
	f.open(&b, ss)
	// Only the points where some series has a value.
	var keep []int
	for i := range ss[0].x {
		for _, s := range ss {
			if !math.IsNaN(s.y[i]) {
				keep = append(keep, i)
				break
			}
		}
	}
	base := make([]float64, len(ss[0].x))
	for _, s := range ss {
		var top, bot []string
		for _, i := range keep {
			y := s.y[i]
			if math.IsNaN(y) {
				y = 0
			}
			top = append(top, fmt.Sprintf("%.1f,%.1f", f.px(s.x[i]), f.py(base[i]+y)))
			bot = append(bot, fmt.Sprintf("%.1f,%.1f", f.px(s.x[i]), f.py(base[i])))
			base[i] += y
		}
		for i, j := 0, len(bot)-1; i < j; i, j = i+1, j-1 {
			bot[i], bot[j] = bot[j], bot[i]
		}
		fmt.Fprintf(&b, `<polygon fill="%s" fill-opacity="0.8" stroke="none" points="%s %s"/>`, s.colour, strings.Join(top, " "), strings.Join(bot, " "))
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
	const labelW, valueW = 90, 60
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
