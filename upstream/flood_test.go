package upstream

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/server"
)

// A hosted server flooding its client with requests (docs/upstreams.md §5:
// sampling, elicitation, roots, ping; fresh ids, as fast as it can)
// during one call, to a legacy client that declared those capabilities and
// never answers. Before, each request was a goroutine waiting without
// limit for one of the session's 16 client-request places, and the daemon
// grew without bound; now a session holds upstreams.max_server_requests of
// them (16 being relayed, on 16 goroutines, the rest waiting on none) and
// the rest are refused -32603 at once.

const floodFakes = `
[upstreams]
max_server_requests = %d

[mcpServers.fake]
command = "FAKE"

[mcpServers.other]
command = "FAKE"
`

// TestServerRequestFlood is the attack beside a healthy session.
func TestServerRequestFlood(t *testing.T) {
	h := newHarness(t, fmt.Sprintf(floodFakes, 32))
	attacker, neighbour := h.connect("", "", "2025-06-18"), h.connect("", "", "2025-06-18")
	attacker.neverAnswer()
	neighbour.call("tools/list", "") // both upstreams started
	before := runtime.NumGoroutine()
	var memBefore runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&memBefore)

	flood := attacker.start("1", "tools/call", fakeTool("fake__flood", `{"ms":1500}`))
	peak, answered := 0, 0
	var res map[string]json.RawMessage
	for res == nil {
		select {
		case res = <-flood:
		default:
			peak = max(peak, runtime.NumGoroutine())
			if held, _ := attacker.cl.requests.load(); held > 32 {
				t.Fatalf("the session holds %d of the upstream's requests, over upstreams.max_server_requests (32)", held)
			}
			// The healthy session is served meanwhile.
			if text(t, neighbour.call("tools/call", fakeTool("other__echo", `{"n":1}`))) == "" {
				t.Fatal("the neighbour's echo answered nothing")
			}
			answered++
		}
	}
	var counts struct{ Sent, Answered, Refused, Failed int }
	if err := json.Unmarshal(result(t, res)["structuredContent"], &counts); err != nil {
		t.Fatal(err)
	}
	t.Logf("the fake sent %d requests: %d answered, %d refused, %d failed; goroutines %d before, %d at most; the neighbour had %d answers",
		counts.Sent, counts.Answered, counts.Refused, counts.Failed, before, peak, answered)
	if counts.Sent < 1000 || counts.Refused == 0 {
		t.Errorf("the flood: %+v, want more than 1000 requests and refusals", counts)
	}
	// 16 relaying goroutines, the callers' own and some slack; before,
	// one per request.
	if peak-before > server.MaxClientRequests+50 {
		t.Errorf("goroutines went from %d to %d during the flood", before, peak)
	}
	if n := attacker.asked(); n > server.MaxClientRequests {
		t.Errorf("the client was sent %d requests, more than its %d places", n, server.MaxClientRequests)
	}
	if row := h.row("fake", ""); row.Refused == 0 {
		t.Errorf("status row %+v counts no refused request", row)
	}
	// The call has ended: what it held is let go.
	eventually.True(t, "the session's queue drained", func() bool {
		held, workers := attacker.cl.requests.load()
		return held == 0 && workers == 0
	})
	eventually.True(t, "the goroutines back", func() bool { return runtime.NumGoroutine() <= before+5 })
	var memAfter runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&memAfter)
	t.Logf("heap in use: %d KiB before, %d KiB after", memBefore.HeapInuse>>10, memAfter.HeapInuse>>10)
	if grown := int64(memAfter.HeapInuse) - int64(memBefore.HeapInuse); grown > 16<<20 {
		t.Errorf("the heap kept %d MiB after the flood", grown>>20)
	}
	if text(t, attacker.call("tools/call", fakeTool("fake__echo", `{"after":"the flood"}`))) == "" {
		t.Error("the flooding upstream does not serve after its flood")
	}
}

// TestServerRequestBound pins upstreams.max_server_requests at its exact
// boundary, for one session across two upstreams (each under its own
// instance's bound): with a bound of 4, the first 4 requests held, the
// 5th and 6th refused at once.
func TestServerRequestBound(t *testing.T) {
	t.Run("over", func(t *testing.T) {
		h := newHarness(t, fmt.Sprintf(floodFakes, 4))
		c := h.connect("", "", "2025-06-18")
		c.neverAnswer()
		c.call("tools/list", "")
		for i, name := range []string{"fake", "other"} {
			// Never answered: the two calls are cancelled below.
			c.start(fmt.Sprint(10+i), "tools/call", fakeTool(name+"__flood", `{"count":3,"methods":"sampling/createMessage","hold":true}`))
		}
		refused := func() int { return h.row("fake", "").Refused + h.row("other", "").Refused }
		eventually.True(t, "4 held and 2 refused", func() bool {
			held, _ := c.cl.requests.load()
			return held == 4 && refused() == 2
		})
		if n := c.asked(); n > 4 {
			t.Errorf("the client was asked %d times, over the bound", n)
		}
		for i := range 2 {
			c.send(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, 10+i))
		}
		eventually.True(t, "the queue drained", func() bool { held, workers := c.cl.requests.load(); return held == 0 && workers == 0 })
		if refused() != 2 {
			t.Errorf("refused %d, want exactly 2", refused())
		}
	})
	t.Run("at", func(t *testing.T) {
		h := newHarness(t, fmt.Sprintf(floodFakes, 4))
		c := h.connect("", "", "2025-06-18")
		c.neverAnswer()
		c.start("1", "tools/call", fakeTool("fake__flood", `{"count":4,"methods":"elicitation/create","hold":true}`))
		eventually.True(t, "4 held", func() bool { n, _ := c.cl.requests.load(); return n == 4 })
		if r := h.row("fake", "").Refused; r != 0 {
			t.Errorf("%d refused at the bound itself", r)
		}
		c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
		eventually.True(t, "the queue drained", func() bool { n, w := c.cl.requests.load(); return n == 0 && w == 0 })
	})
}

// The configuration's default is the Conn's: one bound, one number.
func TestMaxServerRequestsDefault(t *testing.T) {
	if got := loadConfig(t, "").Upstreams.MaxServerRequests; got != mcpclient.DefaultMaxServerRequests {
		t.Errorf("upstreams.max_server_requests defaults to %d, mcpclient.DefaultMaxServerRequests is %d", got, mcpclient.DefaultMaxServerRequests)
	}
}
