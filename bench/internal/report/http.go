package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// httpSection is the section of the HTTP scenarios: snodod
// against the SDKs' streamable servers, and one stdio server hosted over
// HTTP by snodod and the gateways; "" when neither ran.
func (r *Report) httpSection() string {
	if len(r.HTTP) == 0 && len(r.HTTPHosted) == 0 {
		return ""
	}
	var b strings.Builder
	c := r.Config
	b.WriteString("\n## Streamable HTTP\n\n")
	if len(r.HTTP) > 0 {
		fmt.Fprintf(&b, "`tools/call echo` over Streamable HTTP, %d concurrent clients on keep-alive connections, %s per server and repeat: `snodod serve --demo --http` and the SDKs' streamable servers, stateless. snodod and the Go SDK get 2026-07-28 requests (per-request `_meta`, the headers of SEP-2243); the TypeScript SDK pinned in bench/node speaks 2025-11-25 at newest, so it gets session-less 2025-11-25 requests. CPU is the server's, exact (schedstat). Medians of the repeats.\n\n",
			c.HTTPClients, c.HTTPPhase)
		httpTable(&b, r.HTTP, false)
	}
	if len(r.HTTPHosted) > 0 {
		fmt.Fprintf(&b, "\n### Hosting a stdio server over HTTP\n\nThe raw peer (bench/peers/raw: the fastest stdio server here, so that the figures are the hosts') served over Streamable HTTP by `snodod serve` (as the upstream `up`, passed through at `http.path/up`), by supergateway (`--outputTransport streamableHttp --stateful`: a child per session; its stateless mode spawns one per request) and by mcp-proxy (`--server stream --no-eventStore`: one child for all sessions). %d concurrent clients on keep-alive connections, each in a legacy session of its own (initialize, notifications/initialized, then calls with its `Mcp-Session-Id`, at %s: the one version all three serve), %s per host and repeat. CPU is the whole hosting side's, exact (schedstat): the host's process and every process under it (the stdio children, and the shells supergateway starts them with), over the load. Medians of the repeats.\n\n",
			c.HTTPClients, load.HTTPSessionVersion, c.HTTPPhase)
		httpTable(&b, r.HTTPHosted, true)
		if len(r.HTTPHosts) > 0 {
			b.WriteString("\nThe hosts:\n\n")
			for _, h := range r.HTTPHosts {
				fmt.Fprintf(&b, "- **%s**: %s (`%s`)\n", h.Name, h.What, h.Command)
			}
		}
	}
	return b.String()
}

// httpTable writes the table of one HTTP scenario and its problems; hosts
// adds the columns of a host of stdio servers: the part of its CPU that
// its children used, and how many processes it ran.
func httpTable(b *strings.Builder, results []load.HTTPResult, hosts bool) {
	cells := func(a, b []string) []string {
		if hosts {
			return a
		}
		return b
	}
	row := func(c []string) { b.WriteString("| " + strings.Join(c, " | ") + " |\n") }
	row(cells([]string{"host", "calls/s", "CPU per call (µs)", "of it, the stdio server(s)' (µs)", "failed calls", "processes"},
		[]string{"server", "calls/s", "CPU per call (µs)", "failed calls"}))
	row(cells([]string{"---", "---:", "---:", "---:", "---:", "---:"}, []string{"---", "---:", "---:", "---:"}))
	for _, s := range httpServers(results) {
		if why := unavailable(results, s); why != "" {
			na := "n/a: " + strings.ReplaceAll(why, "|", "\\|")
			row(cells([]string{s, na, "n/a", "n/a", "n/a", "n/a"}, []string{s, na, "n/a", "n/a"}))
			continue
		}
		med := func(get func(load.HTTPResult) float64) float64 { return httpMedian(results, s, get) }
		calls := Number(med(func(x load.HTTPResult) float64 { return x.CallsPerSec }))
		cpu := Number(med(func(x load.HTTPResult) float64 { return x.CPUPerCall }))
		failed := Number(med(func(x load.HTTPResult) float64 { return float64(x.Errors) }))
		row(cells([]string{s, calls, cpu, Number(med(func(x load.HTTPResult) float64 { return x.ChildCPUPerCall })), failed,
			Count(int(math.Round(med(func(x load.HTTPResult) float64 { return float64(x.Processes) }))))},
			[]string{s, calls, cpu, failed}))
	}
	for _, x := range results {
		for _, p := range x.Problems {
			fmt.Fprintf(b, "\n- problem (%s): %s", x.Server, p)
		}
	}
	b.WriteString("\n")
}

// httpServers are the servers of results in the order first measured.
func httpServers(results []load.HTTPResult) []string {
	var out []string
	for _, x := range results {
		if !slices.Contains(out, x.Server) {
			out = append(out, x.Server)
		}
	}
	return out
}

// unavailable is why server was not run, "" when it was.
func unavailable(results []load.HTTPResult, server string) string {
	for _, x := range results {
		if x.Server == server && x.Unavailable != "" {
			return x.Unavailable
		}
	}
	return ""
}

// httpMedian is the median of a figure of server over the repeats it was
// run in.
func httpMedian(results []load.HTTPResult, server string, get func(load.HTTPResult) float64) float64 {
	var v []float64
	for _, x := range results {
		if x.Server == server && x.Unavailable == "" {
			v = append(v, get(x))
		}
	}
	return stats.Median(v)
}

// httpGoals are the goals of one HTTP scenario (docs/bench.md, "Goals"),
// what prefixes their labels: snodod's calls/s at least twice the best
// other's (of kind, "peer" or "gateway"), its CPU per call at most half of
// that one's; none when the scenario did not run.
func httpGoals(what, kind string, results []load.HTTPResult) []string {
	if len(results) == 0 {
		return nil
	}
	bestCalls, bestCPU, best := math.NaN(), math.NaN(), ""
	for _, s := range httpServers(results) {
		if s == Subject {
			continue
		}
		c := httpMedian(results, s, func(x load.HTTPResult) float64 { return x.CallsPerSec })
		if !math.IsNaN(c) && (math.IsNaN(bestCalls) || c > bestCalls) {
			bestCalls, best = c, s
			bestCPU = httpMedian(results, s, func(x load.HTTPResult) float64 { return x.CPUPerCall })
		}
	}
	if best == "" {
		best = "none measured"
	}
	subj := func(get func(load.HTTPResult) float64) float64 { return httpMedian(results, Subject, get) }
	calls := stats.Ratio(subj(func(x load.HTTPResult) float64 { return x.CallsPerSec }), bestCalls)
	cpu := stats.Ratio(subj(func(x load.HTTPResult) float64 { return x.CPUPerCall }), bestCPU)
	return []string{
		fmt.Sprintf("%scalls/s vs the best %s (%s) — %s", what, kind, best, Goal(fmt.Sprintf("≥ %v×", goalHTTPCalls), calls, atLeast(goalHTTPCalls), GoalRatio)),
		fmt.Sprintf("%sCPU per call vs the best %s (%s) — %s", what, kind, best, Goal(fmt.Sprintf("≤ %v×", goalHTTPCPU), cpu, atMost(goalHTTPCPU), GoalRatio)),
	}
}

// HTTPChart writes a PNG of the HTTP scenarios: calls/s and CPU per call
// by server, one colour per scenario (the SDKs' servers, the hosts of a
// stdio server), the servers not run left out. It writes nothing when
// neither scenario ran.
func (r *Report) HTTPChart(path string) error {
	if len(r.HTTP) == 0 && len(r.HTTPHosted) == 0 {
		return nil
	}
	calls, err := httpBars(r, fmt.Sprintf("Streamable HTTP calls/s (%d clients, higher is better)", r.Config.HTTPClients), "calls/s", func(x load.HTTPResult) float64 { return x.CallsPerSec })
	if err != nil {
		return err
	}
	cpu, err := httpBars(r, "CPU per call, whole server side (lower is better)", "µs", func(x load.HTTPResult) float64 { return x.CPUPerCall })
	if err != nil {
		return err
	}
	return writePanels(path, calls, cpu)
}

// httpBars is one panel of HTTPChart.
func httpBars(r *Report, title, unit string, get func(load.HTTPResult) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = unit
	p.Y.Min = 0
	p.Legend.Top = true
	var names []string
	scenarios := []struct {
		label, subject string
		results        []load.HTTPResult
	}{
		{"echo server (snodod --demo, SDKs)", Subject, r.HTTP},
		{"hosting the raw stdio peer", "snodod host", r.HTTPHosted},
	}
	for i, sc := range scenarios {
		var values plotter.Values
		var labels []string
		var xys plotter.XYs
		for _, s := range httpServers(sc.results) {
			if unavailable(sc.results, s) != "" {
				continue
			}
			v := httpMedian(sc.results, s, get)
			if math.IsNaN(v) {
				continue
			}
			name := s
			if s == Subject {
				name = sc.subject
			}
			xys = append(xys, plotter.XY{X: float64(len(names)), Y: v})
			names = append(names, name)
			values = append(values, v)
			labels = append(labels, compact(v))
		}
		if len(values) == 0 {
			continue
		}
		b, err := plotter.NewBarChart(values, vg.Points(28))
		if err != nil {
			return nil, err
		}
		b.XMin = xys[0].X
		b.LineStyle.Width = 0
		b.Color = versionColors[i%len(versionColors)]
		p.Add(b)
		p.Legend.Add(sc.label, b)
		if l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels}); err == nil {
			for j := range l.TextStyle {
				l.TextStyle[j].XAlign = draw.XCenter
				l.TextStyle[j].YAlign = draw.YBottom
				l.TextStyle[j].Font.Size = vg.Points(7)
			}
			p.Add(l)
		}
	}
	p.NominalX(names...)
	p.Y.Max *= 1.25 // room above the tallest bar for the legend
	return p, nil
}
