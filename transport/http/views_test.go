package http_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// views serves one named view, as the daemon's pass-through views do.
type views map[string]server.Dispatcher

func (v views) View(name string) (server.Dispatcher, bool) {
	d, ok := v[name]
	return d, ok
}

// Path + "/NAME" is served by the view NAME; an unknown view is 404.
func TestViews(t *testing.T) {
	other, err := server.New(server.Options{Info: server.Implementation{Name: "other"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	other.AddTool(&server.Tool{Name: "only_here"}, func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
		return &server.CallToolResult{Content: []server.Content{server.TextContent("from other")}}, nil
	})
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.Views = views{"other": other} })
	call := modernBody("1", "tools/call", `"name":"only_here"`)
	if r := post(t, e.url+"/other", modernHeaders("tools/call", "only_here"), call); r.status != 200 || !contains(r.body, "from other", `"name":"other"`) {
		t.Fatalf("the view: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, modernHeaders("tools/call", "only_here"), call); !contains(r.body, "Unknown tool: only_here") {
		t.Fatalf("the aggregated view: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/absent", "/other/deeper"} {
		r := post(t, e.url+path, modernHeaders("tools/call", "only_here"), call)
		if code, msg := r.errorCode(t); r.status != 404 || code != -32600 || !strings.HasPrefix(msg, "No MCP endpoint at /mcp") {
			t.Fatalf("%s: %d %s", path, r.status, r.body)
		}
	}
	// A legacy session initialized on a view stays on it.
	r := post(t, e.url+"/other", legacyHeaders("", ""), initBody("2025-11-25"))
	id := r.header.Get("Mcp-Session-Id")
	if !contains(r.body, `"name":"other"`) || id == "" {
		t.Fatalf("initialize on the view: %s", r.body)
	}
	if r := post(t, e.url+"/other", legacyHeaders(id, ""), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"only_here"}}`); !contains(r.body, "from other") {
		t.Fatalf("the view's session: %s", r.body)
	}
}
