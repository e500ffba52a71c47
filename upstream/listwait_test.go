package upstream

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// One slow server never holds a list back (docs/upstreams.md §4,
// upstreams.list_wait): the list answers with what is ready or cached,
// and list_changed follows when the slow one arrives. The slow server is
// the fake behind a gate: a shell that waits for a file, then becomes the
// fake (exec: the same process), so the test decides when it is ready,
// and every assertion is one of order, never of time.

// gated is an mcpServers entry named name whose handshake waits until the
// file gate exists.
func gated(name, gate string) string {
	return `
[mcpServers.` + name + `]
command = "/bin/sh"
args = ["-c", "while [ ! -e '` + gate + `' ]; do sleep 0.01; done; exec FAKE -list-changed"]
`
}

// open lets a gated server through.
func open(t *testing.T, gate string) {
	t.Helper()
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestListDoesNotWaitForSlowServer pins a bug (docs/upstreams.md §4, "Slow
// starts"): a server added by a reload that never finishes its handshake
// made every aggregated list wait for the request's end (-32603 "Request
// execution timed out", no tools at all). Now the list answers at once with
// the others' items, for legacy and 2026 clients; status shows the starting
// process; and when the server arrives, both eras hear list_changed.
func TestListDoesNotWaitForSlowServer(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	const base = `
[upstreams]
list_wait = "50ms"
[mcpServers.good]
command = "FAKE"
`
	h := newHarness(t, base)
	legacy := h.connect("", "", "2025-11-25")
	// A call waits for good's start, however slow the machine: the first
	// list then finds it listed, rather than racing its start against the
	// 50 ms list_wait.
	result(t, legacy.call("tools/call", `{"name":"good__echo","arguments":{}}`))
	if tools := names(t, legacy.call("tools/list", ""), "tools", "name"); !slices.Contains(tools, "good__echo") {
		t.Fatalf("tools %v", tools)
	}
	modernClient := h.connect("", "", "")
	listen := modernClient.start(`"l"`, "subscriptions/listen", modern(`"notifications":{"toolsListChanged":true}`))
	eventually.True(t, "the listen acknowledged", func() bool {
		return len(modernClient.notifications("notifications/subscriptions/acknowledged")) == 1
	})

	h.m.Apply(loadConfig(t, base+gated("slow", gate)))
	for _, c := range []*client{legacy, modernClient} {
		params := ""
		if c == modernClient {
			params = modern("")
		}
		for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
			res := c.call(method, params)
			if res["error"] != nil {
				t.Fatalf("%s while slow starts: %s", method, res["error"])
			}
		}
		tools := names(t, c.call("tools/list", params), "tools", "name")
		if !slices.Contains(tools, "good__echo") || slices.Contains(tools, "slow__echo") {
			t.Errorf("tools while slow starts: %v", tools)
		}
	}
	row := h.row("slow", "")
	if row.State != StateStarting || row.PID == 0 || row.StartingSince.IsZero() {
		t.Fatalf("the slow server's row while it starts: %+v", row)
	}
	if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(row.PID) + "/cmdline"); !strings.Contains(string(cmd), "/bin/sh") {
		t.Errorf("status pid %d is %q, not the starting process", row.PID, cmd)
	}
	legacyBefore := len(legacy.notifications("notifications/tools/list_changed"))
	modernBefore := len(modernClient.notifications("notifications/tools/list_changed"))

	open(t, gate)
	eventually.True(t, "list_changed to the legacy client", func() bool {
		return len(legacy.notifications("notifications/tools/list_changed")) > legacyBefore
	})
	eventually.True(t, "list_changed on the 2026 listen stream", func() bool {
		return len(modernClient.notifications("notifications/tools/list_changed")) > modernBefore
	})
	for _, n := range modernClient.notifications("notifications/tools/list_changed") {
		if !strings.Contains(string(n["params"]), `"io.modelcontextprotocol/subscriptionId":"l"`) {
			t.Errorf("2026 list_changed outside its stream: %s", n["params"])
		}
	}
	if tools := names(t, legacy.call("tools/list", ""), "tools", "name"); !slices.Contains(tools, "slow__echo") {
		t.Errorf("tools once slow is ready: %v", tools)
	}
	eventually.True(t, "ready", func() bool { return h.row("slow", "").State == StateReady })
	if row := h.row("slow", ""); !row.StartingSince.IsZero() || row.PID == 0 {
		t.Errorf("the row once ready: %+v", row)
	}
	modernClient.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"l"}}`)
	_ = listen
}

// TestListWaitsForFastStart: a server that starts within list_wait is in
// the first list (no list_changed needed), as a fresh one usually is.
func TestListWaitsForFastStart(t *testing.T) {
	h := newHarness(t, `
[upstreams]
list_wait = "1m"
[mcpServers.fake]
command = "FAKE"
`)
	c := h.connect("", "", "2025-11-25")
	if tools := names(t, c.call("tools/list", ""), "tools", "name"); !slices.Contains(tools, "fake__echo") {
		t.Errorf("the first list lacks a server that started within list_wait: %v", tools)
	}
}

// TestPassThroughSlowInitialize: a pass-through client whose only server
// is slow gets its initialize answered (the view's placeholder identity,
// every capability, so that it listens for changes), an empty list, and
// list_changed once the server is ready; a later session sees the
// server's own identity.
func TestPassThroughSlowInitialize(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	h := newHarness(t, "[upstreams]\nlist_wait = \"50ms\"\n"+gated("slow", gate))
	c := h.connect("slow", "", "")
	r := result(t, c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if !strings.Contains(string(r["serverInfo"]), `"name":"slow"`) || !strings.Contains(string(r["capabilities"]), `"tools":{"listChanged":true}`) {
		t.Errorf("initialize while the server starts: %s", r)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if tools := names(t, c.call("tools/list", ""), "tools", "name"); len(tools) != 0 {
		t.Errorf("tools before the server is ready: %v", tools)
	}
	if st := h.row("slow", "").State; st != StateStarting {
		t.Fatalf("answered, but the server is %s: the test proves nothing", st)
	}
	open(t, gate)
	eventually.True(t, "list_changed", func() bool { return len(c.notifications("notifications/tools/list_changed")) > 0 })
	if tools := names(t, c.call("tools/list", ""), "tools", "name"); !slices.Contains(tools, "echo") {
		t.Errorf("tools once ready: %v", tools)
	}
	c2 := h.connect("slow", "", "")
	r = result(t, c2.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	if !strings.Contains(string(r["serverInfo"]), `"fakeupstream"`) {
		t.Errorf("initialize once ready: %s", r["serverInfo"])
	}
}

// TestRemovedWhileStarting pins a bug (docs/upstreams.md §4): a server
// removed by a reload while it is still starting is stopped at once, not
// when its start times out; one replaced (its command changed) too, its
// replacement starting at once; and one stopped by snodod upstream stop,
// which then stays stopped.
func TestRemovedWhileStarting(t *testing.T) {
	entry := func(name, seconds string) string {
		return "[mcpServers." + name + "]\ncommand = \"sleep\"\nargs = [\"" + seconds + "\"]\nstart = \"eager\"\nstart_timeout = \"10m\"\n"
	}
	h := newHarness(t, entry("hang", "1000")+entry("other", "1001"))
	hang, other := sleeper(t, "sleep 1000"), sleeper(t, "sleep 1001")
	h.m.Apply(loadConfig(t, entry("other", "1001")))
	eventually.True(t, "the removed server's process gone", func() bool { return !proctest.Alive(hang) })
	if !proctest.Alive(other) {
		t.Fatal("the reload stopped a server it kept")
	}

	h.m.Apply(loadConfig(t, entry("other", "1002")))
	eventually.True(t, "the replaced server's process gone", func() bool { return !proctest.Alive(other) })
	replacement := sleeper(t, "sleep 1002")

	if err := h.m.Stop("other"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "the stopped server's process gone", func() bool { return !proctest.Alive(replacement) })
	eventually.True(t, "stopped", func() bool { return h.row("other", "").State == StateStopped })
	if row := h.row("other", ""); row.Failures != 0 || row.PID != 0 {
		t.Errorf("a stop is no failure: %+v", row)
	}
}

// sleeper waits for the test's child running cmdline and returns its pid.
func sleeper(t *testing.T, cmdline string) int {
	t.Helper()
	pid := 0
	eventually.True(t, cmdline+" running", func() bool {
		for _, c := range proctest.Children() {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/cmdline"); strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ") == cmdline {
				pid = c
				return proctest.Alive(c)
			}
		}
		return false
	})
	return pid
}

// TestListWaitUntil pins list_wait's boundary with a controlled clock: a
// list waits for a first start younger than list_wait, until list_wait
// after its beginning, and never for a server whose starts failed.
func TestListWaitUntil(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const wait = 5 * time.Second
	for _, tc := range []struct {
		name     string
		state    State
		failures int
		began    time.Time
		until    time.Time
		ok       bool
	}{
		{"stopped: about to start", StateStopped, 0, time.Time{}, now.Add(wait), true},
		{"starting just now", StateStarting, 0, now, now.Add(wait), true},
		{"starting for list_wait less 1ns", StateStarting, 0, now.Add(-wait + 1), now.Add(1), true},
		{"starting for exactly list_wait", StateStarting, 0, now.Add(-wait), time.Time{}, false},
		{"starting for 78 s", StateStarting, 0, now.Add(-78 * time.Second), time.Time{}, false},
		{"a restart after a failed start", StateStarting, 1, now, time.Time{}, false},
		{"backoff", StateBackoff, 1, now.Add(-time.Second), time.Time{}, false},
		{"failed", StateFailed, 5, now.Add(-time.Hour), time.Time{}, false},
		{"ready", StateReady, 0, now, time.Time{}, false},
	} {
		until, ok := listWaitUntil(tc.state, tc.failures, tc.began, now, wait)
		if ok != tc.ok || ok && !until.Equal(tc.until) {
			t.Errorf("%s: listWaitUntil = %v, %v; want %v, %v", tc.name, until, ok, tc.until, tc.ok)
		}
	}
}

// TestListWaitDefault: the zero value means config's default, which is
// the one documented.
func TestListWaitDefault(t *testing.T) {
	if got := loadConfig(t, "").Upstreams.ListWait; got != defaultListWait {
		t.Errorf("config's default list_wait %v, the manager's %v", got, defaultListWait)
	}
	h := newHarness(t, "")
	h.m.limits.Store(&config.Upstreams{})
	if got := h.m.listWait(); got != defaultListWait {
		t.Errorf("zero list_wait means %v", got)
	}
}
