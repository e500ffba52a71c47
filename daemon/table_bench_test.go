package daemon

import (
	"bufio"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// BenchmarkAcceptToFirstAnswer is the session table's path: 1,000 clients
// of the session socket, one after another, each from its dial to the
// answer of its initialize, all kept open so that the table holds 1,000
// sessions at the end; then all leave and the table empties. It reports
// the time per session (ns/session).
func BenchmarkAcceptToFirstAnswer(b *testing.B) {
	const sessions = 1000
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg, err := loadConfig(dir, map[string]any{"daemon.max_sessions": sessions, "daemon.max_sessions_per_uid": sessions})
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
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			b.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-d.Ready():
	case err := <-errc:
		errc <- err
		b.Fatalf("Run: %v", err)
	}
	init := []byte(initLine + "\n")
	conns := make([]net.Conn, 0, sessions)
	b.ReportAllocs()
	var elapsed time.Duration
	for b.Loop() {
		start := time.Now()
		for range sessions {
			c, err := net.Dial("unix", cfg.Daemon.Socket)
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, c)
			if _, err := c.Write(init); err != nil {
				b.Fatal(err)
			}
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,"result":`) {
				b.Fatalf("initialize: %q, %v", line, err)
			}
		}
		elapsed += time.Since(start)
		b.StopTimer()
		for _, c := range conns {
			c.Close()
		}
		conns = conns[:0]
		if !eventually.Within(time.Minute, func() bool { return d.count() == 0 }) {
			b.Fatalf("%d sessions left after their clients closed", d.count())
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*sessions), "ns/session")
}
