package metrics

import (
	"testing"
	"time"

	"github.com/snodod/snodod/server"
)

// BenchmarkRequestEnded is what the metrics add to one request: a local
// tool's call, and a relayed one (two histograms).
func BenchmarkRequestEnded(b *testing.B) {
	m := newTestMetrics(newFixture())
	for _, bc := range []struct {
		name string
		e    server.RequestEnd
	}{
		{"local", server.RequestEnd{Method: "tools/call", Item: "echo", Duration: 20 * time.Microsecond}},
		{"relayed", server.RequestEnd{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Duration: 80 * time.Microsecond, UpstreamDuration: 60 * time.Microsecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m.RequestEnded(bc.e)
			}
		})
	}
}
