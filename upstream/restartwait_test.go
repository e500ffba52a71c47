package upstream

import (
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// TestCallRightAfterCrashWaitsForRestart: a call right after a crash waits
// for the restart (docs/upstreams.md §4). A tools/call that arrives while
// the instance is in backoff after a crash used to fail at once with "next
// attempt in 946 ms"; it now waits for the restart, then runs.
func TestCallRightAfterCrashWaitsForRestart(t *testing.T) {
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
restart = { initial_delay = "1s", max_delay = "1s" }
`)
	c := h.connect("", "", "2025-11-25")
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
	first := h.row("fake", "").PID
	if res := c.call("tools/call", fakeTool("fake__crash", "")); !isError(t, res) {
		t.Fatalf("crash answered %s", res["result"])
	}
	eventually.True(t, "backoff", func() bool { return h.row("fake", "").State == StateBackoff })
	res := c.call("tools/call", fakeTool("fake__echo", `{"after":"crash"}`))
	if isError(t, res) {
		t.Fatalf("a call in backoff failed instead of waiting for the restart: %s", text(t, res))
	}
	if args := string(structured(t, res)["arguments"]); args != `{"after":"crash"}` {
		t.Errorf("echo arguments %s", args)
	}
	if row := h.row("fake", ""); row.State != StateReady || row.PID == first || row.Restarts != 1 {
		t.Errorf("after the restart: %+v (first pid %d)", row, first)
	}
}

// TestCallInLongBackoffFailsAtOnce: a restart due later than the call's
// request_timeout is not waited for, and a failed server fails at once:
// the messages say when the next attempt is.
func TestCallInLongBackoffFailsAtOnce(t *testing.T) {
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
request_timeout = "1m"
restart = { initial_delay = "1h", max_delay = "1h", max_attempts = 2 }
`)
	c := h.connect("", "", "2025-11-25")
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
	if res := c.call("tools/call", fakeTool("fake__crash", "")); !isError(t, res) {
		t.Fatalf("crash answered %s", res["result"])
	}
	eventually.True(t, "backoff", func() bool { return h.row("fake", "").State == StateBackoff })
	res := c.call("tools/call", fakeTool("fake__echo", ""))
	if msg := text(t, res); !isError(t, res) || !strings.Contains(msg, "; next attempt in ") {
		t.Errorf("a call in a backoff longer than request_timeout: %s", msg)
	}
}

// TestManualRestartCounted: snodod upstream restart of a running instance
// is a restart: counted in Restarts, as a crash's is, and in
// ManualRestarts (it used to leave Restarts at 0, so the status and
// snodod_upstream_restarts_total counted crashes only).
func TestManualRestartCounted(t *testing.T) {
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
start = "eager"
restart = { initial_delay = "10ms", max_delay = "10ms" }
`)
	eventually.True(t, "eager start", func() bool { return h.row("fake", "").State == StateReady })
	first := h.row("fake", "").PID
	if err := h.m.Restart("fake"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "restarted", func() bool {
		r := h.row("fake", "")
		return r.State == StateReady && r.PID != 0 && r.PID != first
	})
	if r := h.row("fake", ""); r.Restarts != 1 || r.ManualRestarts != 1 {
		t.Fatalf("after snodod upstream restart: restarts %d, manual %d; want 1, 1", r.Restarts, r.ManualRestarts)
	}
	second := h.row("fake", "").PID
	c := h.connect("", "", "2025-11-25")
	if res := c.call("tools/call", fakeTool("fake__crash", "")); !isError(t, res) {
		t.Fatalf("crash answered %s", res["result"])
	}
	eventually.True(t, "restarted after the crash", func() bool {
		r := h.row("fake", "")
		return r.State == StateReady && r.PID != 0 && r.PID != second
	})
	if r := h.row("fake", ""); r.Restarts != 2 || r.ManualRestarts != 1 {
		t.Errorf("after a crash: restarts %d, manual %d; want 2, 1", r.Restarts, r.ManualRestarts)
	}
}
