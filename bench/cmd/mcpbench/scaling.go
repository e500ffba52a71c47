package main

import (
	"bufio"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/report"
	"github.com/snodod/snodod/bench/internal/wire"
)

// runCurves runs the scaling curves of repeat r: snodod stdio
// and the floor at each level of requests in flight, at every version, and
// snodod serve at each number of sessions.
func runCurves(rep *report.Report, servers []load.Server, serveOK bool, snodod string, r, repeats int) {
	c := rep.Config
	top := slices.Max(c.InFlightLevels)
	for _, version := range rep.Versions {
		for _, s := range servers {
			if s.Name != report.Subject && s.Name != report.Floor {
				continue
			}
			if s.Name == report.Subject {
				// Every request in flight is admitted: the queue holds them.
				s.Env = append(slices.Clone(s.Env), "SNODOD_EXECUTOR__MAX_QUEUE="+strconv.Itoa(top))
			}
			t0 := time.Now()
			cv := load.RunInflightCurve(s, wire.Dialect{Version: version}, c.InFlightLevels, c.CurveCalls, c.Stdio.Timeout)
			rep.Curves = append(rep.Curves, cv)
			log.Printf("[%d/%d] %s %s curve: %s (%s)%s", r+1, repeats, version, s.Name, curveLine(cv), time.Since(t0).Round(time.Millisecond), problems(cv.Problems))
		}
	}
	if !serveOK || len(c.SessionLevels) == 0 {
		return
	}
	most := slices.Max(c.SessionLevels)
	env := append(slices.Clone(c.DaemonEnv), "SNODOD_EXECUTOR__MAX_QUEUE="+strconv.Itoa(max(256, most)))
	dm, err := load.StartDaemon(snodod, most+16, env)
	if err != nil {
		log.Printf("[%d/%d] sessions curve: %v", r+1, repeats, err)
		return
	}
	defer dm.Stop()
	t0 := time.Now()
	cv := load.RunSessionsCurve(dm, wire.Dialect{Version: c.SessionsVersion}, c.SessionLevels, c.CurveCalls, 60*time.Second)
	rep.Curves = append(rep.Curves, cv)
	log.Printf("[%d/%d] sessions curve: %s (%s)%s", r+1, repeats, curveLine(cv), time.Since(t0).Round(time.Millisecond), problems(cv.Problems))
}

func curveLine(c load.Curve) string {
	var parts []string
	for _, p := range c.Points {
		parts = append(parts, report.Count(p.Level)+": "+report.Number(p.CPUPerCall)+" µs CPU, p99 "+report.Number(p.P99)+" µs")
	}
	return strings.Join(parts, "; ")
}

// runHTTP runs the Streamable HTTP scenario of repeat r against snodod
// serve and the SDKs' streamable servers, the order rotating.
func runHTTP(rep *report.Report, snodod, gosdk, nodeDir string, r, repeats int) {
	dir, err := os.MkdirTemp("", "mcpbench-http-")
	if err != nil {
		log.Printf("http: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	servers := []load.HTTPServer{load.SnododHTTP(snodod, dir)}
	if abs, err := filepath.Abs(gosdk); err == nil {
		if _, err := os.Stat(abs); err == nil {
			servers = append(servers, load.HTTPServer{Name: "go-sdk", Command: []string{abs},
				Body: load.HTTPModernCall, Headers: load.HTTPModernHeaders})
		}
	}
	if node, err := exec.LookPath("node"); err == nil && sdkVersion(nodeDir) != "" {
		servers = append(servers, load.HTTPServer{Name: "ts-sdk", Command: []string{node, filepath.Join(nodeDir, "http-server.mjs"), "0"},
			Body: load.HTTPLegacyCall, Headers: map[string]string{"MCP-Protocol-Version": "2025-11-25"}})
	}
	c := rep.Config
	for _, s := range rotate(servers, r) {
		t0 := time.Now()
		res := load.RunHTTP(s, c.HTTPClients, c.HTTPPhase)
		rep.HTTP = append(rep.HTTP, res)
		log.Printf("[%d/%d] http %s: %s calls/s, CPU %s µs/call, %d failed (%s)%s", r+1, repeats, s.Name,
			report.Number(res.CallsPerSec), report.Number(res.CPUPerCall), res.Errors, time.Since(t0).Round(time.Millisecond), problems(res.Problems))
	}
}

// goBenchRows are the micro-benchmarks of the hot path the page shows.
var goBenchRows = []string{
	"BenchmarkDecode/harness", "BenchmarkDispatch/2026", "BenchmarkDispatch/2025", "BenchmarkExecutorSubmit/window",
	"BenchmarkRoundTrip", "BenchmarkPipelined", "BenchmarkRuntimePipelined", "BenchmarkConnSequential", "BenchmarkConnPipelined",
}

// readGoBench picks goBenchRows out of go test -bench -benchmem output.
func readGoBench(path string) []report.GoBench {
	f, err := os.Open(path)
	if err != nil {
		log.Printf("gobench: %v", err)
		return nil
	}
	defer f.Close()
	byName := map[string]report.GoBench{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		name := fields[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		g := report.GoBench{Name: name}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			switch fields[i+1] {
			case "ns/op":
				g.NsPerOp = v
			case "B/op":
				g.BPerOp = v
			case "allocs/op":
				g.Allocs = v
			}
		}
		byName[name] = g
	}
	var out []report.GoBench
	for _, n := range goBenchRows {
		if g, ok := byName[n]; ok {
			out = append(out, g)
		}
	}
	return out
}
