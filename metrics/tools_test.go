package metrics

import (
	"testing"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Tools counts each tool's calls and errors and interpolates its
// latency quantiles in the classic buckets; other methods are left out.
func TestTools(t *testing.T) {
	m := New(Options{})
	for i := 0; i < 98; i++ {
		m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "echo", Duration: 3 * time.Millisecond})
	}
	m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "echo", Duration: 3 * time.Millisecond, Err: &protocol.Error{Code: -32602}})
	m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "echo", Duration: 20 * time.Second, TimedOut: true})
	m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Duration: time.Millisecond, UpstreamDuration: time.Millisecond})
	m.RequestEnded(server.RequestEnd{Method: "prompts/get", Item: "greet", Duration: time.Millisecond})
	got := m.Tools()
	if len(got) != 2 || got[0].Tool != "echo" || got[1].Tool != "mem__read" {
		t.Fatalf("tools: %+v", got)
	}
	echo := got[0]
	if echo.Calls != 100 || echo.Errors != 2 {
		t.Errorf("echo: %d calls, %d errors; want 100 and 2", echo.Calls, echo.Errors)
	}
	// 99 of 100 in (2.5 ms, 5 ms], one in (10 s, 30 s].
	if echo.P50 <= 2500*time.Microsecond || echo.P50 > 5*time.Millisecond {
		t.Errorf("echo p50 %v, want in (2.5ms, 5ms]", echo.P50)
	}
	if echo.P99 <= 2500*time.Microsecond || echo.P99 > 5*time.Millisecond {
		t.Errorf("echo p99 %v, want in (2.5ms, 5ms]", echo.P99)
	}
	if want := (99*3*time.Millisecond + 20*time.Second) / 100; echo.Mean < want-time.Millisecond || echo.Mean > want+time.Millisecond {
		t.Errorf("echo mean %v, want %v", echo.Mean, want)
	}
	if got[1].Calls != 1 || got[1].P99 <= 500*time.Microsecond || got[1].P99 > time.Millisecond {
		t.Errorf("mem__read: %+v", got[1])
	}
}
