package http_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// views serves one named view, as the daemon's pass-through views do.
type views map[string]server.Dispatcher

func (v views) View(name string) (mcphttp.View, bool) {
	d, ok := v[name]
	return mcphttp.View{Dispatcher: d}, ok
}

// Path + "/NAME" is served by the view NAME; an unknown view is 404.
func TestViews(t *testing.T) {
	other, err := server.New(server.Options{Info: protocol.Implementation{Name: "other"}, Logger: quiet})
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

// opened is a Views whose endpoint says who asks: one caller for every
// 2026 POST, one of its own for each legacy session, counting the
// sessions opened and released (the daemon's views hold upstream
// resources per session this way).
type opened struct {
	disp             server.Dispatcher
	stateless        *server.Caller
	opened, released chan *server.Caller
}

func (o *opened) View(name string) (mcphttp.View, bool) {
	if name != "" {
		return mcphttp.View{}, false
	}
	return mcphttp.View{Dispatcher: o.disp, Caller: o.stateless, Open: func() (*server.Caller, func()) {
		c := &server.Caller{Session: uint64(100 + len(o.opened))}
		o.opened <- c
		return c, func() { o.released <- c }
	}}, true
}

// A view's Open is asked for a caller at each legacy initialize, and what
// it returned is released when the session ends; 2026 POSTs open no
// session and carry the view's one caller. A relayed handler is told who
// asks (RawRequest.Caller).
func TestViewOpen(t *testing.T) {
	srv, err := server.New(server.Options{Info: protocol.Implementation{Name: "opened"}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan *server.Caller, 4)
	srv.ReplaceRelayed(map[string]server.RelayedItems{"t": {Tools: []server.RawTool{{Name: "who", Definition: []byte(`{"name":"who","inputSchema":{"type":"object"}}`),
		Handler: func(_ context.Context, req *server.RawRequest) (*server.RawResult, error) {
			asked <- req.Caller
			return &server.RawResult{Result: []byte(`{"content":[]}`)}, nil
		}}}}})
	o := &opened{disp: srv, stateless: &server.Caller{Session: 7}, opened: make(chan *server.Caller, 4), released: make(chan *server.Caller, 4)}
	e := newEnv(t, func(opts *mcphttp.Options, _ *mcphttp.ServerLimits) { opts.Dispatcher, opts.Views = nil, o })
	if r := post(t, e.url, modernHeaders("tools/call", "who"), modernBody("1", "tools/call", `"name":"who"`)); r.status != 200 {
		t.Fatalf("2026 tools/call: %d %s", r.status, r.body)
	}
	if c := <-asked; c != o.stateless {
		t.Fatalf("a 2026 POST's caller %+v, want the view's %+v", c, o.stateless)
	}
	if len(o.opened) != 0 {
		t.Fatal("a 2026 POST opened a session")
	}
	r := post(t, e.url, legacyHeaders("", ""), initBody("2025-11-25"))
	id := r.header.Get("Mcp-Session-Id")
	if id == "" || len(o.opened) != 1 || len(o.released) != 0 {
		t.Fatalf("initialize: session %q, opened %d, released %d", id, len(o.opened), len(o.released))
	}
	mine := <-o.opened
	if r := post(t, e.url, legacyHeaders(id, "2025-11-25"), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"who"}}`); r.status != 200 {
		t.Fatalf("legacy tools/call: %d %s", r.status, r.body)
	}
	if c := <-asked; c != mine {
		t.Fatalf("the legacy session's caller %+v, want its own %+v", c, mine)
	}
	if r := do(t, "DELETE", e.url, hdr("Mcp-Session-Id", id), ""); r.status != 204 {
		t.Fatalf("DELETE: %d", r.status)
	}
	if len(o.released) != 1 || <-o.released != mine {
		t.Fatal("DELETE did not release the session's caller")
	}
	// An initialize refused by the view releases what it opened.
	post(t, e.url, legacyHeaders("", ""), `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	if len(o.opened) != 1 || len(o.released) != 1 {
		t.Fatalf("a refused initialize: opened %d, released %d, want 1 and 1", len(o.opened), len(o.released))
	}
}
