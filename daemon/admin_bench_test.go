package daemon

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCallMetrics is one echo tools/call of a session of the socket,
// 32 in flight, on three daemons side by side: one with the metrics off (no
// admin.listen, no audit log: nothing observes the runtime, the audit
// log's sink is idle), one with them on
// (admin.listen set, scraped once a second), with native histogram
// buckets (the default) and with classic ones only
// (admin.native_histograms = false), and one with the metrics and the
// audit log (audit.file) on. Each iteration is a batch of calls
// on each daemon, in turn (in a rotating order), so that all see the
// same machine; it
// reports the process's CPU time per call of each (the daemon's and the
// client's: both run in this process) and the difference in percent
// (docs/observability.md, "Cost"; the goal: at most 5 %). The cheapest call
// there is: a relayed one costs the same in absolute terms, a smaller
// share of it.
func BenchmarkCallMetrics(b *testing.B) {
	for _, bc := range []struct {
		name   string
		native bool
	}{{"native", true}, {"classic", false}} {
		b.Run(bc.name, func(b *testing.B) {
			metricsOn := map[string]any{"admin.listen": "127.0.0.1:0", "admin.native_histograms": bc.native}
			off := newBenchDaemon(b, nil)
			on := newBenchDaemon(b, metricsOn)
			// The audit log on too (docs/observability.md, "Audit log"),
			// to a file of the benchmark's: the goal is for metrics and
			// audit together.
			audited := map[string]any{"audit.file": filepath.Join(b.TempDir(), "audit.log")}
			maps.Copy(audited, metricsOn)
			both := newBenchDaemon(b, audited)
			stop := scrapeEvery("http://"+on.d.adminAddr()+"/metrics", time.Second)
			defer stop()
			stopBoth := scrapeEvery("http://"+both.d.adminAddr()+"/metrics", time.Second)
			defer stopBoth()
			const batch = 256
			off.calls(b, batch) // warm them up
			on.calls(b, batch)
			both.calls(b, batch)
			// Each iteration runs the three in another order, so that
			// what one leaves behind (a collection it made due, a scrape
			// in progress) does not always fall on the same one.
			daemons := []*benchDaemon{off, on, both}
			var cpuOf [3]int64
			calls := 0
			for i := 0; b.Loop(); i++ {
				for j := range daemons {
					k := (i + j) % len(daemons)
					c0 := processCPU()
					daemons[k].calls(b, batch)
					if daemons[k] == both {
						both.d.syncAudit() // its writer's work is the call's
					}
					cpuOf[k] += processCPU() - c0
				}
				calls += batch
			}
			offCPU, onCPU, bothCPU := cpuOf[0], cpuOf[1], cpuOf[2]
			b.ReportMetric(float64(offCPU)/float64(calls), "off-cpu-ns/call")
			b.ReportMetric(float64(onCPU)/float64(calls), "on-cpu-ns/call")
			b.ReportMetric(float64(bothCPU)/float64(calls), "audit-cpu-ns/call")
			b.ReportMetric(100*float64(onCPU-offCPU)/float64(offCPU), "overhead-%")
			b.ReportMetric(100*float64(bothCPU-offCPU)/float64(offCPU), "audit-overhead-%")
		})
	}
}

// benchDaemon is a daemon serving in the background and one session of
// its socket, initialized.
type benchDaemon struct {
	d    *Daemon
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	next int
	line []byte
}

func newBenchDaemon(b *testing.B, over map[string]any) *benchDaemon {
	b.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	cfg, err := loadConfig(dir, over)
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(cfg, Options{Logger: testLogger(), Catalog: demo})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- d.Run(ctx) }()
	<-d.Ready()
	c, err := net.Dial("unix", cfg.Daemon.Socket)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Close()
		cancel()
		if err := <-errc; err != nil {
			b.Errorf("Run: %v", err)
		}
	})
	bd := &benchDaemon{d: d, c: c, r: bufio.NewReaderSize(c, 1<<16), w: bufio.NewWriterSize(c, 1<<16), next: 2}
	fmt.Fprintf(bd.w, "%s\n%s\n", initLine, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	bd.w.Flush()
	if _, err := bd.r.ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	return bd
}

// calls makes n echo calls, 32 in flight.
func (bd *benchDaemon) calls(b *testing.B, n int) {
	const window = 32
	sent, got := 0, 0
	for got < n {
		for sent < n && sent-got < window {
			bd.line = strconv.AppendInt(append(bd.line[:0], `{"jsonrpc":"2.0","id":`...), int64(bd.next), 10)
			bd.line = append(bd.line, `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench"}}}`+"\n"...)
			bd.next++
			sent++
			if _, err := bd.w.Write(bd.line); err != nil {
				b.Fatal(err)
			}
		}
		if err := bd.w.Flush(); err != nil {
			b.Fatal(err)
		}
		s, err := bd.r.ReadString('\n')
		if err != nil || !strings.Contains(s, `"result"`) {
			b.Fatalf("answer %q: %v", s, err)
		}
		got++
	}
}

// processCPU is the process's CPU time so far (user and system), in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// scrapeEvery fetches url every period until stop is called, as a
// Prometheus would.
func scrapeEvery(url string, period time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if resp, err := http.Get(url); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	return func() { close(done); <-finished; http.DefaultClient.CloseIdleConnections() }
}
