package main

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// cdf turns sorted lateness (ms) into at most about 2000 points of
// (lateness, fraction of jobs at most that late), keeping both ends.
func cdf(late []float64, floor float64) plotter.XYs {
	n := len(late)
	step := max(1, n/2000)
	var xy plotter.XYs
	for i := 0; i < n; i += step {
		xy = append(xy, plotter.XY{X: math.Max(late[i], floor), Y: float64(i+1) / float64(n)})
	}
	if n > 0 && (n-1)%step != 0 {
		xy = append(xy, plotter.XY{X: math.Max(late[n-1], floor), Y: 1})
	}
	return xy
}

// systemColor keeps one colour per system across every PNG.
var systemColor = map[string]color.RGBA{
	"delayd-ack":   {0x1f, 0x4e, 0xc8, 0xff}, // blue
	"delayd-pipe":  {0x0b, 0x2a, 0x7a, 0xff}, // navy
	"delayd-mpop":  {0x6a, 0x8c, 0xf0, 0xff}, // light blue
	"delayd-blpop": {0x17, 0xa8, 0xc0, 0xff}, // teal
	"redis-zset":   {0xd6, 0x27, 0x28, 0xff}, // red
	"asynq":        {0xff, 0x8c, 0x00, 0xff}, // orange
	"asynq-10ms":   {0x94, 0x4d, 0xbf, 0xff}, // purple
	"bullmq":       {0x2c, 0xa0, 0x2c, 0xff}, // green
}

var caseTitle = map[string]string{"spread": "delays spread over the span", "steady": "steady rate"}

// plotSystem draws one system's lateness CDFs (spread and steady cases) on
// a linear axis, where early jobs show as negative lateness. The axis ends
// at p99.9 so one stray job does not squash the curve into its left edge.
func plotSystem(path string, rs []*result) error {
	p := plot.New()
	p.Title.Text = rs[0].Label + ": lateness CDF"
	p.X.Label.Text = "completion - due (ms; the axis ends at the larger p99.9, the legend gives the max)"
	p.Y.Label.Text = "fraction of jobs"
	p.Add(plotter.NewGrid())
	lo, hi := 0.0, 0.0
	for i, r := range rs {
		if len(r.late) == 0 {
			continue
		}
		l, err := plotter.NewLine(cdf(r.late, math.Inf(-1)))
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (p50 %s, p99 %s, max %s ms, %d early)", caseTitle[r.Case], ms(r.P50), ms(r.P99), ms(r.Max), r.Early), l)
		lo, hi = math.Min(lo, r.Min), math.Max(hi, r.P999)
	}
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.YOffs = vg.Points(40)
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

// plotCase overlays every system's CDF for one case on a log axis (the
// systems differ by three orders of magnitude); jobs completed early or
// within 0.1 ms sit at the left edge, so a curve that starts high there
// hands jobs out early.
func plotCase(path, cs string, rs []*result) error {
	const floor = 0.1
	p := plot.New()
	p.Title.Text = "Lateness CDF, " + caseTitle[cs] + " (early jobs drawn at 0.1 ms)"
	p.X.Label.Text = "completion - due (ms, log scale)"
	p.Y.Label.Text = "fraction of jobs"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	hi := floor * 10
	for _, r := range rs {
		if len(r.late) == 0 {
			continue
		}
		l, err := plotter.NewLine(cdf(r.late, floor))
		if err != nil {
			return err
		}
		l.Color = systemColor[r.System]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s (%d early)", r.Label, r.Early), l)
		hi = math.Max(hi, r.Max)
	}
	// The right decade and a half stays empty for the legend.
	p.X.Min, p.X.Max = floor, hi*30
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
