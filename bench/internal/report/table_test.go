package report

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/wire"
)

func TestNumberAndRatio(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 5.714: "5.71", 57.14: "57.1", 571.4: "571", 18168.27: "18,168", 1234567: "1,234,567", -2500: "-2,500", math.NaN(): "n/a"} {
		if got := Number(v); got != want {
			t.Errorf("Number(%v) = %q, want %q", v, got, want)
		}
	}
	for r, want := range map[float64]string{0.814: "0.81×", 1.5: "1.50×", 12.4: "12×", math.NaN(): "n/a"} {
		if got := Ratio(r); got != want {
			t.Errorf("Ratio(%v) = %q, want %q", r, got, want)
		}
	}
}

func TestRowCells(t *testing.T) {
	r := Row{Label: "calls/s", Values: []float64{30000, 20000, math.NaN(), 120000}}
	want := []string{"30,000", "20,000 (1.50×)", "n/a", "120,000 (0.25×)"}
	for j, w := range want {
		if got := r.Cell(j); got != w {
			t.Errorf("cell %d = %q, want %q", j, got, w)
		}
	}
	unknown := Row{Values: []float64{math.NaN(), 10}}
	if got := unknown.Cell(1); got != "10.0" {
		t.Errorf("with no subject figure the cell is %q, want the bare figure", got)
	}
}

func TestTableMarkdown(t *testing.T) {
	tab := &Table{Columns: []string{"snodod", "peer"}, Rows: []Row{
		Section("v"),
		{Label: "x", Values: []float64{2, 4}, Goal: "≤ 1× peer: met"},
		{Label: "y", Text: []string{"a|b", "c"}},
	}}
	got := tab.Markdown()
	want := "|  | snodod | peer | goal |\n| --- | ---: | ---: | --- |\n| **v** |  |  |  |\n| x | 2.00 | 4.00 (0.50×) | ≤ 1× peer: met |\n| y | a\\|b | c |  |\n"
	if got != want {
		t.Errorf("Markdown =\n%s\nwant\n%s", got, want)
	}
}

// result is a stdio result with the figures the goals read.
func result(server, version string, calls, cpu, seq float64) load.StdioResult {
	return load.StdioResult{Server: server, Version: version, CallsPerSec: calls, CPUPerCall: cpu, SeqP50: seq,
		StartupMs: 10, SeqP99: seq * 2, PipeP50: 1, PipeP99: 2, BigResultMs: 10, BigResultRSS: 2e6, BigRequestMs: 20, BigRequestRSS: 3e6}
}

func TestGoalsAndMedians(t *testing.T) {
	r := &Report{
		Servers:  []string{Subject, "go-sdk", "ts-sdk", Floor},
		Versions: []string{wire.V20250618, wire.V20260728},
		Config:   Config{Repeats: 3, Stdio: load.StdioConfig{BigResult: 1_000_000}},
	}
	// Three repeats; the medians are the middle ones.
	for _, k := range []float64{0.9, 1, 1.1} {
		r.Stdio = append(r.Stdio,
			result(Subject, wire.V20250618, 40000*k, 10*k, 100),
			result("go-sdk", wire.V20250618, 20000*k, 50*k, 150),
			result("ts-sdk", wire.V20250618, 10000*k, 80*k, 200),
			result(Floor, wire.V20250618, 45000*k, 6*k, 80),
			result(Subject, wire.V20260728, 30000*k, 13*k, 100),
			result("go-sdk", wire.V20260728, 25000*k, 40*k, 150),
			load.StdioResult{Server: "ts-sdk", Version: wire.V20260728, Unsupported: "answers in the 2025 shape"},
			result(Floor, wire.V20260728, 45000*k, 6*k, 80),
		)
	}
	r.Idle = []load.Idle{{Sessions: 10, PerSession: 20 << 10}, {Sessions: 10, PerSession: 10 << 10}, {Sessions: 10, PerSession: 12 << 10}}
	r.Stalled = []load.Stalled{{BaseP99: 1000, StalledP99: 1200, Ratio: 0.5}} // the ratio shown is of the medians
	r.Config.Healthy = 5

	goals := strings.Join(r.Goals(), "\n")
	for _, want := range []string{
		// 40,000 vs the floor's 45,000.
		"pipelined, 64 in flight (calls/s), 2025-06-18 — ≥ 0.8× raw: met (0.889×)",
		// 30,000 vs 45,000, and vs 2025's 40,000.
		"pipelined, 64 in flight (calls/s), 2026-07-28 — ≥ 0.8× raw: **not met** (0.667×); ≥ 1/1.1× 2025-06-18's: **not met** (0.750×)",
		"server CPU per call (µs), 2025-06-18 — ≤ 2× raw: met (1.667×)",
		"server CPU per call (µs), 2026-07-28 — ≤ 2× raw: **not met** (2.167×); ≤ 1.1× 2025-06-18's: **not met** (1.300×)",
		"sequential p50 (µs), 2025-06-18 — ≤ 1.3× raw: met (1.250×)",
		"1,000,000-byte result (ms), 2025-06-18 — ≤ 1.3× raw: met (1.000×)",
		"daemon RSS per idle session (KiB)",
		"≤ 12 KiB: met (12.0 KiB)",
		"≤ 1.2×: met (1.200×)",
	} {
		if !strings.Contains(goals, want) {
			t.Errorf("goals lack %q:\n%s", want, goals)
		}
	}
	table := r.Table().Markdown()
	for _, want := range []string{
		"| serves 2026-07-28 | yes | yes | n/a | yes |",
		"| pipelined, 64 in flight (calls/s) | 40,000 | 20,000 (2.00×) | 10,000 (4.00×) | 45,000 (0.89×) |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// The hosted servers' goals and HTTP's join the
// list, from the medians of their repeats.
func TestExtraGoals(t *testing.T) {
	r := &Report{Versions: []string{wire.V20250618}}
	for _, k := range []float64{0.9, 1, 1.1} {
		r.Relays = append(r.Relays, load.Relay{Upstream: "raw", Version: wire.V20250618,
			Direct:  load.StdioResult{SeqP50: 100, CallsPerSec: 1000},
			Relayed: load.StdioResult{SeqP50: 100 + 20*k, CallsPerSec: 800 * k}, DaemonCPU: 5 * k, UpstreamCPU: 4, DaemonSwitches: 2, DaemonReadWrite: 1.5},
			load.Relay{Upstream: "go-sdk", Version: wire.V20250618,
				Direct:  load.StdioResult{SeqP50: 150, CallsPerSec: 5000},
				Relayed: load.StdioResult{SeqP50: 190 * k, CallsPerSec: 3000}, DaemonCPU: 20, UpstreamCPU: 200 * k})
		r.HTTP = append(r.HTTP,
			load.HTTPResult{Server: Subject, CallsPerSec: 5000 * k, CPUPerCall: 50 * k},
			load.HTTPResult{Server: "go-sdk", CallsPerSec: 2000, CPUPerCall: 200})
	}
	goals := strings.Join(r.Goals(), "\n")
	if strings.Index(goals, "(raw upstream)") > strings.Index(goals, "(go-sdk upstream)") {
		t.Errorf("the upstreams are not in the order measured:\n%s", goals)
	}
	contains(t, "the hosted section", r.hosted(),
		"| added (goal ≤ 30) |", "| ratio (goal ≥ 0.7) |",
		"| raw | 2025-06-18 | 100 | 120 | 20.0 | 1,000 | 800 | 0.80× | 5.00 | 4.00 | 2.00 | 1.50 |",
		"| go-sdk | 2025-06-18 | 150 | 190 | 40.0 | 5,000 | 3,000 | 0.60× | 20.0 | 200 | 0.00 | 0.00 |")
	for _, want := range []string{
		"relayed sequential call, added p50, 2025-06-18 (raw upstream) — ≤ 30 µs: met (20.0 µs)",
		"relayed pipelined calls/s vs direct, 2025-06-18 (raw upstream) — ≥ 0.7×: met (0.800×)",
		"snodod's CPU per relayed call vs the server's own, 2025-06-18 (raw upstream) — ≤ 1×: **not met** (1.250×)",
		// The Go SDK's row is judged on its own figures: 190 - 150 µs,
		// 3,000 of 5,000 calls/s, 20 of 200 µs.
		"relayed sequential call, added p50, 2025-06-18 (go-sdk upstream) — ≤ 30 µs: **not met** (40.0 µs)",
		"relayed pipelined calls/s vs direct, 2025-06-18 (go-sdk upstream) — ≥ 0.7×: **not met** (0.600×)",
		"snodod's CPU per relayed call vs the server's own, 2025-06-18 (go-sdk upstream) — ≤ 1×: met (0.100×)",
		"HTTP calls/s vs the best peer (go-sdk) — ≥ 2×: met (2.500×)",
		"HTTP CPU per call vs the best peer (go-sdk) — ≤ 0.5×: met (0.250×)",
	} {
		if !strings.Contains(goals, want) {
			t.Errorf("goals lack %q:\n%s", want, goals)
		}
	}
}

func TestShort(t *testing.T) {
	for in, want := range map[string]string{
		`error -32600 "Message exceeds the 2000000-byte line limit" (id null) in 27ms; then goes on`: "error -32600, goes on",
		"accepted: echoed all 3000000 bytes in 398ms; then goes on":                                  "accepted, goes on",
		`wrote error -32603 "context canceled" 3ms after`:                                            "writes error -32603",
		`wrote result "context canceled" 2ms after`:                                                  "writes a result",
		"nothing written after the cancel":                                                           "nothing written",
		"no answer in 5s (hang)":                                                                     "hang",
		"":                                                                                           "–",
	} {
		if got := Short(in); got != want {
			t.Errorf("Short(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCompact(t *testing.T) {
	for v, want := range map[float64]string{20766: "21k", 2865: "2.9k", 322: "322", 4.74: "4.74", math.NaN(): "n/a"} {
		if got := compact(v); got != want {
			t.Errorf("compact(%v) = %q, want %q", v, got, want)
		}
	}
}

// The HTTP hosting scenario: its table (a gateway that could not run is
// n/a with its reason, not dropped), its goals against the best gateway
// that ran, and the HTTP chart.
func TestHTTPHosting(t *testing.T) {
	r := &Report{Config: Config{HTTPClients: 64}}
	for _, k := range []float64{0.9, 1, 1.1} {
		r.HTTPHosted = append(r.HTTPHosted,
			load.HTTPResult{Server: Subject, CallsPerSec: 8000 * k, CPUPerCall: 90, ChildCPUPerCall: 10, Processes: 2},
			load.HTTPResult{Server: "supergateway", CallsPerSec: 300, CPUPerCall: 2500 * k, ChildCPUPerCall: 600, Processes: 129},
			load.HTTPResult{Server: "mcp-proxy", CallsPerSec: math.NaN(), CPUPerCall: math.NaN(), ChildCPUPerCall: math.NaN(), Unavailable: "node not found"})
		r.HTTP = append(r.HTTP, load.HTTPResult{Server: Subject, CallsPerSec: 20000, CPUPerCall: 40})
	}
	contains(t, "the section", r.httpSection(),
		"### Hosting a stdio server over HTTP",
		"| snodod | 8,000 | 90.0 | 10.0 | 0 | 2 |",
		"| supergateway | 300 | 2,500 | 600 | 0 | 129 |",
		"| mcp-proxy | n/a: node not found | n/a | n/a | n/a | n/a |",
		// The SDKs' scenario keeps its four columns.
		"| server | calls/s | CPU per call (µs) | failed calls |\n", "| snodod | 20,000 | 40.0 | 0 |\n")
	contains(t, "the goals", strings.Join(r.Goals(), "\n"),
		"HTTP hosting a stdio server: calls/s vs the best gateway (supergateway) — ≥ 2×: met (26.667×)",
		"HTTP hosting a stdio server: CPU per call vs the best gateway (supergateway) — ≤ 0.5×: met (0.036×)",
		// The other HTTP scenario has no peer here: its goals say so.
		"HTTP calls/s vs the best peer (none measured) — ≥ 2×: not measured")
	path := filepath.Join(t.TempDir(), "http.png")
	if err := r.HTTPChart(path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("HTTPChart wrote no PNG (%v)", err)
	}
	if err := (&Report{}).HTTPChart(filepath.Join(t.TempDir(), "none.png")); err != nil {
		t.Errorf("HTTPChart with nothing measured: %v", err)
	}
}

// contains fails t for every one of wants that text (what) lacks.
func contains(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
