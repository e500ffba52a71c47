package report

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"strconv"

	"github.com/snodod/snodod/bench/internal/load"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// versionColors colour the bars of each protocol version.
var versionColors = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// Chart writes a PNG of two bar charts side by side: pipelined calls/s and
// server CPU per call, by server, one bar per protocol version (none where
// the server does not serve it).
func (r *Report) Chart(path string) error {
	calls, err := r.bars("Pipelined calls/s (64 in flight, higher is better)", "calls/s", r.get("calls"))
	if err != nil {
		return err
	}
	cpu, err := r.bars("Server CPU per call (lower is better)", "µs of user+system CPU", r.get("cpu"))
	if err != nil {
		return err
	}
	return writePanels(path, calls, cpu)
}

// writePanels writes a PNG of two plots side by side.
func writePanels(path string, left, right *plot.Plot) error {
	const width, height = 12 * vg.Inch, 4.5 * vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 8, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func (r *Report) bars(title, unit string, get func(*load.StdioResult) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Y.Min = 0
	p.Legend.Top = true
	width := vg.Points(16)
	n := len(r.Versions)
	for i, version := range r.Versions {
		values := make(plotter.Values, len(r.Servers))
		labels := make([]string, len(r.Servers))
		for j, s := range r.Servers {
			v := r.median(s, version, get)
			labels[j] = compact(v)
			if math.IsNaN(v) {
				v = 0 // not served: an empty bar labelled n/a
			}
			values[j] = v
		}
		b, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		b.LineStyle.Width = 0
		b.Color = versionColors[i%len(versionColors)]
		b.Offset = width * vg.Length(float64(i)-float64(n-1)/2)
		p.Add(b)
		p.Legend.Add(version, b)
		if l, err := barLabels(values, labels, b.Offset); err == nil {
			p.Add(l)
		}
	}
	p.NominalX(r.Servers...)
	// Room above the tallest bar for the legend.
	p.Y.Max *= 1.2
	return p, nil
}

// barLabels writes each bar's label above it.
func barLabels(values plotter.Values, text []string, offset vg.Length) (*plotter.Labels, error) {
	xys := make(plotter.XYs, len(values))
	for i, v := range values {
		xys[i] = plotter.XY{X: float64(i), Y: v}
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: text})
	if err != nil {
		return nil, err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].XAlign = draw.XCenter
		l.TextStyle[i].YAlign = draw.YBottom
		l.TextStyle[i].Font.Size = vg.Points(7)
	}
	l.Offset = vg.Point{X: offset, Y: vg.Points(1)}
	return l, nil
}

// compact renders a bar's figure in at most four characters: 20.8k, 57.0.
func compact(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 10_000:
		return strconv.FormatFloat(v/1000, 'f', 0, 64) + "k"
	case v >= 1000:
		return strconv.FormatFloat(v/1000, 'f', 1, 64) + "k"
	}
	return Number(v)
}
