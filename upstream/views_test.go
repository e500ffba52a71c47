package upstream

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/server"
)

const oneFake = `
[mcpServers.fake]
command = "FAKE"
args = ["-instructions", "Use the fake.", "-list-changed"]
restart = { initial_delay = "10ms", max_delay = "200ms" }
`

func TestAggregatedView(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "2025-11-25")
	tools := names(t, c.call("tools/list", ""), "tools", "name")
	for _, want := range []string{"fake__echo", "fake__slow", "fake__crash"} {
		if !slices.Contains(tools, want) {
			t.Errorf("tools %v lack %s", tools, want)
		}
	}
	if !slices.IsSorted(tools) {
		t.Errorf("tools not sorted: %v", tools)
	}
	if got := names(t, c.call("prompts/list", ""), "prompts", "name"); !slices.Equal(got, []string{"fake__prompt-001"}) {
		t.Errorf("prompts %v", got)
	}
	if got := names(t, c.call("resources/list", ""), "resources", "uri"); !slices.Equal(got, []string{"fake://res/001"}) {
		t.Errorf("resource URIs must not be rewritten: %v", got)
	}
	res := c.call("tools/call", fakeTool("fake__echo", `{"x":1}`))
	if args := string(structured(t, res)["arguments"]); args != `{"x":1}` {
		t.Errorf("echo arguments %s", args)
	}
	if read := c.call("resources/read", `{"uri":"fake://res/001"}`); read["error"] != nil {
		t.Errorf("read: %s", read["error"])
	}
	if p := c.call("prompts/get", `{"name":"fake__prompt-001"}`); p["error"] != nil {
		t.Errorf("prompts/get: %s", p["error"])
	}
	// A second session initializes on its own; the upstream saw one
	// initialize, from snodod, and no client's.
	c2 := h.connect("", "", "2025-06-18")
	c2.call("tools/call", fakeTool("fake__echo", "{}"))
	var hist struct {
		Requests []struct {
			Method string `json:"method"`
		} `json:"requests"`
	}
	_ = json.Unmarshal(result(t, c.call("tools/call", fakeTool("fake__history", "")))["structuredContent"], &hist)
	n := 0
	for _, r := range hist.Requests {
		if r.Method == "initialize" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the upstream saw %d initialize requests, want 1: %+v", n, hist.Requests)
	}
	if row := h.row("fake", ""); row.State != StateReady || row.PID == 0 || row.Era != mcpclient.EraLegacy {
		t.Errorf("status %+v", row)
	}
}

func TestPassThroughView(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("fake", "", "")
	// The first initialize of a never-listed upstream waits for its start:
	// the client sees the upstream's identity.
	init := c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	r := result(t, init)
	if !strings.Contains(string(r["serverInfo"]), `"fakeupstream"`) || !strings.Contains(string(r["instructions"]), "Use the fake.") {
		t.Errorf("initialize %s", init["result"])
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	tools := names(t, c.call("tools/list", ""), "tools", "name")
	if !slices.Contains(tools, "echo") || slices.Contains(tools, "fake__echo") {
		t.Errorf("pass-through tools %v", tools)
	}
	if res := c.call("tools/call", fakeTool("echo", `{"y":2}`)); string(structured(t, res)["arguments"]) != `{"y":2}` {
		t.Errorf("echo %s", res["result"])
	}
	if _, err := h.m.Open(&server.Caller{Session: 99, View: "nope"}); err == nil || !strings.Contains(err.Error(), "the configured upstreams are fake") {
		t.Errorf("unknown view: %v", err)
	}
}

func TestAggregatedInstructions(t *testing.T) {
	h := newHarness(t, oneFake)
	c := h.connect("", "", "2025-11-25")
	c.call("tools/list", "")
	c2 := h.connect("", "", "")
	r := result(t, c2.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
	var instr string
	_ = json.Unmarshal(r["instructions"], &instr)
	if instr != "snodod's own\n\n## fake\n\nUse the fake." {
		t.Errorf("instructions %q", instr)
	}
}

func TestComposeName(t *testing.T) {
	if got := composeName("gh", "search"); got != "gh__search" {
		t.Errorf("short name %q", got)
	}
	long := strings.Repeat("x", 70)
	got := composeName("gh", long)
	if len(got) != 64 || !strings.HasPrefix(got, ("gh__" + long)[:55]+"_") || got != composeName("gh", long) {
		t.Errorf("shortened %q (%d)", got, len(got))
	}
	if composeName("gh", long+"y") == got {
		t.Error("two long names shorten to one")
	}
	exact := strings.Repeat("a", 60)
	if got := composeName("gh", exact); got != "gh__"+exact {
		t.Errorf("a 64-character name is shortened: %q", got)
	}
}
