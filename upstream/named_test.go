package upstream

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

const twoFakesAndAView = `
[mcpServers.a]
command = "FAKE"
[mcpServers.b]
command = "FAKE"
[views.v]
servers = ["a"]
tools = { exclude = ["a__crash"] }
rename = { "a__echo" = "say" }
`

// TestNamedViewListChanged: a named view announces list_changed when its
// own listing changes, and not when a server outside it changes; the
// aggregated view hears both. The view's instance is the aggregated
// view's.
func TestNamedViewListChanged(t *testing.T) {
	h := newHarness(t, twoFakesAndAView)
	agg := h.connect("", "", "2025-11-25")
	view := h.connect("@v", "", "2025-11-25")
	tools := names(t, view.call("tools/list", ""), "tools", "name")
	if !slices.Contains(tools, "say") || slices.Contains(tools, "a__echo") || slices.Contains(tools, "a__crash") || slices.Contains(tools, "b__echo") {
		t.Fatalf("view v lists %v", tools)
	}
	names(t, agg.call("tools/list", ""), "tools", "name")
	result(t, view.call("tools/call", fakeTool("say", `{"x":1}`)))
	pid := h.row("a", "").PID
	result(t, agg.call("tools/call", fakeTool("a__echo", `{}`)))
	if h.row("a", "").PID != pid {
		t.Error("the aggregated view's call ran in another instance than the view's")
	}
	aggBefore, viewBefore := len(agg.notifications("notifications/tools/list_changed")), len(view.notifications("notifications/tools/list_changed"))

	// b, outside the view, loses a tool.
	h.m.Apply(loadConfig(t, twoFakesAndAView+"\n[mcpServers.b.tools]\nexclude = [\"crash\"]\n"))
	eventually.True(t, "list_changed to the aggregated view", func() bool {
		return len(agg.notifications("notifications/tools/list_changed")) > aggBefore
	})
	// a, in the view, loses one: the view hears of it.
	h.m.Apply(loadConfig(t, twoFakesAndAView+"\n[mcpServers.a.tools]\nexclude = [\"slow\"]\n"))
	eventually.True(t, "list_changed to the view", func() bool {
		return len(view.notifications("notifications/tools/list_changed")) > viewBefore
	})
	if got := len(view.notifications("notifications/tools/list_changed")) - viewBefore; got != 1 {
		t.Errorf("the view heard %d list_changed, want 1 (b's change is not its own)", got)
	}
	if tools := names(t, view.call("tools/list", ""), "tools", "name"); slices.Contains(tools, "a__slow") {
		t.Errorf("view v after the change: %v", tools)
	}
	code, msg, _ := errorOf(t, view.call("tools/call", fakeTool("b__echo", `{}`)))
	if code != -32602 || msg != "Unknown tool: b__echo (not in view v)" {
		t.Errorf("b__echo in view v: %d %q", code, msg)
	}
	// Never routed: b saw no call of echo (b's history, asked through the
	// aggregated view, lists every request it was sent).
	var hist struct {
		Requests []struct {
			Method string `json:"method"`
			Tool   string `json:"tool"`
		} `json:"requests"`
	}
	_ = json.Unmarshal(result(t, agg.call("tools/call", fakeTool("b__history", "")))["structuredContent"], &hist)
	for _, r := range hist.Requests {
		if r.Method == "tools/call" && r.Tool == "echo" {
			t.Errorf("b was sent the refused call: %+v", hist.Requests)
		}
	}
}

// TestNamedViewStartsItsServers: a list of a named view starts the lazy
// servers it holds, and only those.
func TestNamedViewStartsItsServers(t *testing.T) {
	h := newHarness(t, twoFakesAndAView)
	view := h.connect("@v", "", "2025-11-25")
	if tools := names(t, view.call("tools/list", ""), "tools", "name"); !slices.Contains(tools, "say") {
		t.Fatalf("view v lists %v: a was not started for it", tools)
	}
	if row := h.row("b", ""); row.State != StateStopped || row.PID != 0 {
		t.Errorf("b, outside the view, was started by its list: %+v", row)
	}
}
