package e2e_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/internal/eventually"
)

// catalogConfig is a configuration of the three kinds the catalog builds
// from configuration, over the files of dir.
func catalogConfig(dir string) string {
	return fmt.Sprintf(`
[tools.shout]
description = "Prints its text"
command = ["/usr/bin/printf", "--", "%%s!", "{{text}}"]
input.text = { type = "string", required = true }
annotations = { readOnlyHint = true }

[tools.count]
command = ["/usr/bin/printf", "--", "{\"n\": %%s}", "{{n}}"]
input.n = { type = "integer", required = true }
output = "json"

[resources.notes]
path = %q
description = "My notes"

[prompts.review]
description = "Review a change"
arguments.diff = { required = true }
arguments.focus = { complete = ["security", "performance", "style"] }
template = "Review{{if .focus}} for {{.focus}}{{end}}: {{.diff}}"
`, filepath.Join(dir, "notes"))
}

// TestCatalogGoSDK: the official Go SDK client lists and calls, reads and
// gets configured tools, resources and prompts through snodod connect, at
// every version, hears of a file's change, and of a reload's new tool.
func TestCatalogGoSDK(t *testing.T) {
	dir, err := os.MkdirTemp("", "notes")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dir, _ = filepath.EvalSymlinks(dir)
	note := filepath.Join(dir, "notes", "a.md")
	if err := os.MkdirAll(filepath.Dir(note), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(note, []byte("# A"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes", "img.png"), []byte("\x89PNG\r\n\x1a\n\x00"), 0o644)
	noteURI := "file://" + note
	d := startDaemon(t, catalogConfig(dir), nil)

	handlers := func(c *goClient) *mcp.ClientOptions {
		return &mcp.ClientOptions{
			ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
				c.locked(func() { c.updates = append(c.updates, req.Params.URI) })
			},
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				c.locked(func() { c.toolsChanged++ })
			},
		}
	}
	clients := map[string]*goClient{}
	for _, version := range []string{"2025-06-18", "2025-11-25", v2026} {
		c := connectGoVia(t, d, version, handlers) // for the whole test
		clients[version] = c
		t.Run(version, func(t *testing.T) {
			ctx := t.Context()
			tools, err := c.cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if !slices.Contains(names, "shout") || !slices.Contains(names, "count") || !slices.Contains(names, "status") {
				t.Errorf("tools = %q", names)
			}
			if got := text(t, c.call(t, ctx, "shout", map[string]any{"text": "$(id) -x"})); got != "$(id) -x!" {
				t.Errorf("shout = %q", got)
			}
			res := c.call(t, ctx, "count", map[string]any{"n": 7})
			if m, ok := res.StructuredContent.(map[string]any); !ok || m["n"] != float64(7) {
				t.Errorf("count: structured %+v", res.StructuredContent)
			}

			resources, err := c.cs.ListResources(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var uris []string
			for _, r := range resources.Resources {
				if strings.HasPrefix(r.URI, "file://") { // the others are the demo's
					uris = append(uris, r.URI)
				}
			}
			if !slices.Equal(uris, []string{noteURI, "file://" + filepath.Join(dir, "notes", "img.png")}) {
				t.Errorf("resources = %q", uris)
			}
			templates, err := c.cs.ListResourceTemplates(ctx, nil)
			if err != nil || !slices.ContainsFunc(templates.ResourceTemplates, func(rt *mcp.ResourceTemplate) bool {
				return rt.URITemplate == "file://"+filepath.Join(dir, "notes")+"/{+path}"
			}) {
				t.Errorf("templates: %v %+v", err, templates)
			}
			read, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: noteURI})
			if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "# A" || read.Contents[0].MIMEType != "text/markdown" {
				t.Errorf("read: %v %+v", err, read)
			}
			img, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file://" + filepath.Join(dir, "notes", "img.png")})
			if err != nil || len(img.Contents) != 1 || base64.StdEncoding.EncodeToString(img.Contents[0].Blob) != base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00")) {
				t.Errorf("read the image: %v %+v", err, img)
			}
			if _, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file://" + filepath.Join(dir, "notes") + "/%2e%2e/notes/a.md"}); err == nil ||
				!strings.Contains(err.Error(), `".." is not allowed`) {
				t.Errorf("a path with %%2e%%2e: %v", err)
			}

			prompt, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "review", Arguments: map[string]string{"diff": "+x", "focus": "style"}})
			if err != nil || len(prompt.Messages) != 1 {
				t.Fatalf("get: %v %+v", err, prompt)
			}
			if tc, ok := prompt.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "Review for style: +x" {
				t.Errorf("prompt = %+v", prompt.Messages[0].Content)
			}
			comp, err := c.cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "review"},
				Argument: mcp.CompleteParamsArgument{Name: "focus", Value: "s"}})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"security", "style"}) {
				t.Errorf("complete: %v %+v", err, comp)
			}
			if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: noteURI}); err != nil {
				t.Fatal(err)
			}
		})
	}
	if t.Failed() {
		return
	}
	if err := os.WriteFile(note, []byte("# A, changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	for version, c := range clients {
		if !eventually.Within(eventWithin, func() (ok bool) { c.locked(func() { ok = slices.Contains(c.updates, noteURI) }); return }) {
			t.Errorf("%s: no notifications/resources/updated for %s", version, noteURI)
		}
	}

	// A reload adds a tool on the server running sessions use.
	d.writeConfig(t, catalogConfig(dir)+"\n[tools.whisper]\ncommand = [\"/usr/bin/printf\", \"--\", \"%s.\", \"{{text}}\"]\ninput.text = {}\n")
	d.signal(t, syscall.SIGHUP)
	legacy := clients["2025-11-25"]
	if !eventually.Within(eventWithin, func() (ok bool) { legacy.locked(func() { ok = legacy.toolsChanged > 0 }); return }) {
		t.Error("2025-11-25: no notifications/tools/list_changed after the reload")
	}
	for version, c := range clients {
		if got := text(t, c.call(t, t.Context(), "whisper", map[string]any{"text": "hi"})); got != "hi." {
			t.Errorf("%s: whisper after the reload = %q", version, got)
		}
	}
}
