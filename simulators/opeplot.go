package simulators

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// SaveOPEPlot draws an OPE report to path (png or svg, saveFigure): per
// candidate along the x axis, each estimator's value as a point with its
// interval as an error bar, side by side in the estimators' order; truth,
// when it has the candidate, as a black cross (the value measured by
// running the candidate: make bench-ope).
func SaveOPEPlot(path, title string, rep *OPEReport, truth map[string]float64) error {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = "value (mean reward per decision)"
	p.Add(plotter.NewGrid())
	var names []string
	order := []string{EstIPS, EstClippedIPS, EstSNIPS, EstDR, EstDM, EstSwitch}
	const width = 0.7 // of one candidate's slot
	for ei, est := range order {
		var pts plotter.XYs
		var errs plotter.YErrors
		for ci, c := range rep.Candidates {
			for _, e := range c.Estimates {
				if e.Estimator != est || math.IsNaN(e.Value) {
					continue
				}
				x := float64(ci) - width/2 + width*(float64(ei)+0.5)/float64(len(order))
				pts = append(pts, plotter.XY{X: x, Y: e.Value})
				errs = append(errs, struct{ Low, High float64 }{e.Value - e.Lo, e.Hi - e.Value})
			}
		}
		if len(pts) == 0 {
			continue
		}
		c := palette[ei%len(palette)]
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = c
		sc.GlyphStyle.Radius = vg.Points(3)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{pts, errs})
		if err != nil {
			return err
		}
		bars.LineStyle.Color = c
		bars.LineStyle.Width = vg.Points(1.2)
		p.Add(bars, sc)
		p.Legend.Add(est, sc)
	}
	var tp plotter.XYs
	for ci, c := range rep.Candidates {
		names = append(names, c.Name)
		if v, ok := truth[c.Name]; ok {
			tp = append(tp, plotter.XY{X: float64(ci), Y: v})
		}
	}
	if len(tp) > 0 {
		sc, err := plotter.NewScatter(tp)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = color.Black
		sc.GlyphStyle.Radius = vg.Points(5)
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		p.Add(sc)
		p.Legend.Add("truth", sc)
	}
	// The y axis holds every interval and truth (the scatter alone
	// would cut the bars).
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range rep.Candidates {
		for _, e := range c.Estimates {
			if !math.IsNaN(e.Lo) && !math.IsNaN(e.Hi) {
				lo, hi = math.Min(lo, e.Lo), math.Max(hi, e.Hi)
			}
		}
		if v, ok := truth[c.Name]; ok {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if lo < hi {
		pad := 0.05 * (hi - lo)
		p.Y.Min, p.Y.Max = lo-pad, hi+pad
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(names))-0.5
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return saveFigure(p, path)
}
