package daemon

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkCallLatencyViewers measures one echo tools/call at a time on
// a session of the socket, for five seconds (five ticks of the status
// page's producer), with 0 and with 100 open viewers of /events on the
// admin listener, each reading every snapshot; it reports the calls'
// p50, p99 and p99.9 (docs/observability.md, "Status page": the goal is that
// 100 viewers do not touch MCP latency). The viewers read in this
// process, so they compete with the daemon for the same cores.
func BenchmarkCallLatencyViewers(b *testing.B) {
	for _, viewers := range []int{0, 100} {
		b.Run("viewers="+strconv.Itoa(viewers), func(b *testing.B) {
			bd := newBenchDaemon(b, map[string]any{"admin.listen": "127.0.0.1:0"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			got := make(chan struct{}, viewers*64)
			for range viewers {
				openViewer(b, ctx, "http://"+bd.d.adminAddr()+"/events", got)
			}
			for range viewers { // each has its first snapshot
				<-got
			}
			bd.calls(b, 256) // warm up
			var lat []time.Duration
			for b.Loop() {
				lat = lat[:0]
				for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
					t0 := time.Now()
					bd.calls(b, 1)
					lat = append(lat, time.Since(t0))
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)*999/1000].Microseconds()), "p99.9-µs")
			b.ReportMetric(float64(len(lat)), "calls")
			if pg := bd.d.admin.page; viewers > 0 && (pg.Viewers() != viewers || pg.Dropped() != 0) {
				b.Errorf("%d viewers at the end, %d dropped; want %d and none", pg.Viewers(), pg.Dropped(), viewers)
			}
		})
	}
}

// openViewer reads url's event stream until ctx ends, telling got of
// each event.
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
