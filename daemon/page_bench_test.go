package daemon

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkCallLatencyViewers measures one echo tools/call at a time on
// a session of the socket of two daemons side by side, both with the
// admin listener: one with no viewer of the status page, one with 100
// open viewers of /events, each reading every snapshot (one a second).
// Each iteration is ten rounds of one second of calls on each daemon in
// turn, so that both see the same machine; it reports each one's p50,
// p99 and p99.9 (docs/observability.md, "Status page": the goal is that
// 100 viewers do not touch MCP latency). The viewers read in this
// process, so they compete with the daemons for the same cores.
func BenchmarkCallLatencyViewers(b *testing.B) {
	const viewers, rounds = 100, 10
	idle := newBenchDaemon(b, map[string]any{"admin.listen": "127.0.0.1:0"})
	watched := newBenchDaemon(b, map[string]any{"admin.listen": "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan struct{}, viewers*64)
	for range viewers {
		openViewer(b, ctx, "http://"+watched.d.adminAddr()+"/events", got)
	}
	for range viewers { // each has its first snapshot
		<-got
	}
	idle.calls(b, 256) // warm both up
	watched.calls(b, 256)
	var off, on []time.Duration
	for b.Loop() {
		for range rounds {
			off = idle.timedCalls(b, time.Second, off)
			on = watched.timedCalls(b, time.Second, on)
		}
	}
	for _, r := range []struct {
		name string
		lat  []time.Duration
	}{{"0-viewers", off}, {"100-viewers", on}} {
		slices.Sort(r.lat)
		b.ReportMetric(float64(r.lat[len(r.lat)/2].Nanoseconds())/1e3, r.name+"-p50-µs")
		b.ReportMetric(float64(r.lat[len(r.lat)*99/100].Nanoseconds())/1e3, r.name+"-p99-µs")
		b.ReportMetric(float64(r.lat[len(r.lat)*999/1000].Nanoseconds())/1e3, r.name+"-p99.9-µs")
	}
	if pg := watched.d.admin.page; pg.Viewers() != viewers || pg.Dropped() != 0 {
		b.Errorf("%d viewers at the end, %d dropped; want %d and none", pg.Viewers(), pg.Dropped(), viewers)
	}
	if n := len(got); n < viewers {
		b.Errorf("the viewers got %d snapshots in all, want at least one each", n)
	}
}

// timedCalls makes echo calls one at a time for d, appending each one's
// latency to lat.
func (bd *benchDaemon) timedCalls(b *testing.B, d time.Duration, lat []time.Duration) []time.Duration {
	for end := time.Now().Add(d); time.Now().Before(end); {
		t0 := time.Now()
		bd.calls(b, 1)
		lat = append(lat, time.Since(t0))
	}
	return lat
}

// openViewer reads url's event stream until ctx ends, telling got of
// each event (while got has room).
func openViewer(b *testing.B, ctx context.Context, url string, got chan<- struct{}) {
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("viewer: %v %v", resp, err)
	}
	go func() {
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(line, "id: ") {
				select {
				case got <- struct{}{}:
				default:
				}
			}
		}
	}()
}
