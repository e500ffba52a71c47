package upstream

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// TestReload pins the fingerprint rules of docs/upstreams.md §4.
func TestReload(t *testing.T) {
	base := `
[mcpServers.keep]
command = "FAKE"
[mcpServers.view]
command = "FAKE"
[mcpServers.change]
command = "FAKE"
[mcpServers.gone]
command = "FAKE"
`
	h := newHarness(t, base)
	c := h.connect("", "", "2025-11-25")
	for _, n := range []string{"keep", "view", "change", "gone"} {
		result(t, c.call("tools/call", fakeTool(n+"__echo", "")))
	}
	pid := func(name string) int { return h.row(name, "").PID }
	before := map[string]int{"keep": pid("keep"), "view": pid("view"), "change": pid("change"), "gone": pid("gone")}
	h.m.Apply(loadConfig(t, `
[mcpServers.keep]
command = "FAKE"
[mcpServers.view]
command = "FAKE"
prefix = "v2"
tools = { exclude = ["crash"] }
[mcpServers.change]
command = "FAKE"
args = ["-name", "changed"]
`))
	if pid("keep") != before["keep"] || pid("view") != before["view"] {
		t.Errorf("unchanged or view-only upstreams restarted: %v → keep %d view %d", before, pid("keep"), pid("view"))
	}
	tools := names(t, c.call("tools/list", ""), "tools", "name")
	if !slices.Contains(tools, "v2__echo") || slices.Contains(tools, "v2__crash") || slices.Contains(tools, "view__echo") || slices.Contains(tools, "gone__echo") {
		t.Errorf("tools after reload %v", tools)
	}
	if len(c.notifications("notifications/tools/list_changed")) == 0 {
		t.Error("no list_changed after the reload")
	}
	eventually.True(t, "the changed upstream restarted", func() bool {
		r := h.row("change", "")
		return r.State == StateReady && r.PID != before["change"]
	})
	eventually.True(t, "the removed upstream's process gone", func() bool {
		return syscall.Kill(before["gone"], 0) != nil
	})
	if slices.Contains(h.m.Names(), "gone") {
		t.Errorf("names %v", h.m.Names())
	}
}

// TestReloadWhileRestarting is a regression test: Apply replaced the
// upstreams limits in place while an instance restarting on its own (a
// backoff timer, no request) read upstreams.max_children, a data race that
// -race reported.
func TestReloadWhileRestarting(t *testing.T) {
	const conf = `
[upstreams]
max_children = MAX
[mcpServers.bad]
command = "FAKE"
args = ["-exit-at-start", "1"]
start = "eager"
restart = { initial_delay = "1ms", max_delay = "5ms", max_attempts = 1000 }
`
	h := newHarness(t, strings.ReplaceAll(conf, "MAX", "8"))
	for i := range 10 {
		before := h.row("bad", "").Failures
		h.m.Apply(loadConfig(t, strings.ReplaceAll(conf, "MAX", strconv.Itoa(8+i%2))))
		eventually.True(t, "a restart after the reload", func() bool { return h.row("bad", "").Failures > before })
	}
}

// TestIdleStop: an instance nothing uses stops, and starts again on demand.
func TestIdleStop(t *testing.T) {
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
idle_timeout = "100ms"
`)
	c := h.connect("", "", "2025-11-25")
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
	eventually.True(t, "idle stop", func() bool { return h.row("fake", "").State == StateStopped })
	if got := names(t, c.call("tools/list", ""), "tools", "name"); !slices.Contains(got, "fake__echo") {
		t.Errorf("a stopped upstream is no longer listed: %v", got)
	}
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
}

// TestManualAndControl: start = "manual" answers until started; stop and
// restart act on one upstream only.
func TestManualAndControl(t *testing.T) {
	h := newHarness(t, `
[mcpServers.man]
command = "FAKE"
start = "manual"
[mcpServers.other]
command = "FAKE"
start = "eager"
`)
	eventually.True(t, "eager start", func() bool { return h.row("other", "").State == StateReady })
	c := h.connect("man", "", "2025-11-25")
	code, msg, _ := errorOf(t, c.call("prompts/get", `{"name":"prompt-001"}`))
	if code != CodeUnavailable || !strings.Contains(msg, "run snodod upstream start man") {
		t.Errorf("manual: %d %s", code, msg)
	}
	if err := h.m.Start("man"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "started", func() bool { return h.row("man", "").State == StateReady })
	other := h.row("other", "").PID
	if err := h.m.Restart("man"); err != nil {
		t.Fatal(err)
	}
	if err := h.m.Stop("man"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "stopped", func() bool { return h.row("man", "").State == StateStopped })
	if h.row("other", "").PID != other {
		t.Error("controlling one upstream touched another")
	}
	if err := h.m.Start("nope"); err == nil || !strings.Contains(err.Error(), "the configured upstreams are man, other") {
		t.Errorf("unknown name: %v", err)
	}
}

// TestDisabled: listed nowhere, answered with the reason.
func TestDisabled(t *testing.T) {
	h := newHarness(t, `
[mcpServers.off]
command = "FAKE"
disabled = true
`)
	if row := h.row("off", ""); row.State != StateDisabled {
		t.Errorf("state %s", row.State)
	}
	c := h.connect("off", "", "2025-11-25")
	code, msg, _ := errorOf(t, c.call("resources/read", `{"uri":"fake://res/001"}`))
	if code != CodeUnavailable || !strings.Contains(msg, "disabled") {
		t.Errorf("%d %s", code, msg)
	}
}

// TestMaxChildren: a start beyond upstreams.max_children gets -31002.
func TestMaxChildren(t *testing.T) {
	h := newHarness(t, `
[upstreams]
max_children = 1
[mcpServers.a]
command = "FAKE"
[mcpServers.b]
command = "FAKE"
`)
	c := h.connect("", "", "2025-11-25")
	result(t, c.call("tools/call", fakeTool("a__echo", "")))
	p := h.connect("b", "", "2025-11-25")
	code, msg, _ := errorOf(t, p.call("prompts/get", `{"name":"prompt-001"}`))
	if code != CodeLimit || !strings.Contains(msg, "upstreams.max_children = 1") {
		t.Errorf("%d %s", code, msg)
	}
}

// TestQueueFull: beyond max_in_flight and max_queued, -31003 at once.
func TestQueueFull(t *testing.T) {
	h := newHarness(t, `
[upstreams]
max_in_flight = 1
max_queued = 1
[mcpServers.fake]
command = "FAKE"
`)
	c := h.connect("", "", "2025-11-25")
	c.call("tools/list", "")
	c.start("1", "tools/call", fakeTool("fake__slow", `{"ms":60000}`))
	c.start("2", "tools/call", fakeTool("fake__slow", `{"ms":60000}`))
	eventually.True(t, "one in flight, one queued", func() bool {
		r := h.row("fake", "")
		return r.InFlight == 1 && r.Queued == 1
	})
	code, msg, _ := errorOf(t, c.call("tools/call", fakeTool("fake__echo", "")))
	if code != CodeOverloaded || !strings.Contains(msg, "1 requests in flight and 1 queued") {
		t.Errorf("%d %s", code, msg)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
}

// TestRequestTimeout: request_timeout cancels and answers the client.
func TestRequestTimeout(t *testing.T) {
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
request_timeout = "200ms"
`)
	c := h.connect("", "", "2025-11-25")
	res := c.call("tools/call", fakeTool("fake__never", ""))
	if !isError(t, res) || text(t, res) != `snodod: upstream "fake" did not answer within 200ms; the call was cancelled` {
		t.Errorf("%s", res["result"])
	}
}

// TestGrandchildStopped: shutdown stops the whole group, a grandchild
// that ignores SIGTERM included (proctest checks none is left).
func TestGrandchildStopped(t *testing.T) {
	pidfile := t.TempDir() + "/gc.pid"
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
args = ["-grandchild", "`+pidfile+`"]
start = "eager"
`)
	eventually.True(t, "ready", func() bool { return h.row("fake", "").State == StateReady })
	eventually.True(t, "the grandchild's pid", func() bool { b, err := os.ReadFile(pidfile); return err == nil && len(b) > 0 })
	h.stop()
}
