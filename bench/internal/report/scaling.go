package report

import (
	_ "embed"
	"fmt"
	"image/color"
	"math"
	"sort"
	"strings"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// GoBench is one Go micro-benchmark of the main module, as `go test
// -bench -benchmem` printed it.
type GoBench struct {
	Name                    string
	NsPerOp, BPerOp, Allocs float64
}

// curveKey names one curve across repeats.
func curveKey(c load.Curve) string { return c.Kind + "|" + c.Server + "|" + c.Version }

// curves returns each curve with, at each level, the median of its repeats.
func (r *Report) curves() []load.Curve {
	byKey := map[string][]load.Curve{}
	var order []string
	for _, c := range r.Curves {
		k := curveKey(c)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	var out []load.Curve
	for _, k := range order {
		reps := byKey[k]
		m := load.Curve{Server: reps[0].Server, Version: reps[0].Version, Kind: reps[0].Kind}
		levels := map[int][]load.Point{}
		for _, c := range reps {
			m.Problems = append(m.Problems, c.Problems...)
			for _, p := range c.Points {
				levels[p.Level] = append(levels[p.Level], p)
			}
		}
		var ls []int
		for l := range levels {
			ls = append(ls, l)
		}
		sort.Ints(ls)
		for _, l := range ls {
			ps := levels[l]
			med := func(get func(load.Point) float64) float64 { return stats.MedianOf(ps, get) }
			m.Points = append(m.Points, load.Point{Level: l, Calls: ps[0].Calls,
				CallsPerSec: med(func(p load.Point) float64 { return p.CallsPerSec }),
				P50:         med(func(p load.Point) float64 { return p.P50 }),
				P99:         med(func(p load.Point) float64 { return p.P99 }),
				CPUPerCall:  med(func(p load.Point) float64 { return p.CPUPerCall })})
		}
		out = append(out, m)
	}
	return out
}

// scaling is the section of the scaling curves; "" when they did not run.
func (r *Report) scaling(chart string) string {
	cs := r.curves()
	if len(cs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Scaling with the work at hand\n\n")
	b.WriteString("How CPU per call and latency grow with the requests in flight on one connection (pipelined echo calls to `snodod stdio` and to the raw floor, each level after as many warm-up calls), and with the sessions calling at once on one `snodod serve` (each session's calls one after another). Medians of the repeats.\n\n")
	b.WriteString("| curve | level | calls | calls/s | p50 (µs) | p99 (µs) | CPU per call (µs) |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range cs {
		for _, p := range c.Points {
			fmt.Fprintf(&b, "| %s, %s, %s | %s %s | %s | %s | %s | %s | %s |\n", c.Server, c.Version, c.Kind, Count(p.Level), c.Kind,
				Count(p.Calls), Number(p.CallsPerSec), Number(p.P50), Number(p.P99), Number(p.CPUPerCall))
		}
	}
	for _, c := range cs {
		for _, p := range dedupe(c.Problems, 5) {
			fmt.Fprintf(&b, "\n- problem (%s, %s, %s): %s", c.Server, c.Version, c.Kind, p)
		}
	}
	if chart != "" {
		fmt.Fprintf(&b, "\n![CPU per call and p99 by requests in flight and by sessions](%s)\n", chart)
	}
	return b.String()
}

// ScalingChart writes a PNG of the curves: CPU per call and p99 against
// the level, on logarithmic axes, one line per curve. It writes nothing
// when no curve was measured.
func (r *Report) ScalingChart(path string) error {
	cs := r.curves()
	if len(cs) == 0 {
		return nil
	}
	cpu := curvePlot("CPU per call (lower is better)", "µs", cs, func(p load.Point) float64 { return p.CPUPerCall })
	p99 := curvePlot("p99 latency (lower is better)", "µs", cs, func(p load.Point) float64 { return p.P99 })
	return writePanels(path, cpu, p99)
}

func curvePlot(title, unit string, cs []load.Curve, get func(load.Point) float64) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "requests in flight, or sessions (log)"
	p.Y.Label.Text = unit + " (log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	for i, c := range cs {
		var xys plotter.XYs
		for _, pt := range c.Points {
			if v := get(pt); !math.IsNaN(v) && v > 0 {
				xys = append(xys, plotter.XY{X: float64(pt.Level), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			continue
		}
		col := curveColors[i%len(curveColors)]
		line.Color, points.Color = col, col
		p.Add(line, points)
		p.Legend.Add(fmt.Sprintf("%s %s, %s", c.Server, c.Version, c.Kind), line, points)
	}
	return p
}

// curveColors colour the curves.
var curveColors = append(append([]color.Color(nil), versionColors...),
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff})

//go:embed wheretimegoes.md
var whereTheTimeGoes string

// timeGoes is the section on where the time goes: per call, the CPU's
// user and system parts, context switches and read/write system calls of
// the pipelined calls, the Go micro-benchmarks' allocations, then what the
// profiles showed (wheretimegoes.md).
func (r *Report) timeGoes() string {
	var b strings.Builder
	b.WriteString("\n## Where the time goes\n\n")
	b.WriteString("Per pipelined call (64 in flight), from the server's /proc/PID/task/*: CPU (exact, from schedstat) and its user and system parts (split in the proportion of the process's ticks over the batch, /proc/PID/stat, whose 10 ms make them rough), context switches, and read/write system calls (io: syscr + syscw). Medians of the repeats.\n\n")
	b.WriteString("| server, version | CPU (µs) | user (µs) | system (µs) | context switches | read/write calls |\n|---|---:|---:|---:|---:|---:|\n")
	for _, v := range r.Versions {
		for _, s := range []string{Subject, Floor} {
			if len(r.results(s, v)) == 0 || r.unsupported(s, v) != "" {
				continue
			}
			med := func(get func(*load.StdioResult) float64) string { return Number(r.median(s, v, get)) }
			fmt.Fprintf(&b, "| %s, %s | %s | %s | %s | %s | %s |\n", s, v,
				med(func(x *load.StdioResult) float64 { return x.CPUPerCall }),
				med(func(x *load.StdioResult) float64 { return x.UserPerCall }),
				med(func(x *load.StdioResult) float64 { return x.SysPerCall }),
				fmt.Sprintf("%.2f", r.median(s, v, func(x *load.StdioResult) float64 { return x.SwitchesPerCall })),
				fmt.Sprintf("%.2f", r.median(s, v, func(x *load.StdioResult) float64 { return x.ReadWritePerCall })))
		}
	}
	if len(r.GoBench) > 0 {
		b.WriteString("\nThe Go micro-benchmarks of the hot path, in this run (`go test -bench -benchmem`, one run each; their times are as noisy as the machine):\n\n")
		b.WriteString("| benchmark | ns/op | B/op | allocs/op |\n|---|---:|---:|---:|\n")
		for _, g := range r.GoBench {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, Number(g.NsPerOp), Number(g.BPerOp), Number(g.Allocs))
		}
	}
	b.WriteString("\n" + whereTheTimeGoes)
	return b.String()
}

// extraGoals are the goals outside the main table: the hosted servers'
// and HTTP's.
func (r *Report) extraGoals() []string {
	out := r.relayGoals()
	out = append(out, httpGoals("HTTP ", "peer", r.HTTP)...)
	return append(out, httpGoals("HTTP hosting a stdio server: ", "gateway", r.HTTPHosted)...)
}
