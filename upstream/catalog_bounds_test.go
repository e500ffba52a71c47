package upstream

import (
	"slices"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
)

// An upstream's lists are cut at 10,000 items or 100 pages
// (docs/upstreams.md §8): what came before the cut is served, and status
// says so.
func TestCatalogBounds(t *testing.T) {
	h := newHarness(t, `
[mcpServers.items]
command = "FAKE"
args = ["-tools", "9987"]

[mcpServers.pages]
command = "FAKE"
args = ["-prompts", "101", "-page-size", "1"]
`)
	c := h.connect("", "", "2025-11-25")
	c.call("tools/list", "")
	eventually.True(t, "both listed", func() bool { return h.row("items", "").Tools > 0 && h.row("pages", "").Prompts > 0 })
	items, pages := h.row("items", ""), h.row("pages", "")
	if want := []string{"tools/list has more than 10000 items; the rest is not served"}; items.Tools != 10_000 || !slices.Equal(items.Truncated, want) {
		t.Errorf("items: %d tools, truncated %q; want 10000 and %q", items.Tools, items.Truncated, want)
	}
	if want := []string{"prompts/list has more than 100 pages; the rest is not served"}; pages.Prompts != 100 || !slices.Equal(pages.Truncated, want) ||
		pages.Tools != fakebuild.BehaviourTools {
		t.Errorf("pages: %d prompts, %d tools, truncated %q; want 100, %d and %q", pages.Prompts, pages.Tools, pages.Truncated, fakebuild.BehaviourTools, want)
	}
	// What came before the cut is served.
	res := c.call("prompts/get", `{"name":"pages__prompt-100"}`)
	if res["error"] != nil {
		t.Errorf("the 100th prompt: %s", res["error"])
	}
}
