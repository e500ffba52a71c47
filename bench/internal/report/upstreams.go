package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"
)

// relayRow is the medians of one (upstream, version) of the relay
// scenario over the repeats.
type relayRow struct {
	Upstream, Version        string
	Repeats                  int
	DirectSeq, RelayedSeq    float64 // µs, sequential p50
	Added                    float64 // µs, median of each repeat's relayed - direct
	DirectCalls, RelayedCall float64 // pipelined calls/s
	CallsRatio               float64 // median of each repeat's relayed / direct
	DaemonCPU, UpstreamCPU   float64 // µs per relayed call
	CPURatio                 float64 // median of each repeat's daemon / upstream
	Switches, ReadWrite      float64 // the daemon's, per relayed call
}

// relayRows returns one row per upstream (in the order first measured)
// and version (in r.Versions' order).
func (r *Report) relayRows() []relayRow {
	var ups []string
	for _, x := range r.Relays {
		if !slices.Contains(ups, x.Upstream) {
			ups = append(ups, x.Upstream)
		}
	}
	var out []relayRow
	for _, up := range ups {
		for _, v := range r.Versions {
			var rs []load.Relay
			for _, x := range r.Relays {
				if x.Upstream == up && x.Version == v {
					rs = append(rs, x)
				}
			}
			if len(rs) == 0 {
				continue
			}
			med := func(get func(load.Relay) float64) float64 { return stats.MedianOf(rs, get) }
			out = append(out, relayRow{Upstream: up, Version: v, Repeats: len(rs),
				DirectSeq:   med(func(x load.Relay) float64 { return x.Direct.SeqP50 }),
				RelayedSeq:  med(func(x load.Relay) float64 { return x.Relayed.SeqP50 }),
				Added:       med(func(x load.Relay) float64 { return x.Relayed.SeqP50 - x.Direct.SeqP50 }),
				DirectCalls: med(func(x load.Relay) float64 { return x.Direct.CallsPerSec }),
				RelayedCall: med(func(x load.Relay) float64 { return x.Relayed.CallsPerSec }),
				CallsRatio:  med(func(x load.Relay) float64 { return stats.Ratio(x.Relayed.CallsPerSec, x.Direct.CallsPerSec) }),
				DaemonCPU:   med(func(x load.Relay) float64 { return x.DaemonCPU }),
				UpstreamCPU: med(func(x load.Relay) float64 { return x.UpstreamCPU }),
				CPURatio:    med(func(x load.Relay) float64 { return stats.Ratio(x.DaemonCPU, x.UpstreamCPU) }),
				Switches:    med(func(x load.Relay) float64 { return x.DaemonSwitches }),
				ReadWrite:   med(func(x load.Relay) float64 { return x.DaemonReadWrite })})
		}
	}
	return out
}

// relayGoals are the hosted servers' goals (docs/bench.md, "Goals"), per
// upstream and version.
func (r *Report) relayGoals() []string {
	var out []string
	for _, x := range r.relayRows() {
		of := fmt.Sprintf("%s (%s upstream)", x.Version, x.Upstream)
		out = append(out,
			fmt.Sprintf("relayed sequential call, added p50, %s — %s", of, Goal(fmt.Sprintf("≤ %v µs", goalRelayAdded), x.Added, atMost(goalRelayAdded), func(v float64) string { return Number(v) + " µs" })),
			fmt.Sprintf("relayed pipelined calls/s vs direct, %s — %s", of, Goal(fmt.Sprintf("≥ %v×", goalRelayCalls), x.CallsRatio, atLeast(goalRelayCalls), GoalRatio)),
			fmt.Sprintf("snodod's CPU per relayed call vs the server's own, %s — %s", of, Goal(fmt.Sprintf("≤ %v×", goalRelayCPU), x.CPURatio, atMost(goalRelayCPU), GoalRatio)))
	}
	return out
}

// hosted is the section of the hosted-server scenarios: the
// relay's overhead and the sharing's savings, medians over the repeats;
// "" when they did not run.
func (r *Report) hosted() string {
	if len(r.Relays) == 0 && len(r.Sharings) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## Hosted servers\n\n")
	if rows := r.relayRows(); len(rows) > 0 {
		fmt.Fprintf(&b, "Each upstream spawned directly, and hosted by `snodod serve` behind `snodod connect NAME`: the raw peer (the hardest case: it costs almost nothing itself, so snodod's share shows whole) and the Go SDK's (a real server). Medians of %d repeat(s); the added p50 and the ratios are medians of each repeat's. CPU, context switches and read/write system calls per call are over the whole relayed run (handshake, warm-up, sequential and pipelined calls), from schedstat, status and io of every thread.\n\n",
			rows[0].Repeats)
		fmt.Fprintf(&b, "| upstream | version | seq p50 direct (µs) | seq p50 relayed (µs) | added (goal ≤ %v) | calls/s direct | calls/s relayed | ratio (goal ≥ %v) | snodod CPU per call (µs) | server CPU per call (µs) | snodod switches per call | snodod read/write calls per call |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
			goalRelayAdded, goalRelayCalls)
		for _, x := range rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n", x.Upstream, x.Version, Number(x.DirectSeq), Number(x.RelayedSeq), Number(x.Added),
				Number(x.DirectCalls), Number(x.RelayedCall), Ratio(x.CallsRatio), Number(x.DaemonCPU), Number(x.UpstreamCPU), x.Switches, x.ReadWrite)
		}
		// Which side had the problem matters: the server spawned
		// directly (no snodod in the way) or relayed.
		for _, x := range r.Relays {
			for _, side := range []struct {
				what     string
				problems []string
			}{{"", x.Problems}, {"direct, ", x.Direct.Problems}, {"relayed, ", x.Relayed.Problems}} {
				for _, p := range side.problems {
					fmt.Fprintf(&b, "\n- problem (%s%s, %s): %s", side.what, x.Upstream, x.Version, p)
				}
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
