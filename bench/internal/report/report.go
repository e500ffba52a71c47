package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"
	"github.com/snodod/snodod/bench/internal/wire"
)

// Subject is the server the ratios are of; Floor is the raw loop.
const (
	Subject = "snodod"
	Floor   = "raw"
)

// Report is everything one run of the harness measured.
type Report struct {
	// Servers are the stdio servers in table order: the subject first,
	// the floor last.
	Servers  []string
	Versions []string
	Stdio    []load.StdioResult // every repeat
	// The many-session scenarios, one per repeat (empty when not run).
	Concurrent []load.Concurrent
	Idle       []load.Idle
	Stalled    []load.Stalled
	// SessionsNote says why the many-session scenarios did not run, if so.
	SessionsNote string
	// The hosted-server scenarios (upstreams.go), one per repeat and
	// version, and one sharing run.
	Relays   []load.Relay
	Sharings []load.Sharing
	// The scaling curves (every repeat), the HTTP scenario (every repeat)
	// and the Go micro-benchmarks of the hot path (once).
	Curves []load.Curve
	HTTP   []load.HTTPResult
	// HTTPHosted is the hosting scenario (every repeat): one stdio
	// server over HTTP behind snodod and behind the npm gateways.
	HTTPHosted []load.HTTPResult
	HTTPHosts  []Serving // what each host of HTTPHosted is
	GoBench    []GoBench

	Config   Config
	Machine  Machine
	Servings []Serving // what each server is
	Started  time.Time
	Finished time.Time
}

// Config is how the run was sized.
type Config struct {
	Quick   bool
	Repeats int
	Stdio   load.StdioConfig
	// The many-session scenarios.
	SessionsVersion             string
	Sessions, CallsEach         int
	IdleSessions                int
	Healthy                     int
	HealthyPhase                time.Duration
	StalledRequests, StalledBig int
	DaemonEnv                   []string
	GeneratorNoFile             string
	// The scaling curves: requests in flight on one connection, sessions
	// at once on one daemon, and the calls at each level.
	InFlightLevels, SessionLevels []int
	CurveCalls                    int
	// The HTTP scenario: concurrent clients, and how long each server is
	// loaded.
	HTTPClients int
	HTTPPhase   time.Duration
}

// Machine describes where the run happened.
type Machine struct {
	CPU, Kernel, Go, Node string
	Cores                 int
	MemoryGiB             float64
	// Load averages (1 minute) at the start and the end of the run: the
	// other work on the machine, which makes the figures noisy.
	LoadStart, LoadEnd float64
}

// Serving says what one server in the table is.
type Serving struct {
	Name, What, Command string
}

// results returns the results of server at version over the repeats.
func (r *Report) results(server, version string) []load.StdioResult {
	var out []load.StdioResult
	for _, x := range r.Stdio {
		if x.Server == server && x.Version == version {
			out = append(out, x)
		}
	}
	return out
}

// median is the median of a figure of server at version, NaN when the
// server does not serve the version.
func (r *Report) median(server, version string, get func(*load.StdioResult) float64) float64 {
	var v []float64
	for _, x := range r.results(server, version) {
		if x.Unsupported == "" {
			v = append(v, get(&x))
		}
	}
	return stats.Median(v)
}

// measured reports whether any server was run at version.
func (r *Report) measured(version string) bool {
	return slices.ContainsFunc(r.Stdio, func(x load.StdioResult) bool { return x.Version == version })
}

// unsupported returns why server does not serve version, or "".
func (r *Report) unsupported(server, version string) string {
	for _, x := range r.results(server, version) {
		if x.Unsupported != "" {
			return x.Unsupported
		}
	}
	return ""
}

// outcome returns the first non-empty outcome of server at version.
func (r *Report) outcome(server, version string, get func(*load.StdioResult) string) string {
	for _, x := range r.results(server, version) {
		if s := get(&x); s != "" {
			return s
		}
	}
	return ""
}

// figure is one measured figure of the stdio table.
type figure struct {
	key, label string
	get        func(*load.StdioResult) float64
	format     func(float64) string
}

var figures = []figure{
	{"startup", "start-up to first answer (ms)", func(x *load.StdioResult) float64 { return x.StartupMs }, nil},
	{"seq50", "sequential p50 (µs)", func(x *load.StdioResult) float64 { return x.SeqP50 }, nil},
	{"seq99", "sequential p99 (µs)", func(x *load.StdioResult) float64 { return x.SeqP99 }, nil},
	{"calls", "pipelined, 64 in flight (calls/s)", func(x *load.StdioResult) float64 { return x.CallsPerSec }, nil},
	{"pipe50", "pipelined p50 (µs)", func(x *load.StdioResult) float64 { return x.PipeP50 }, nil},
	{"pipe99", "pipelined p99 (µs)", func(x *load.StdioResult) float64 { return x.PipeP99 }, nil},
	{"cpu", "server CPU per call (µs)", func(x *load.StdioResult) float64 { return x.CPUPerCall }, nil},
	{"bigms", "1,000,000-byte result (ms)", func(x *load.StdioResult) float64 { return x.BigResultMs }, nil},
	{"bigrss", "1,000,000-byte result: peak RSS growth, first call (MiB)", func(x *load.StdioResult) float64 { return x.BigResultRSS }, MiB},
	{"bigrssall", "1,000,000-byte result: peak RSS growth, all calls (MiB)", func(x *load.StdioResult) float64 { return x.BigResultRSSAll }, MiB},
	{"reqms", "1,500,000-byte request (ms)", func(x *load.StdioResult) float64 { return x.BigRequestMs }, nil},
	{"reqrss", "1,500,000-byte request: peak RSS growth, first call (MiB)", func(x *load.StdioResult) float64 { return x.BigRequestRSS }, MiB},
	{"reqrssall", "1,500,000-byte request: peak RSS growth, all calls (MiB)", func(x *load.StdioResult) float64 { return x.BigRequestRSSAll }, MiB},
}

func (r *Report) values(version string, get func(*load.StdioResult) float64) []float64 {
	v := make([]float64, len(r.Servers))
	for j, s := range r.Servers {
		v[j] = r.median(s, version, get)
	}
	return v
}

// Table is the one table: per version, every figure by server with the
// ratios of the subject to each, the behaviours, then the subject's
// many-session figures.
func (r *Report) Table() *Table {
	t := &Table{Columns: r.Servers}
	for _, version := range r.Versions {
		if !r.measured(version) {
			continue
		}
		t.Rows = append(t.Rows, Section(version))
		support := make([]string, len(r.Servers))
		anyUnsupported := false
		for j, s := range r.Servers {
			support[j] = "yes"
			if why := r.unsupported(s, version); why != "" {
				support[j], anyUnsupported = "n/a", true
			}
		}
		if anyUnsupported {
			t.Rows = append(t.Rows, Row{Label: "serves " + version, Text: support})
		}
		for _, f := range figures {
			row := Row{Label: f.label, Values: r.values(version, f.get), Format: f.format}
			row.Goal = r.goalFor(f.key, version)
			t.Rows = append(t.Rows, row)
		}
		huge := make([]string, len(r.Servers))
		canc := make([]string, len(r.Servers))
		for j, s := range r.Servers {
			huge[j] = Short(r.outcome(s, version, func(x *load.StdioResult) string { return x.HugeLine }))
			canc[j] = Short(r.outcome(s, version, func(x *load.StdioResult) string { return x.Cancel }))
			if r.unsupported(s, version) != "" {
				huge[j], canc[j] = "n/a", "n/a"
			}
		}
		t.Rows = append(t.Rows,
			Row{Label: "3,000,000-byte line", Text: huge},
			Row{Label: "cancelled sleep 1000", Text: canc})
	}
	t.Rows = append(t.Rows, r.sessionRows()...)
	return t
}

// Short condenses an outcome for the table; the whole sentence is in the
// behaviour list under it.
func Short(outcome string) string {
	switch {
	case outcome == "":
		return "–"
	case strings.HasPrefix(outcome, "error "):
		code := strings.Fields(outcome)[1]
		s := "error " + code
		if strings.Contains(outcome, "goes on") {
			s += ", goes on"
		}
		return s
	case strings.HasPrefix(outcome, "accepted"):
		if strings.Contains(outcome, "goes on") {
			return "accepted, goes on"
		}
		return "accepted"
	case strings.HasPrefix(outcome, "nothing written"):
		return "nothing written"
	case strings.HasPrefix(outcome, "wrote "):
		f := strings.Fields(outcome)
		if len(f) >= 3 && f[1] == "error" {
			return "writes error " + f[2]
		}
		return "writes a " + f[1]
	case strings.HasPrefix(outcome, "no answer"):
		return "hang"
	case strings.HasPrefix(outcome, "closed"):
		return "exits"
	case strings.HasPrefix(outcome, "not run"):
		return "not run"
	}
	return outcome
}

func (r *Report) sessionRows() []Row {
	if len(r.Concurrent) == 0 && len(r.Idle) == 0 && len(r.Stalled) == 0 {
		return nil
	}
	only := func(label string, v float64, format func(float64) string, goal string) Row {
		vals := make([]float64, len(r.Servers))
		for j := range vals {
			vals[j] = math.NaN()
		}
		vals[0] = v
		return Row{Label: label, Values: vals, Format: format, NoRatio: true, Goal: goal}
	}
	med := func(get func(int) float64, n int) float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = get(i)
		}
		return stats.Median(v)
	}
	c := r.Config
	rows := []Row{Section(fmt.Sprintf("snodod serve, session socket, %s", c.SessionsVersion))}
	if len(r.Concurrent) > 0 {
		label := fmt.Sprintf("%s sessions × %d calls", Number(float64(c.Sessions)), c.CallsEach)
		rows = append(rows,
			only(label+" (calls/s)", med(func(i int) float64 { return r.Concurrent[i].CallsPerSec }, len(r.Concurrent)), nil, ""),
			only(label+", p50 (µs)", med(func(i int) float64 { return r.Concurrent[i].P50 }, len(r.Concurrent)), nil, ""),
			only(label+", p99 (µs)", med(func(i int) float64 { return r.Concurrent[i].P99 }, len(r.Concurrent)), nil, ""),
			only(label+", failed calls", med(func(i int) float64 { return float64(r.Concurrent[i].Failed) }, len(r.Concurrent)), nil, ""))
	}
	if len(r.Idle) > 0 {
		per := med(func(i int) float64 { return r.Idle[i].PerSession }, len(r.Idle))
		rows = append(rows,
			only("daemon RSS, no session (MiB)", med(func(i int) float64 { return r.Idle[i].RSSEmpty }, len(r.Idle)), MiB, ""),
			only(fmt.Sprintf("daemon RSS, %s idle sessions (MiB)", Number(float64(c.IdleSessions))), med(func(i int) float64 { return r.Idle[i].RSSIdle }, len(r.Idle)), MiB, ""),
			only("daemon RSS per idle session (KiB)", per, KiB, r.goalIdle(per)))
	}
	if len(r.Stalled) > 0 {
		base := med(func(i int) float64 { return r.Stalled[i].BaseP99 }, len(r.Stalled))
		stalled := med(func(i int) float64 { return r.Stalled[i].StalledP99 }, len(r.Stalled))
		ratio := stats.Ratio(stalled, base) // of the medians shown above it
		rows = append(rows,
			only(fmt.Sprintf("%d healthy sessions alone, p99 (µs)", c.Healthy), base, nil, ""),
			only(fmt.Sprintf("%d healthy sessions beside one client that stopped reading, p99 (µs)", c.Healthy), stalled, nil, ""),
			only("healthy sessions' p99 rise (×)", ratio, nil, r.goalStalled(ratio)))
	}
	return rows
}

// The goals (docs/bench.md, "Goals").
const (
	goalFloorCalls  = 0.8 // pipelined calls/s ≥ 0.8× the floor's
	goalFloorCPU    = 2   // CPU per call ≤ 2× the floor's
	goalFloorSeq    = 1.3 // sequential p50 ≤ 1.3× the floor's
	goalBigTime     = 1.3 // 1 MB result time ≤ 1.3× the floor's
	goalModern      = 1.1 // 2026's CPU per call and calls/s within 1.1× of 2025's
	goalIdleSession = 12 << 10
	goalStalled     = 1.2
	goalRelayAdded  = 30  // µs a relayed sequential call adds at most
	goalRelayCalls  = 0.7 // relayed pipelined calls/s ≥ 0.7× direct
	goalRelayCPU    = 1   // snodod's CPU per relayed call ≤ 1× the server's own
	goalHTTPCalls   = 2   // HTTP calls/s ≥ 2× the best peer's
	goalHTTPCPU     = 0.5 // HTTP CPU per call ≤ 0.5× the best peer's
)

func (r *Report) get(key string) func(*load.StdioResult) float64 {
	for _, f := range figures {
		if f.key == key {
			return f.get
		}
	}
	panic("report: no figure " + key)
}

func atLeast(g float64) func(float64) bool { return func(v float64) bool { return v >= g } }
func atMost(g float64) func(float64) bool  { return func(v float64) bool { return v <= g } }

// goalFor returns the goal cell of a stdio figure's row.
func (r *Report) goalFor(key, version string) string {
	subj := r.median(Subject, version, r.get(key))
	floor := r.median(Floor, version, r.get(key))
	modern := version == wire.V20260728 && slices.Contains(r.Versions, wire.V20250618)
	legacy := func() float64 { return r.median(Subject, wire.V20250618, r.get(key)) }
	switch key {
	case "calls":
		g := Goal(fmt.Sprintf("≥ %v× raw", goalFloorCalls), stats.Ratio(subj, floor), atLeast(goalFloorCalls), GoalRatio)
		if modern {
			g += "; " + Goal(fmt.Sprintf("≥ 1/%v× 2025-06-18's", goalModern), stats.Ratio(subj, legacy()), atLeast(1/goalModern), GoalRatio)
		}
		return g
	case "cpu":
		g := Goal(fmt.Sprintf("≤ %v× raw", goalFloorCPU), stats.Ratio(subj, floor), atMost(goalFloorCPU), GoalRatio)
		if modern {
			g += "; " + Goal(fmt.Sprintf("≤ %v× 2025-06-18's", goalModern), stats.Ratio(subj, legacy()), atMost(goalModern), GoalRatio)
		}
		return g
	case "seq50":
		return Goal(fmt.Sprintf("≤ %v× raw", goalFloorSeq), stats.Ratio(subj, floor), atMost(goalFloorSeq), GoalRatio)
	case "bigms":
		return Goal(fmt.Sprintf("≤ %v× raw", goalBigTime), stats.Ratio(subj, floor), atMost(goalBigTime), GoalRatio)
	}
	return ""
}

func (r *Report) goalIdle(per float64) string {
	return Goal(fmt.Sprintf("≤ %d KiB", goalIdleSession>>10), per, atMost(goalIdleSession), func(v float64) string { return KiB(v) + " KiB" })
}

func (r *Report) goalStalled(ratio float64) string {
	return Goal(fmt.Sprintf("≤ %v×", goalStalled), ratio, atMost(goalStalled), GoalRatio)
}

// Goals lists every goal row of the table: label, version and verdict.
func (r *Report) Goals() []string {
	var out []string
	version := ""
	for _, row := range r.Table().Rows {
		if row.Values == nil && row.Text == nil {
			version = strings.Trim(row.Label, "*")
		}
		if row.Goal != "" {
			out = append(out, fmt.Sprintf("%s, %s — %s", strings.TrimSpace(row.Label), version, row.Goal))
		}
	}
	return append(out, r.extraGoals()...)
}
