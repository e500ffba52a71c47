package upstream

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// TestShareSessionIsolation: each session has its own process; a third
// beyond max_instances is refused with -31002; a session's end stops its
// instance.
func TestShareSessionIsolation(t *testing.T) {
	h := newHarness(t, `
[mcpServers.browser]
command = "FAKE"
share = "session"
max_instances = 2
`)
	a, b := h.connect("", "", "2025-11-25"), h.connect("", "", "2025-11-25")
	result(t, a.call("tools/call", fakeTool("browser__echo", `{"who":"a"}`)))
	result(t, b.call("tools/call", fakeTool("browser__echo", `{"who":"b"}`)))
	for name, c := range map[string]*client{"a": a, "b": b} {
		calls := 0
		for _, r := range fakeHistoryOf(t, c, "browser__history").Requests {
			if r.Tool == "echo" {
				calls++
			}
		}
		if calls != 1 {
			t.Errorf("session %s's instance saw %d echo calls, want its own 1", name, calls)
		}
	}
	rows := h.m.Status()
	pids := map[int]bool{}
	for _, r := range rows {
		if r.Name == "browser" && r.PID != 0 {
			pids[r.PID] = true
		}
	}
	if len(pids) != 2 {
		t.Errorf("status %+v: want two processes", rows)
	}
	third := h.connect("", "", "2025-11-25")
	code, msg, _ := errorOf(t, third.call("tools/call", fakeTool("browser__echo", "")))
	if code != CodeLimit || !strings.Contains(msg, "max_instances = 2") {
		t.Errorf("third session: %d %s", code, msg)
	}
	a.release()
	eventually.True(t, "a's instance gone", func() bool {
		n := 0
		for _, r := range h.m.Status() {
			if r.Name == "browser" && r.State != StateStopped {
				n++
			}
		}
		return n == 1
	})
}

// TestShareCwd: one instance per distinct rendered configuration.
func TestShareCwd(t *testing.T) {
	h := newHarness(t, `
[mcpServers.git]
command = "FAKE"
args = ["-name", "${client.cwd}"]
share = "cwd"
`)
	d1, d2 := t.TempDir(), t.TempDir()
	a, b, c := h.connect("", d1, "2025-11-25"), h.connect("", d1, "2025-11-25"), h.connect("", d2, "2025-11-25")
	for _, cl := range []*client{a, b, c} {
		result(t, cl.call("tools/call", fakeTool("git__echo", "")))
	}
	labels := map[string]bool{}
	for _, r := range h.m.Status() {
		if r.Name == "git" && r.PID != 0 {
			labels[r.Instance] = true
		}
	}
	if len(labels) != 2 || !labels[d1] || !labels[d2] {
		t.Errorf("instances %v, want one per directory", labels)
	}
	// roots/list of a cwd instance without roots: the client's directory.
	res := structured(t, a.call("tools/call", fakeTool("git__roots", "")))
	if !strings.Contains(string(res["response"]), "file://"+d1) {
		t.Errorf("roots %s", res["response"])
	}
}

// TestShareCwdAfterReload: a session's cwd share key (kept on its client)
// follows a reload that changes the rendering: an older session and a new
// one in the same directory share the one instance of the new
// configuration.
func TestShareCwdAfterReload(t *testing.T) {
	const conf = `
[mcpServers.git]
command = "FAKE"
args = ["-name", "NAME ${client.cwd}"]
share = "cwd"
`
	h := newHarness(t, strings.ReplaceAll(conf, "NAME", "before"))
	d := t.TempDir()
	old := h.connect("", d, "2025-11-25")
	result(t, old.call("tools/call", fakeTool("git__echo", "")))
	h.m.Apply(loadConfig(t, strings.ReplaceAll(conf, "NAME", "after")))
	fresh := h.connect("", d, "2025-11-25")
	for _, cl := range []*client{old, fresh} {
		result(t, cl.call("tools/call", fakeTool("git__echo", "")))
	}
	var rows []Status
	for _, r := range h.m.Status() {
		if r.Name == "git" {
			rows = append(rows, r)
		}
	}
	if len(rows) != 1 || rows[0].Instance != d || rows[0].State != StateReady {
		t.Errorf("rows %+v, want one ready instance for %s", rows, d)
	}
}

// TestLegacyRelaySampling: a legacy upstream's sampling request reaches
// the one legacy session with a call in flight, which answers it.
func TestLegacyRelaySampling(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "2025-11-25")
	c.onRequest(func(method string, params json.RawMessage) (any, *protocol.Error) {
		if method != "sampling/createMessage" {
			return nil, &protocol.Error{Code: -32601, Message: method}
		}
		return map[string]any{"role": "assistant", "content": map[string]any{"type": "text", "text": "hi"}, "model": "m"}, nil
	})
	res := structured(t, c.call("tools/call", fakeTool("fake__sample", "")))
	if !strings.Contains(string(res["response"]), `"model":"m"`) {
		t.Errorf("sampling relayed: %s", res)
	}
	c.onRequest(func(method string, params json.RawMessage) (any, *protocol.Error) {
		return map[string]any{"action": "accept", "content": map[string]any{"name": "x"}}, nil
	})
	res = structured(t, c.call("tools/call", fakeTool("fake__elicit", "")))
	if !strings.Contains(string(res["response"]), `"accept"`) {
		t.Errorf("elicitation relayed: %s", res["response"])
	}
	c.mu.Lock()
	asked := slices.Clone(c.requests)
	c.mu.Unlock()
	if !slices.Equal(asked, []string{"sampling/createMessage", "elicitation/create"}) {
		t.Errorf("client asked %v", asked)
	}
}

// TestUnattributable: with two sessions in flight, an upstream's request
// cannot be attributed; it gets the exact -32603 and status counts it.
func TestUnattributable(t *testing.T) {
	h := newHarness(t, oneFake)
	a, b := h.connect("", "", "2025-11-25"), h.connect("", "", "2025-11-25")
	a.call("tools/list", "")
	slow := b.start("9", "tools/call", fakeTool("fake__slow", `{"ms":60000}`))
	eventually.True(t, "b in flight", func() bool { return h.row("fake", "").InFlight == 1 })
	res := structured(t, a.call("tools/call", fakeTool("fake__elicit", "")))
	want := `snodod: cannot attribute elicitation/create: 2 sessions have requests in flight on fake; set share = \"session\"`
	if !strings.Contains(string(res["error"]), want) {
		t.Errorf("error %s, want %s", res["error"], want)
	}
	if row := h.row("fake", ""); row.Unattributed != 1 {
		t.Errorf("unattributed %d", row.Unattributed)
	}
	b.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}`)
	_ = slow
}

// TestSlowStart: a client that gives up does not stop the start; the next
// call is fast (docs/upstreams.md §4).
func TestSlowStart(t *testing.T) {
	h := newHarness(t, `
[mcpServers.slow]
command = "FAKE"
args = ["-start-delay", "1s"]
`)
	c := h.connect("", "", "2025-11-25")
	c.start("1", "tools/call", strings.Replace(fakeTool("slow__echo", ""), `{"name"`, `{"_meta":{"progressToken":"p"},"name"`, 1))
	eventually.True(t, "starting", func() bool { return h.row("slow", "").State == StateStarting })
	c.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	eventually.True(t, "ready", func() bool { return h.row("slow", "").State == StateReady })
	if notes := c.notifications("notifications/progress"); len(notes) == 0 || !strings.Contains(string(notes[0]["params"]), `"starting slow"`) {
		t.Errorf("progress while starting: %v", notes)
	}
	result(t, c.call("tools/call", fakeTool("slow__echo", "")))
}

// TestCatalogCache: a second daemon lists from the cache without starting
// the upstream; a call then starts it.
func TestCatalogCache(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, oneFake, dir)
	c := h.connect("", "", "2025-11-25")
	want := names(t, c.call("tools/list", ""), "tools", "name")
	h.stop()
	files, _ := os.ReadDir(dir + "/upstreams")
	found := false
	for _, f := range files {
		found = found || strings.HasPrefix(f.Name(), "fake-") && strings.HasSuffix(f.Name(), ".json")
	}
	if !found {
		t.Fatalf("no cache file in %v", files)
	}
	h2 := newHarness(t, oneFake, dir)
	c2 := h2.connect("", "", "2025-11-25")
	if got := names(t, c2.call("tools/list", ""), "tools", "name"); !slices.Equal(got, want) {
		t.Errorf("cached list %v, want %v", got, want)
	}
	if row := h2.row("fake", ""); row.State != StateStopped || !row.Cached {
		t.Errorf("listing from the cache started it: %+v", row)
	}
	result(t, c2.call("tools/call", fakeTool("fake__echo", "")))
}

// TestCatalogCacheReplaced: the cache file of a fingerprint a reload
// replaced is removed once the new one is written, and re-listings keep
// the one file.
func TestCatalogCacheReplaced(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, oneFake, dir)
	c := h.connect("", "", "2025-11-25")
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
	cacheFiles := func() []string {
		files, _ := filepath.Glob(filepath.Join(dir, "upstreams", "fake-*.json"))
		return files
	}
	before := cacheFiles()
	if len(before) != 1 {
		t.Fatalf("cache files %v, want one", before)
	}
	h.m.Apply(loadConfig(t, strings.Replace(oneFake, `"-list-changed"`, `"-list-changed", "-name", "replaced"`, 1)))
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
	eventually.True(t, "the replaced fingerprint's file removed", func() bool {
		after := cacheFiles()
		return len(after) == 1 && after[0] != before[0]
	})
	u := h.m.upstream("fake")
	u.listed(u.currentCatalog()) // a re-listing
	if after := cacheFiles(); len(after) != 1 || after[0] == before[0] {
		t.Errorf("cache files after a re-listing %v, want one, not %s", after, before[0])
	}
}

// TestURICollision: the first upstream in name order keeps a URI; the
// second's is not listed and status reports it.
func TestURICollision(t *testing.T) {
	h := newHarness(t, `
[mcpServers.a]
command = "FAKE"
args = ["-name", "first"]
[mcpServers.b]
command = "FAKE"
args = ["-name", "second"]
`)
	c := h.connect("", "", "2025-11-25")
	if got := names(t, c.call("resources/list", ""), "resources", "uri"); !slices.Equal(got, []string{"fake://res/001"}) {
		t.Errorf("resources %v", got)
	}
	if row := h.row("b", ""); !slices.Contains(row.Collided, "resource fake://res/001 (taken by mcpServers.a)") {
		t.Errorf("collided %v", row.Collided)
	}
	tools := names(t, c.call("tools/list", ""), "tools", "name")
	if !slices.Contains(tools, "a__echo") || !slices.Contains(tools, "b__echo") {
		t.Errorf("tools %v", tools)
	}
}

// A request of a session that ended while it was on its way starts no
// instance of its own: its caller, no longer open, is a closed client.
func TestReleasedCallerStartsNothing(t *testing.T) {
	h := newHarness(t, `
[mcpServers.browser]
command = "FAKE"
share = "session"
`)
	caller := &server.Caller{Session: 41}
	release, err := h.m.Open(caller)
	if err != nil {
		t.Fatal(err)
	}
	if c := h.m.clientOf(caller); c == nil || c.isClosed() {
		t.Fatalf("an open caller's client: %+v", c)
	}
	release()
	c := h.m.clientOf(caller)
	if c == nil || !c.isClosed() {
		t.Fatalf("a released caller's client: %+v, want a closed one", c)
	}
	if _, err := h.m.upstream("browser").instanceFor(c); !errors.Is(err, errStopped) {
		t.Fatalf("an instance for a released caller: %v, want errStopped", err)
	}
	for _, r := range h.m.Status() {
		if r.Instance == sessionInstanceKey(41) {
			t.Errorf("status has an instance of the released session: %+v", r)
		}
	}
}
