// Command upgradebench measures the pause a client sees while the daemon is
// upgraded (docs/operations.md): `snodod serve` with 1,000 sessions, each
// sending a tools/call echo at its own steady pace (one at a time), and
// `snodod upgrade` in the middle. It prints, and with -docs writes to
// docs/bench-upgrade.md, the latencies of the calls sent before the upgrade
// and of those sent while it ran (p50, p99, the longest), how long the
// upgrade took, and whether any call failed (none may).
//
//	upgradebench -snodod ../bin/snodod [-sessions 1000] [-every 500ms] [-repeats 3] [-docs ../docs]
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/snodod/snodod/bench/internal/load"
	"github.com/snodod/snodod/bench/internal/stats"
	"github.com/snodod/snodod/bench/internal/wire"
)

func main() {
	var (
		snodod   = flag.String("snodod", "../bin/snodod", "the snodod binary")
		sessions = flag.Int("sessions", 1000, "sessions calling across the upgrade")
		every    = flag.Duration("every", 500*time.Millisecond, "each session's pace: one call per this")
		warm     = flag.Duration("warm", 2*time.Second, "how long the sessions call before the upgrade, and after it")
		repeats  = flag.Int("repeats", 3, "runs; the table shows medians")
		docs     = flag.String("docs", "", "where to write bench-upgrade.md (empty: nowhere)")
	)
	flag.Parse()
	if os.Getenv("BENCH_QUICK") == "1" {
		*repeats = 1
	}
	bin, err := filepath.Abs(*snodod)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	loadStart := loadAvg()
	var runs []load.UpgradePause
	for r := range *repeats {
		d, err := load.StartDaemon(bin, *sessions+64, nil)
		if err != nil {
			log.Fatal(err)
		}
		res, pid := load.RunUpgradePause(d, bin, wire.Dialect{Version: wire.V20250618}, *sessions, *every, *warm)
		if pid != 0 {
			if err := load.StopSuccessor(pid); err != nil {
				res.Problems = append(res.Problems, err.Error())
			}
		}
		d.Stop()
		log.Printf("[%d/%d] upgrade with %d sessions: took %s; across it p50 %.0f µs, p99 %.0f µs, max %s (%d calls); before p99 %.0f µs; %d failed%s",
			r+1, *repeats, *sessions, res.Upgrade.Round(time.Millisecond), res.Across.P50, res.Across.P99, res.MaxAcross.Round(time.Millisecond),
			res.CallsAcross, res.Before.P99, res.Failed, problems(res.Problems))
		runs = append(runs, res)
	}
	page := markdown(runs, *sessions, *every, time.Since(start), loadStart, loadAvg())
	fmt.Print(page)
	if *docs != "" {
		if err := os.WriteFile(filepath.Join(*docs, "bench-upgrade.md"), []byte(page), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}

func problems(p []string) string {
	if len(p) == 0 {
		return ""
	}
	return ": " + strings.Join(p, "; ")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func markdown(runs []load.UpgradePause, sessions int, every, took time.Duration, load0, load1 float64) string {
	var b strings.Builder
	f := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	failed, calls := 0, 0
	for _, r := range runs {
		failed += r.Failed
		calls += r.CallsBefore + r.CallsAcross
	}
	f("# Benchmark: the pause of an upgrade\n\n")
	f("What a client sees while `snodod upgrade` replaces the daemon\n")
	f("(docs/operations.md): %d sessions of `snodod serve --demo`, each sending a\n", sessions)
	f("2025-06-18 `tools/call echo` every %s, one at a time, on the session\n", every)
	f("socket, and `snodod upgrade` in the middle (the same binary: the new\n")
	f("process takes the sockets and every session). This page is written by\n")
	f("`make bench` (bench/cmd/upgradebench): rerun it rather than edit it.\n\n")
	f("Latest: %s, %d run(s); the harness took %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), len(runs), took.Round(time.Second))
	f("## Results\n\nMedians over the runs. \"Across\" are the calls the upgrade could delay:\n")
	f("sent before `snodod upgrade` exited and answered after it started. A call\n")
	f("sent during a session's pause waits in the socket until the new process\n")
	f("reads it; \"before\" are the calls answered before the upgrade started.\n\n")
	f("| | figure |\n| --- | ---: |\n")
	f("| sessions | %d |\n", sessions)
	f("| upgrade, start to exit of `snodod upgrade` (ms) | %.0f |\n", stats.MedianOf(runs, func(r load.UpgradePause) float64 { return ms(r.Upgrade) }))
	f("| calls before it: p50 / p99 (µs) | %.0f / %.0f |\n", stats.MedianOf(runs, func(r load.UpgradePause) float64 { return r.Before.P50 }),
		stats.MedianOf(runs, func(r load.UpgradePause) float64 { return r.Before.P99 }))
	f("| calls across it: p50 / p99 (ms) | %.1f / %.1f |\n", stats.MedianOf(runs, func(r load.UpgradePause) float64 { return r.Across.P50 / 1000 }),
		stats.MedianOf(runs, func(r load.UpgradePause) float64 { return r.Across.P99 / 1000 }))
	f("| longest wait across it (ms) | %.0f |\n", stats.MedianOf(runs, func(r load.UpgradePause) float64 { return ms(r.MaxAcross) }))
	f("| calls across it (per run) | %.0f |\n", stats.MedianOf(runs, func(r load.UpgradePause) float64 { return float64(r.CallsAcross) }))
	f("| calls failed, all runs | %d of %d |\n\n", failed, calls)
	for _, r := range runs {
		for _, p := range r.Problems {
			f("- problem: %s\n", p)
		}
	}
	f("## Machine\n\n- %d cores, %s/%s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	f("- 1-minute load average %.2f at the start, %.2f at the end: the machine is shared, and the figures are noisy.\n", load0, load1)
	return b.String()
}

func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	var v float64
	fmt.Sscan(string(b), &v)
	return v
}
