package upstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// Health pings (docs/upstreams.md §4): a ping every ping_interval while nothing
// is in flight; any answer, even -32601, is alive; 3 consecutive
// timeouts kill the process, which is then restarted. The interval is the
// configuration's; the 10 s timeout is shortened through the Manager
// (pingWait), so the test takes milliseconds, not 30 s.

func pingHarness(t *testing.T, mode string) *harness {
	t.Helper()
	h := newHarness(t, fmt.Sprintf(`
[mcpServers.fake]
command = "FAKE"
args = ["-pings", %q]
ping_interval = "20ms"
restart = { initial_delay = "10ms", max_delay = "200ms" }
`, mode))
	h.m.pingWait.Store(int64(50 * time.Millisecond))
	return h
}

// pingsSeen asks the fake how many pings it received.
func pingsSeen(t *testing.T, c *client) int {
	t.Helper()
	var history struct {
		Requests []struct{ Method string } `json:"requests"`
	}
	raw := structured(t, c.call("tools/call", fakeTool("fake__history", "")))
	b, _ := json.Marshal(raw)
	if err := json.Unmarshal(b, &history); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range history.Requests {
		if r.Method == "ping" {
			n++
		}
	}
	return n
}

func TestHealthPingsKillUnresponsive(t *testing.T) {
	h := pingHarness(t, "ignore")
	c := h.connect("", "", "2025-11-25")
	c.call("tools/call", fakeTool("fake__echo", ""))
	first := h.row("fake", "")
	if first.PID == 0 || first.Restarts != 0 {
		t.Fatalf("first process: %+v", first)
	}
	eventually.True(t, "the unresponsive process killed and restarted", func() bool {
		r := h.row("fake", "")
		return r.Restarts >= 1 && r.PID != 0 && r.PID != first.PID
	})
	logs := h.logs.String()
	for _, want := range []string{"missed=1", "missed=2", "missed=3", "upstream unresponsive: killing it"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// A ping answered with an error is alive, as a ping answered {} is.
func TestHealthPingsAnsweredAreAlive(t *testing.T) {
	for _, mode := range []string{"answer", "error"} {
		t.Run(mode, func(t *testing.T) {
			h := pingHarness(t, mode)
			c := h.connect("", "", "2025-11-25")
			c.call("tools/call", fakeTool("fake__echo", ""))
			pid := h.row("fake", "").PID
			// Twice the pings that would kill an unresponsive process.
			for seen := 0; seen < 2*pingFailures; seen = pingsSeen(t, c) {
				time.Sleep(50 * time.Millisecond)
			}
			if r := h.row("fake", ""); r.PID != pid || r.Restarts != 0 {
				t.Errorf("a process answering pings was restarted: %+v", r)
			}
		})
	}
}

// No ping is sent while a call is in flight: a server busy with a long
// call is not killed, however long it takes to answer.
func TestHealthPingsWaitForCalls(t *testing.T) {
	h := pingHarness(t, "ignore")
	c := h.connect("", "", "2025-11-25")
	// Six times what three missed pings take.
	res := c.call("tools/call", fakeTool("fake__slow", `{"ms":900}`))
	if isError(t, res) {
		t.Fatalf("the slow call failed: %s", res["result"])
	}
	if r := h.row("fake", ""); r.Restarts != 0 {
		t.Errorf("killed during a call: %+v", r)
	}
}
