package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
)

// Console is what the harness prints at the end: the table, the goals and
// the behaviours.
func (r *Report) Console() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nmedians of %d repeat(s); (r×) = snodod ÷ that server\n\n", r.Config.Repeats)
	b.WriteString(r.Table().Markdown())
	b.WriteString("\nGoals:\n")
	for _, g := range r.Goals() {
		b.WriteString("  - " + strings.ReplaceAll(g, "**", "") + "\n")
	}
	b.WriteString("\n" + r.behaviour())
	b.WriteString(r.hosted())
	b.WriteString(r.httpSection())
	b.WriteString(r.scaling(""))
	return b.String()
}

// Markdown is docs/bench.md. chart, scaling and httpChart are the PNGs'
// file names beside it ("": none).
func (r *Report) Markdown(chart, scaling, httpChart string) string {
	var b strings.Builder
	m := r.Machine
	mode := "full run"
	if r.Config.Quick {
		mode = "quick run (BENCH_QUICK=1: smaller counts, one repeat)"
	}
	fmt.Fprintf(&b, `# Benchmarks

snodod against the MCP SDKs that serve the same tools over stdio, and
against a raw NDJSON loop that is the floor of this harness. This page is
written by `+"`make bench`"+` (bench/cmd/mcpbench): rerun it rather than edit it.
The goals, under "Goals", are the project's speed and memory goals
(bench/internal/report holds them).

Latest: %s, %s; the harness took %s.

## Reproduce

`+"```sh"+`
make bench                 # everything, 3 repeats: about 10 minutes on 2 cores
BENCH_QUICK=1 make bench   # one repeat with smaller counts, for development
`+"```"+`

`+"`make bench`"+` builds `+"`bin/snodod`"+`, installs the TypeScript SDK with
`+"`npm ci --prefix bench/node`"+` (when its lock file changed; it also pins the gateways), runs the Go
micro-benchmarks of the main module (`+"`go test -bench`"+`), builds the peers and
the harness in `+"`bench/`"+` (its own Go module), and runs the harness, which
prints the table and rewrites this page, `+"`docs/bench.png`"+` and
`+"`docs/bench-scaling.png`"+`. It needs Go,
and Node.js 20 or later with npm for the TypeScript peer and the HTTP
gateways supergateway and mcp-proxy (without them those are left out, or
n/a with the reason). Everything runs on this machine over pipes and Unix
sockets (and HTTP on 127.0.0.1), bounded in count and time. The pause of
an upgrade with 1,000 sessions has a page of its own, which `+"`make bench`"+`
rewrites after this one ([bench-upgrade.md](bench-upgrade.md)); and `+"`make soak`"+` writes
[bench-soak.md](bench-soak.md), 1,000 sessions for 10 minutes with reloads and
hosted servers killed. The comparison of snodod with mcp-remote for 10 clients
of one remote server is the last section of this page, which `+"`make bench`"+` adds
after it (`+"`bench/cmd/remotebench`"+`).

## Machine

- %s, %d cores, %.0f GiB of memory; Linux %s
- %s; Node.js %s
- 1-minute load average %.2f at the start, %.2f at the end.

**The figures are noisy.** The machine has 2 cores, shared by the harness,
the server under test and whatever else runs (when this table was made,
other engineers' test runs). Server CPU per call (from the server's rusage)
is the steadiest figure; latencies are the noisiest. Each server is run in
turn, the order rotating between repeats, so drift hits all of them alike,
and the table shows medians. A quick run's small counts also leave the
TypeScript SDK's JIT cold: compare servers on a full run.

## Results

`, r.Finished.UTC().Format("2006-01-02 15:04 UTC"), mode, r.Finished.Sub(r.Started).Round(time.Second),
		m.CPU, m.Cores, m.MemoryGiB, m.Kernel, m.Go, orNone(m.Node), m.LoadStart, m.LoadEnd)
	fmt.Fprintf(&b, "Medians of %d repeat(s). In every column but snodod's, (r×) is snodod's figure divided by that server's: above 1 means snodod's is higher (better for calls/s; worse for times, CPU and memory). n/a: the server does not serve that protocol version (see below).\n\n", r.Config.Repeats)
	b.WriteString(r.Table().Markdown())
	fmt.Fprintf(&b, "\n![Pipelined calls/s and server CPU per call by server](%s)\n", chart)

	b.WriteString("\n## Goals\n\n")
	for _, g := range r.Goals() {
		b.WriteString("- " + g + "\n")
	}
	b.WriteString(r.timeGoes())
	b.WriteString(r.scaling(scaling))
	b.WriteString(r.hosted())
	b.WriteString(r.httpSection())
	if httpChart != "" && (len(r.HTTP) > 0 || len(r.HTTPHosted) > 0) {
		fmt.Fprintf(&b, "\n![Streamable HTTP calls/s and CPU per call by server](%s)\n", httpChart)
	}

	b.WriteString("\n## The servers\n\n")
	for _, s := range r.Servings {
		fmt.Fprintf(&b, "- **%s**: %s (`%s`)\n", s.Name, s.What, s.Command)
	}
	b.WriteString("\n" + r.support())

	b.WriteString("\n## Behaviour\n\n")
	b.WriteString(r.behaviour())

	c := r.Config
	fmt.Fprintf(&b, `
## Method

bench/cmd/mcpbench speaks raw NDJSON (no SDK) and starts every server
afresh for each group of figures, at each protocol version: 2025-06-18
(initialize, then calls) and 2026-07-28 (every request carries
`+"`io.modelcontextprotocol/protocolVersion`"+` in `+"`params._meta`"+`, no
initialize). A server serves 2026-07-28 when its first such call is
answered with a result carrying `+"`resultType`"+`.

- **Start-up**: from starting the process to the answer to its first
  request (initialize, or the first 2026 call), sent at once.
- **Sequential**: %d echo calls one at a time, after %d unmeasured ones;
  each text is unique, and an answer with the wrong text counts as wrong.
- **Pipelined**: %d echo calls with %d outstanding; calls/s over the
  whole batch, latency from writing a request to reading its answer.
- **Server CPU per call**: the server's CPU over the pipelined batch,
  from the scheduler's run time of each of its threads
  (/proc/PID/task/*/schedstat, to the nanosecond) before and after the
  batch, divided by the calls; the user and system parts, context
  switches and read/write calls come from the same threads' stat, status
  and io.
- **Large payloads**: a %s-byte result (`+"`big`"+`) and a %s-byte
  request (`+"`echo`"+` of that much text, so its answer is as large), each in
  a fresh process after 20 warm-up calls, %d time(s) in a row; the median
  time to the whole answer, and the growth of the peak RSS (VmHWM in
  /proc/PID/status) over the first call (what one payload costs: the goal)
  and over all of them (which adds the earlier calls' garbage, held until a
  collection: in Go up to the 4 MB minimum heap, whatever the server does).
- **%s-byte line**: an echo request of that size; what comes back within
  %s, then whether the next call is answered.
- **Cancellation**: `+"`sleep {ms:1000}`"+`, then `+"`notifications/cancelled`"+`
  100 ms later; whatever is written for that id in the next 1.5 s.
- **snodod serve**: the daemon with the demo tools, its session socket in a
  temporary directory (environment: %s; the executor's queue must hold one
  call of every session, or with the default of 256 part of the calls would be
  refused -32603 by design). %s sessions each make %d
  sequential echo calls, all at once; then, in a fresh daemon, %s idle
  sessions (initialized) and the growth of the daemon's VmRSS over the
  empty daemon's (after one session came and went), divided by the
  sessions; then %d healthy sessions calling for %s alone, and again while
  one more session has asked for %d results of %s bytes and reads nothing.
  The generator's RLIMIT_NOFILE: %s.
- **Scaling**: %s echo calls at each level, pipelined with %s requests in
  flight to a fresh `+"`snodod stdio --demo`"+` (its executor's queue raised to
  hold them all) and to the floor; and on a fresh `+"`snodod serve`"+` with
  %s sessions at once, about as many calls in all, each session's one
  after another; CPU from the server's schedstat over each level.
- **HTTP**: %d clients on keep-alive connections, each sending one call
  after another for %s, after one warm-up call per connection (and, when
  hosting a stdio server, after opening its session); a call fails when
  its answer is not 200 with the echoed text. CPU from the schedstat of
  every thread of the server's process tree, taken once the sessions are
  open, before and after the load.
`, c.Stdio.Sequential, c.Stdio.Warmup, c.Stdio.Pipelined, c.Stdio.InFlight,
		Number(float64(c.Stdio.BigResult)), Number(float64(c.Stdio.BigRequest)), c.Stdio.LargeRepeats,
		Number(float64(c.Stdio.HugeLine)), c.Stdio.HugeTimeout, strings.Join(orList(c.DaemonEnv), " "),
		Number(float64(c.Sessions)), c.CallsEach, Number(float64(c.IdleSessions)), c.Healthy, c.HealthyPhase,
		c.StalledRequests, Number(float64(c.StalledBig)), c.GeneratorNoFile,
		Number(float64(c.CurveCalls)), levels(c.InFlightLevels), levels(c.SessionLevels), c.HTTPClients, c.HTTPPhase)
	return b.String()
}

// levels lists a curve's levels: "1, 64 and 1,024".
func levels(ls []int) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = Number(float64(l))
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// support says, per server, which versions it serves and why not.
func (r *Report) support() string {
	var b strings.Builder
	b.WriteString("Protocol versions served over stdio:\n\n")
	for _, s := range r.Servers {
		var yes, no []string
		for _, v := range r.Versions {
			if why := r.unsupported(s, v); why != "" {
				no = append(no, v+" ("+why+")")
			} else if len(r.results(s, v)) > 0 {
				yes = append(yes, v)
			}
		}
		line := fmt.Sprintf("- %s: %s", s, strings.Join(yes, ", "))
		if len(no) > 0 {
			line += "; not " + strings.Join(no, ", ")
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// behaviour lists the outcomes in full, the wrong answers and the problems
// seen, per version and server.
func (r *Report) behaviour() string {
	var b strings.Builder
	for _, v := range r.Versions {
		if !r.measured(v) {
			continue
		}
		fmt.Fprintf(&b, "%s:\n\n", v)
		for _, s := range r.Servers {
			if r.unsupported(s, v) != "" {
				continue
			}
			huge := r.outcome(s, v, func(x *load.StdioResult) string { return x.HugeLine })
			canc := r.outcome(s, v, func(x *load.StdioResult) string { return x.Cancel })
			fmt.Fprintf(&b, "- %s: %s-byte line: %s. Cancelled sleep: %s.", s, Number(float64(r.Config.Stdio.HugeLine)), orNone(huge), orNone(canc))
			wrong := 0
			var problems []string
			for _, x := range r.results(s, v) {
				wrong += x.WrongAnswers
				problems = append(problems, x.Problems...)
			}
			if wrong > 0 {
				fmt.Fprintf(&b, " **%d wrong answers.**", wrong)
			}
			for _, p := range dedupe(problems, 5) {
				b.WriteString(" Problem: " + p + ".")
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	if r.SessionsNote != "" {
		fmt.Fprintf(&b, "snodod serve: %s\n", strings.TrimSpace(r.SessionsNote))
	}
	for i, c := range r.Concurrent {
		if c.Failed > 0 || len(c.Problems) > 0 {
			fmt.Fprintf(&b, "- snodod serve, repeat %d, %d sessions × %d calls: %d failed calls. %s\n", i+1, c.Sessions, c.CallsEach, c.Failed, strings.Join(dedupe(c.Problems, 5), "; "))
		}
	}
	for i, x := range r.Idle {
		if i > 0 && x.StillAnswers && len(x.Problems) == 0 {
			continue // said once is enough
		}
		fmt.Fprintf(&b, "- snodod serve, repeat %d, %d idle sessions: daemon RLIMIT_NOFILE %s; a new session %s.", i+1, x.Sessions, x.DaemonNoFile, map[bool]string{true: "was still answered", false: "was **not** answered"}[x.StillAnswers])
		for _, p := range dedupe(x.Problems, 5) {
			b.WriteString(" Problem: " + p + ".")
		}
		b.WriteString("\n")
	}
	for i, x := range r.Stalled {
		if x.StalledSession != "" || x.Failed > 0 || len(x.Problems) > 0 {
			fmt.Fprintf(&b, "- snodod serve, repeat %d, stalled client: ", i+1)
			if x.StalledSession != "" {
				b.WriteString("the stalled session was " + x.StalledSession + ".")
			}
			if x.Failed > 0 {
				fmt.Fprintf(&b, " %d healthy calls failed.", x.Failed)
			}
			for _, p := range dedupe(x.Problems, 5) {
				b.WriteString(" Problem: " + p + ".")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

func dedupe(s []string, n int) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] && len(out) < n {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orList(s []string) []string {
	if len(s) == 0 {
		return []string{"defaults"}
	}
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = "`" + x + "`"
	}
	return out
}
