package report

import (
	"fmt"
	"strings"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"
)

// hosted is the section of the hosted-server scenarios (issue 10): the
// relay's overhead and the sharing's savings, medians over the repeats;
// "" when they did not run.
func (r *Report) hosted() string {
	if len(r.Relays) == 0 && len(r.Sharings) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Hosted servers (issue 10)\n\n")
	if len(r.Relays) > 0 {
		fmt.Fprintf(&b, "The %s peer spawned directly, and hosted by `snodod serve` behind `snodod connect NAME`; medians of %d repeat(s).\n\n",
			r.Relays[0].Direct.Server, len(r.Relays))
		b.WriteString("| version | seq p50 direct (µs) | seq p50 relayed (µs) | added (goal ≤ 30) | calls/s direct | calls/s relayed | ratio (goal ≥ 0.7) | snodod CPU per call (µs) | server CPU per call (µs) |\n|---|---|---|---|---|---|---|---|---|\n")
		for _, v := range r.Versions {
			var rs []load.Relay
			for _, x := range r.Relays {
				if x.Version == v {
					rs = append(rs, x)
				}
			}
			if len(rs) == 0 {
				continue
			}
			med := func(get func(load.Relay) float64) float64 {
				vals := make([]float64, len(rs))
				for i, x := range rs {
					vals[i] = get(x)
				}
				return stats.Median(vals)
			}
			ds, rsq := med(func(x load.Relay) float64 { return x.Direct.SeqP50 }), med(func(x load.Relay) float64 { return x.Relayed.SeqP50 })
			dc, rc := med(func(x load.Relay) float64 { return x.Direct.CallsPerSec }), med(func(x load.Relay) float64 { return x.Relayed.CallsPerSec })
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", v, Number(ds), Number(rsq), Number(rsq-ds),
				Number(dc), Number(rc), Ratio(rc/dc), Number(med(func(x load.Relay) float64 { return x.DaemonCPU })),
				Number(med(func(x load.Relay) float64 { return x.UpstreamCPU })))
		}
		for _, x := range r.Relays {
			for _, p := range append(append(x.Problems, x.Direct.Problems...), x.Relayed.Problems...) {
				fmt.Fprintf(&b, "\n- problem (%s): %s", x.Version, p)
			}
		}
		b.WriteString("\n")
	}
	for _, s := range r.Sharings {
		fmt.Fprintf(&b, "\n%d clients of the %s peer, each after a handshake and one echo call, all kept open: %d copies (what clients do today), or one copy hosted by `snodod serve` behind `snodod connect NAME`.\n\n",
			s.Clients, s.Server, s.Clients)
		b.WriteString("| | total memory, PSS (MiB) | start to first answer of the last client (ms) |\n|---|---|---|\n")
		fmt.Fprintf(&b, "| %d copies | %s | %s |\n", s.Clients, MiB(s.CopiesRSS), Number(s.CopiesLastMs))
		fmt.Fprintf(&b, "| snodod + 1 copy | %s (+ %s for the %d `snodod connect` processes) | %s |\n", MiB(s.SharedRSS), MiB(s.ConnectRSS), s.Clients, Number(s.SharedLastMs))
		for _, p := range s.Problems {
			fmt.Fprintf(&b, "\n- problem: %s", p)
		}
		b.WriteString("\n")
	}
	return b.String()
}
