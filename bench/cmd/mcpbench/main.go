// Command mcpbench is snodod's benchmark harness. It measures snodod and
// its peers (the official Go and TypeScript MCP SDKs, mark3labs/mcp-go and
// a raw NDJSON floor) over stdio at protocol versions 2025-06-18 and
// 2026-07-28 (snodod both as `snodod stdio` and as a session of `snodod
// serve` behind `snodod connect`), then `snodod serve` with many sessions on its session
// socket, hosted servers (relayed behind `snodod connect NAME`, shared),
// the scaling curves and Streamable HTTP (snodod against the SDKs'
// servers, and one stdio server hosted by snodod, supergateway and
// mcp-proxy); it prints one table of medians with the ratios of snodod to
// each server, and writes docs/bench.md and its charts.
//
// `make bench` builds what it needs and runs it from bench/:
//
//	mcpbench [-quick] [-repeats N] [-snodod ../bin/snodod] [-peers bin] [-node node] [-docs ../docs]
//
// BENCH_QUICK=1 in the environment is -quick: one repeat, smaller counts.
package main

import (
	"debug/buildinfo"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/report"
	"github.com/snodod/snodod/bench/internal/wire"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("mcpbench: ")
	var (
		quick    = flag.Bool("quick", os.Getenv("BENCH_QUICK") == "1", "one repeat with smaller counts (BENCH_QUICK=1)")
		repeats  = flag.Int("repeats", 0, "repeats of every measurement (0: 3, or 1 with -quick)")
		snodod   = flag.String("snodod", "../bin/snodod", "the snodod binary")
		peers    = flag.String("peers", "bin", "directory of the built Go peers: gosdk, mcpgo, raw")
		nodeDir  = flag.String("node", "node", "directory of the TypeScript peer (server.mjs, node_modules)")
		docs     = flag.String("docs", "../docs", "where to write bench.md and bench.png (empty: nowhere)")
		only     = flag.String("servers", "", "comma-separated servers to run (default: all)")
		sessions = flag.Bool("sessions", true, "run the snodod serve scenarios")
		stdio    = flag.Bool("stdio", true, "run the stdio scenarios")
		jsonOut  = flag.String("json", "", "also write every measurement as JSON to this file")
		sVersion = flag.String("sessions-version", wire.V20250618, "protocol version of the snodod serve scenarios")
		dEnv     = flag.String("daemon-env", "", "space-separated NAME=VALUE settings for snodod serve, replacing the harness's (\"none\": the defaults)")
		hosted   = flag.Bool("hosted", true, "run the hosted-server scenarios (relay overhead, sharing)")
		sharers  = flag.Int("sharing-clients", 100, "clients of the sharing scenario (0: skip it)")
		curves   = flag.Bool("curves", true, "run the scaling curves (requests in flight, sessions)")
		httpOn   = flag.Bool("http", true, "run the Streamable HTTP scenario")
		httpN    = flag.Int("http-clients", 0, "concurrent clients of the HTTP scenarios (0: 64)")
		hostHTTP = flag.Bool("http-hosting", true, "run the scenario of one stdio server over HTTP behind snodod, supergateway and mcp-proxy")
		gosdkH   = flag.String("gosdkhttp", "bin/gosdkhttp", "the Go SDK's streamable HTTP peer")
		goBench  = flag.String("gobench", "", "the output of the main module's go test -bench -benchmem, for its hot-path rows")
	)
	flag.Parse()
	if *repeats <= 0 {
		*repeats = 3
		if *quick {
			*repeats = 1
		}
	}
	cfg := sizes(*quick, *repeats)
	cfg.GeneratorNoFile = raiseNoFile()
	cfg.SessionsVersion = *sVersion
	if *httpN > 0 {
		cfg.HTTPClients = *httpN
	}
	switch *dEnv {
	case "":
	case "none":
		cfg.DaemonEnv = nil
	default:
		cfg.DaemonEnv = strings.Fields(*dEnv)
	}

	rep := &report.Report{Versions: []string{wire.V20250618, wire.V20260728}, Config: cfg, Started: time.Now()}
	rep.Machine = machine()
	servers, servings := serversUnderTest(*snodod, *peers, *nodeDir)
	all := servers
	if *only != "" {
		keep := strings.Split(*only, ",")
		servers = slices.DeleteFunc(servers, func(s load.Server) bool { return !slices.Contains(keep, s.Name) })
	}
	for _, s := range servers {
		rep.Servers = append(rep.Servers, s.Name)
	}
	rep.Servings = servings

	serveOK, why := hasServe(*snodod)
	if !serveOK {
		rep.SessionsNote = why
	}
	for r := range *repeats {
		for vi, version := range rep.Versions {
			if !*stdio {
				break
			}
			c := cfg.Stdio
			c.Outcomes = r == 0 // behaviours, not figures: once is enough
			// Rotate the order so that drift hits every server alike.
			order := rotate(servers, r*len(rep.Versions)+vi)
			for _, s := range order {
				t0 := time.Now()
				res := load.RunStdio(s, wire.Dialect{Version: version}, c)
				rep.Stdio = append(rep.Stdio, res)
				logStdio(r, *repeats, res, time.Since(t0))
			}
		}
		if *sessions && serveOK {
			runSessions(rep, *snodod, r, *repeats)
		}
		if *hosted && serveOK {
			runHosted(rep, *snodod, relayUpstreams(all), sharer(all), *sharers, r, *repeats)
		}
		if *curves {
			runCurves(rep, servers, serveOK, *snodod, r, *repeats)
		}
		if *httpOn && serveOK {
			runHTTP(rep, *snodod, *gosdkH, *nodeDir, r, *repeats)
		}
		if *hostHTTP && serveOK {
			if i := slices.IndexFunc(all, func(s load.Server) bool { return s.Name == report.Floor }); i >= 0 {
				runHTTPHosting(rep, *snodod, all[i], *nodeDir, r, *repeats)
			}
		}
	}
	if *goBench != "" {
		rep.GoBench = readGoBench(*goBench)
	}
	if *sessions && !serveOK {
		log.Printf("snodod serve scenarios skipped: %s", why)
	}
	rep.Machine.LoadEnd = loadAverage()
	rep.Finished = time.Now()

	fmt.Print(rep.Console())
	if *docs != "" {
		scaling := ""
		if len(rep.Curves) > 0 {
			scaling = "bench-scaling.png"
		}
		if err := os.WriteFile(filepath.Join(*docs, "bench.md"), []byte(rep.Markdown("bench.png", scaling, "bench-http.png")), 0o644); err != nil {
			log.Fatal(err)
		}
		if err := rep.Chart(filepath.Join(*docs, "bench.png")); err != nil {
			log.Fatal(err)
		}
		if err := rep.ScalingChart(filepath.Join(*docs, "bench-scaling.png")); err != nil {
			log.Fatal(err)
		}
		if err := rep.HTTPChart(filepath.Join(*docs, "bench-http.png")); err != nil {
			log.Fatal(err)
		}
		log.Printf("wrote bench.md, bench.png, bench-scaling.png and bench-http.png in %s", *docs)
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(jsonSafe(rep), "", "  ")
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

// sizes returns the counts of a full or a quick run.
func sizes(quick bool, repeats int) report.Config {
	c := report.Config{
		Quick:   quick,
		Repeats: repeats,
		Stdio: load.StdioConfig{
			Warmup: 200, Sequential: 2000, Pipelined: 20000, InFlight: 64,
			BigResult: 1_000_000, BigRequest: 1_500_000, HugeLine: 3_000_000, LargeRepeats: 3,
			Timeout: 10 * time.Second, HugeTimeout: 5 * time.Second,
		},
		SessionsVersion: wire.V20250618,
		Sessions:        1000, CallsEach: 100,
		IdleSessions: 10000,
		Healthy:      20, HealthyPhase: 2 * time.Second,
		StalledRequests: 64, StalledBig: 1_000_000,
	}
	c.InFlightLevels, c.SessionLevels, c.CurveCalls = []int{1, 64, 1024}, []int{1, 10, 100, 1000, 10000}, 20000
	c.HTTPClients, c.HTTPPhase = 64, 5*time.Second
	if quick {
		c.Stdio.Warmup, c.Stdio.Sequential, c.Stdio.Pipelined, c.Stdio.LargeRepeats = 50, 300, 3000, 1
		c.Sessions, c.CallsEach, c.IdleSessions = 100, 20, 1000
		c.Healthy, c.HealthyPhase = 10, time.Second
		c.SessionLevels, c.CurveCalls = []int{1, 10, 100, 1000}, 3000
		c.HTTPPhase = 2 * time.Second
	}
	// The executor's queue must hold one call of every concurrent session,
	// or the figure would count refusals.
	c.DaemonEnv = []string{"SNODOD_EXECUTOR__MAX_QUEUE=" + strconv.Itoa(max(256, c.Sessions))}
	return c
}

// serversUnderTest lists the stdio servers, snodod first and the floor
// last, and says what each is. The TypeScript peer is left out when node
// or its packages are missing.
func serversUnderTest(snodod, peers, nodeDir string) ([]load.Server, []report.Serving) {
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			log.Fatal(err)
		}
		return a
	}
	bin := func(name string) string { return abs(filepath.Join(peers, name)) }
	servers := []load.Server{
		{Name: "snodod", Command: []string{abs(snodod), "stdio", "--demo"}},
		// The daemon's path: a session of snodod serve, reached as a
		// client reaches it (snodod connect hands over its pipes).
		{Name: "snodod serve", Command: []string{abs(snodod), "connect", "--control-socket"}, Serve: abs(snodod)},
		{Name: "go-sdk", Command: []string{bin("gosdk")}},
		{Name: "mcp-go", Command: []string{bin("mcpgo")}},
	}
	servings := []report.Serving{
		{Name: "snodod", What: "snodod " + snododVersion(snodod) + " built from " + gitState(filepath.Dir(abs(snodod))) + ", the demo tools", Command: "bin/snodod stdio --demo"},
		{Name: "snodod serve", What: "the same binary's daemon path: a session of `snodod serve --demo` (a fresh daemon per process, started before the clock), its pipes handed over by `snodod connect`; CPU and memory are the daemon's", Command: "bin/snodod serve --demo, then bin/snodod connect"},
		{Name: "go-sdk", What: "the official Go SDK, " + moduleVersion(bin("gosdk"), "github.com/modelcontextprotocol/go-sdk") + ", `mcp.StdioTransport` (bench/peers/gosdk)", Command: "bench/bin/gosdk"},
		{Name: "mcp-go", What: "mark3labs/mcp-go " + moduleVersion(bin("mcpgo"), "github.com/mark3labs/mcp-go") + ", `server.ServeStdio` with its defaults (bench/peers/mcpgo)", Command: "bench/bin/mcpgo"},
	}
	node, err := exec.LookPath("node")
	sdk := sdkVersion(nodeDir)
	switch {
	case err != nil:
		log.Printf("ts-sdk left out: node not found")
	case sdk == "":
		log.Printf("ts-sdk left out: no node_modules in %s (run npm ci --prefix %s)", nodeDir, nodeDir)
	default:
		servers = append(servers, load.Server{Name: "ts-sdk", Command: []string{node, abs(filepath.Join(nodeDir, "server.mjs"))}})
		servings = append(servings, report.Serving{Name: "ts-sdk", What: "the official TypeScript SDK @modelcontextprotocol/sdk " + sdk + ", `McpServer` with `StdioServerTransport` on Node.js (bench/node/server.mjs)", Command: "node bench/node/server.mjs"})
	}
	servers = append(servers, load.Server{Name: "raw", Command: []string{bin("raw")}})
	servings = append(servings, report.Serving{Name: "raw", What: "the floor: a hand-written NDJSON loop, no validation (bench/peers/raw)", Command: "bench/bin/raw"})
	return servers, servings
}

func snododVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(out))
	if len(f) >= 2 {
		return f[1]
	}
	return "?"
}

// gitState names the commit of the work tree at dir, and whether it had
// uncommitted changes.
func gitState(dir string) string {
	out, err := exec.Command("git", "-C", dir, "describe", "--always", "--dirty= with uncommitted changes").Output()
	if err != nil {
		return "an unknown commit"
	}
	return "commit " + strings.TrimSpace(string(out))
}

// moduleVersion is the version of module path built into the binary.
func moduleVersion(bin, path string) string {
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "?"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "?"
}

// sdkVersion is the installed version of the TypeScript SDK, or "".
func sdkVersion(nodeDir string) string {
	return nodePackageVersion(nodeDir, "@modelcontextprotocol/sdk")
}

// nodePackageVersion is the installed version of the npm package pkg in
// nodeDir's node_modules, or "".
func nodePackageVersion(nodeDir, pkg string) string {
	b, err := os.ReadFile(filepath.Join(nodeDir, "node_modules", filepath.FromSlash(pkg), "package.json"))
	if err != nil {
		return ""
	}
	var p struct{ Version string }
	if json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}

// hasServe reports whether the snodod binary has the serve command.
func hasServe(snodod string) (bool, string) {
	out, err := exec.Command(snodod, "serve", "--help").CombinedOutput()
	if err != nil {
		return false, fmt.Sprintf("`snodod serve --help` failed (%v): %s", err, strings.TrimSpace(firstLine(string(out))))
	}
	for _, flag := range []string{"-socket", "-control-socket", "-max-sessions", "-demo"} {
		if !strings.Contains(string(out), flag) {
			return false, "`snodod serve` has no " + flag + " flag"
		}
	}
	return true, ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// runSessions runs the three many-session scenarios, each on a fresh
// daemon.
func runSessions(rep *report.Report, snodod string, r, repeats int) {
	c := rep.Config
	d := wire.Dialect{Version: c.SessionsVersion}
	start := func(maxSessions int) *load.Daemon {
		dm, err := load.StartDaemon(snodod, maxSessions, c.DaemonEnv)
		if err != nil {
			log.Printf("snodod serve: %v", err)
			rep.SessionsNote = err.Error()
			return nil
		}
		return dm
	}
	// stop ends the daemon and notes anything unexpected: a death, an exit
	// status other than 0, and log lines at WARN or ERROR other than those
	// the scenario provokes (expected, matched in the last line).
	stop := func(dm *load.Daemon, what, expected string) {
		if !dm.Alive() {
			log.Printf("[%d/%d] snodod serve died during %s: %s", r+1, repeats, what, lastLines(dm.Stderr(), 5))
			rep.SessionsNote += fmt.Sprintf(" The daemon died during %s (repeat %d): %s.", what, r+1, lastLines(dm.Stderr(), 3))
		}
		if warn, errs, last := dm.Logged(); errs > 0 || (warn > 0 && (expected == "" || !strings.Contains(last, expected))) {
			log.Printf("[%d/%d] snodod serve logged %d warnings and %d errors during %s; the last: %s", r+1, repeats, warn, errs, what, last)
			rep.SessionsNote += fmt.Sprintf(" During %s (repeat %d) the daemon logged %d warnings and %d errors; the last: `%s`.", what, r+1, warn, errs, last)
		}
		if how := dm.Stop(); !strings.Contains(how, "exit status 0") {
			log.Printf("[%d/%d] snodod serve after %s: %s", r+1, repeats, what, how)
			rep.SessionsNote += fmt.Sprintf(" After %s (repeat %d) SIGTERM ended the daemon with %q.", what, r+1, how)
		}
	}

	t0 := time.Now()
	if dm := start(c.Sessions + 16); dm != nil {
		res := load.RunConcurrent(dm, d, c.Sessions, c.CallsEach, 30*time.Second)
		stop(dm, "the concurrent sessions", "")
		rep.Concurrent = append(rep.Concurrent, res)
		log.Printf("[%d/%d] serve: %d sessions × %d calls: %s calls/s, p99 %s µs, %d failed (%s)%s", r+1, repeats, c.Sessions, c.CallsEach,
			report.Number(res.CallsPerSec), report.Number(res.P99), res.Failed, time.Since(t0).Round(time.Millisecond), problems(res.Problems))
	}
	t0 = time.Now()
	if dm := start(c.IdleSessions + 16); dm != nil {
		res := load.RunIdle(dm, d, c.IdleSessions, time.Second)
		stop(dm, "the idle sessions", "")
		rep.Idle = append(rep.Idle, res)
		log.Printf("[%d/%d] serve: %d idle sessions: %s KiB each (%s → %s MiB), daemon nofile %s (%s)%s", r+1, repeats, c.IdleSessions,
			report.KiB(res.PerSession), report.MiB(res.RSSEmpty), report.MiB(res.RSSIdle), res.DaemonNoFile, time.Since(t0).Round(time.Millisecond), problems(res.Problems))
	}
	t0 = time.Now()
	if dm := start(c.Healthy + 16); dm != nil {
		watch := time.Duration(0)
		if r == 0 {
			watch = 8 * time.Second // past the default write timeout (5 s)
		}
		res := load.RunStalled(dm, d, c.Healthy, c.HealthyPhase, c.StalledRequests, c.StalledBig, watch)
		stop(dm, "the stalled client", "output failed") // the stalled session's end
		rep.Stalled = append(rep.Stalled, res)
		log.Printf("[%d/%d] serve: stalled client: healthy p99 %s → %s µs (%s) %s (%s)%s", r+1, repeats,
			report.Number(res.BaseP99), report.Number(res.StalledP99), report.Ratio(res.Ratio), res.StalledSession, time.Since(t0).Round(time.Millisecond), problems(res.Problems))
	}
}

func problems(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return "; problems: " + strings.Join(p, "; ")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " / ")
}

func logStdio(r, repeats int, res load.StdioResult, took time.Duration) {
	prefix := fmt.Sprintf("[%d/%d] %s %-7s", r+1, repeats, res.Version, res.Server)
	if res.Unsupported != "" {
		log.Printf("%s n/a: %s", prefix, res.Unsupported)
		return
	}
	log.Printf("%s %s calls/s, CPU %s µs/call, seq p50 %s µs, start %s ms, 1 MB %s ms (%s)%s", prefix,
		report.Number(res.CallsPerSec), report.Number(res.CPUPerCall), report.Number(res.SeqP50), report.Number(res.StartupMs),
		report.Number(res.BigResultMs), took.Round(time.Millisecond), problems(res.Problems))
}

func rotate[T any](s []T, k int) []T {
	if len(s) == 0 {
		return s
	}
	k %= len(s)
	return append(slices.Clone(s[k:]), s[:k]...)
}

// raiseNoFile raises this process's RLIMIT_NOFILE to its hard limit (the
// idle-session scenario holds one descriptor per session) and returns it
// as soft/hard.
func raiseNoFile() string {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return "?"
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Printf("raise RLIMIT_NOFILE: %v", err)
	}
	_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	return fmt.Sprintf("%d/%d", lim.Cur, lim.Max)
}

// machine describes this machine.
func machine() report.Machine {
	m := report.Machine{Cores: runtime.NumCPU(), Go: runtime.Version(), LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if name, value, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(name) == "model name" {
				m.CPU = strings.TrimSpace(value)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for l := range strings.Lines(string(b)) {
			if rest, ok := strings.CutPrefix(l, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				m.MemoryGiB = kb / (1 << 20)
			}
		}
	}
	if out, err := exec.Command("node", "--version").Output(); err == nil {
		m.Node = strings.TrimSpace(string(out))
	}
	return m
}

// loadAverage is the 1-minute load average.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
