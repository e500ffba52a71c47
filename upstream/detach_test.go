package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// TestRelayedCallsGiveSlotsBack is the boundary of docs/transport.md §13.7:
// max_concurrency relayed calls that only wait on their upstream, and one
// more (queued in the instance's gate), leave every executor slot free, so
// a request of the daemon's own catalog is answered while they all wait.
func TestRelayedCallsGiveSlotsBack(t *testing.T) {
	h := newHarness(t, oneFake)
	h.agg.AddTool(&server.Tool{Name: "fast", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return &server.CallToolResult{Content: []server.Content{server.TextContent("fast")}}, nil
		})
	c := h.connect("", "", "2025-11-25")
	c.call("tools/list", "")
	slow := h.exec.Limits().MaxConcurrency + 1
	cancelSlow := func() {
		for i := range slow {
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow-%d"}}`, i))
		}
	}
	t.Cleanup(cancelSlow) // also when the test fails: the session ends only once they have
	for i := range slow {
		c.start(fmt.Sprintf(`"slow-%d"`, i), "tools/call", fakeTool("fake__never", ""))
	}
	eventually.True(t, "32 calls in flight on the upstream and one queued", func() bool {
		r := h.row("fake", "")
		return r.InFlight == slow-1 && r.Queued == 1
	})
	if s := h.exec.Stats(); s.Running != 0 || s.Detached != slow {
		t.Errorf("executor %+v, want nothing running and %d detached", s, slow)
	}
	if got := text(t, c.call("tools/call", fakeTool("fast", ""))); got != "fast" {
		t.Errorf("fast call: %q", got)
	}
	cancelSlow()
	eventually.True(t, "the cancelled calls gone", func() bool {
		r := h.row("fake", "")
		return r.InFlight == 0 && r.Queued == 0 && h.exec.Stats() == executor.Stats{}
	})
}
