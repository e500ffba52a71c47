package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// mcpServer is a server with small controllable tools: echo (requires
// text), twice (requires a and b), failing, erring (returns an error),
// raising (panics), empty (nil content), nothing (nil result) and ctxcheck
// (reports whether its context carries the caller's value).
func mcpServer(t *testing.T) *server.Server {
	t.Helper()
	s := server.New(server.Info{Name: "snodod-test", Version: "1.2.3"})
	s.AddTool(server.Tool{
		Name:        "echo",
		Description: "Echoes text.",
		InputSchema: json.RawMessage(`{ "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"] }`),
		Handler: func(_ context.Context, args json.RawMessage) (*server.ToolResult, error) {
			var a struct{ Text string }
			if err := json.Unmarshal(args, &a); err != nil {
				return nil, err
			}
			return server.TextResult(a.Text), nil
		},
	})
	s.AddTool(server.Tool{
		Name:        "twice",
		InputSchema: json.RawMessage(`{"type":"object","required":["a","b"]}`),
		Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
			return server.TextResult("ok"), nil
		},
	})
	s.AddTool(server.Tool{Name: "failing", Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
		return server.ErrorResult("it failed"), nil
	}})
	s.AddTool(server.Tool{Name: "erring", Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
		return nil, errors.New("cannot do that: try again")
	}})
	s.AddTool(server.Tool{Name: "raising", Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
		panic("tool exploded")
	}})
	s.AddTool(server.Tool{Name: "empty", Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
		return &server.ToolResult{}, nil
	}})
	s.AddTool(server.Tool{Name: "nothing", Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
		return nil, nil
	}})
	s.AddTool(server.Tool{Name: "ctxcheck", Handler: func(ctx context.Context, _ json.RawMessage) (*server.ToolResult, error) {
		v, _ := ctx.Value(mcpCtxKey{}).(string)
		return server.TextResult(v), nil
	}})
	return s
}

type mcpCtxKey struct{}

// mcpJSON encodes v as the transport would put it on the wire.
func mcpJSON(t *testing.T, v any) string {
	t.Helper()
	line, err := protocol.AppendResult(nil, protocol.IntID(1), v)
	if err != nil {
		t.Fatalf("encode %#v: %v", v, err)
	}
	s := strings.TrimSuffix(string(line), "}\n")
	return strings.TrimPrefix(s, `{"jsonrpc":"2.0","id":1,"result":`)
}

func mcpErrJSON(e *protocol.Error) string {
	if e == nil {
		return ""
	}
	line := string(protocol.AppendError(nil, protocol.IntID(1), e))
	s := strings.TrimSuffix(line, "}\n")
	return strings.TrimPrefix(s, `{"jsonrpc":"2.0","id":1,"error":`)
}

func TestServerInitialize(t *testing.T) {
	s := mcpServer(t)
	withInstructions := server.New(server.Info{Instructions: "Use echo."})
	const bad = `{"code":-32602,"message":"initialize requires protocolVersion, capabilities and clientInfo name/version"}`
	tests := []struct {
		name    string
		srv     *server.Server
		params  string
		version string
		result  string
		err     string
	}{
		{name: "2025-06-18 echoed", params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`,
			version: "2025-06-18",
			result:  `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"snodod-test","version":"1.2.3"}}`},
		{name: "2025-11-25 echoed", params: `{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"1","title":"T"}}`,
			version: "2025-11-25",
			result:  `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"snodod-test","version":"1.2.3"}}`},
		{name: "old version gets newest", params: `{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`,
			version: "2025-11-25",
			result:  `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"snodod-test","version":"1.2.3"}}`},
		{name: "2026 version gets newest legacy", params: `{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`,
			version: "2025-11-25",
			result:  `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"snodod-test","version":"1.2.3"}}`},
		{name: "instructions and defaults", srv: withInstructions, params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`,
			version: "2025-06-18",
			result:  `{"protocolVersion":"2025-06-18","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"snodod","version":"dev"},"instructions":"Use echo."}`},
		{name: "no params", params: ``, err: bad},
		{name: "empty object", params: `{}`, err: bad},
		{name: "empty version", params: `{"protocolVersion":"","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, err: bad},
		{name: "numeric version", params: `{"protocolVersion":20250618,"capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, err: bad},
		{name: "capabilities not an object", params: `{"protocolVersion":"2025-06-18","capabilities":[],"clientInfo":{"name":"t","version":"1"}}`, err: bad},
		{name: "capabilities missing", params: `{"protocolVersion":"2025-06-18","clientInfo":{"name":"t","version":"1"}}`, err: bad},
		{name: "clientInfo missing", params: `{"protocolVersion":"2025-06-18","capabilities":{}}`, err: bad},
		{name: "clientInfo not an object", params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":"t"}`, err: bad},
		{name: "clientInfo without version", params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t"}}`, err: bad},
		{name: "clientInfo numeric name", params: `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":1,"version":"1"}}`, err: bad},
		{name: "keys match case-sensitively", params: `{"ProtocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`, err: bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := s
			if tt.srv != nil {
				srv = tt.srv
			}
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			result, version, perr := srv.Initialize(params)
			if got := mcpErrJSON(perr); got != tt.err {
				t.Fatalf("error = %s, want %s", got, tt.err)
			}
			if perr != nil {
				if version != "" || result != nil {
					t.Fatalf("failed initialize returned %q, %#v", version, result)
				}
				return
			}
			if version != tt.version {
				t.Errorf("version = %q, want %q", version, tt.version)
			}
			if got := mcpJSON(t, result); got != tt.result {
				t.Errorf("result =\n%s\nwant\n%s", got, tt.result)
			}
		})
	}
}

const mcpMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func TestServerDispatch(t *testing.T) {
	s := mcpServer(t)
	const v0618, v1125 = "2025-06-18", "2025-11-25"
	const toolList = `{"tools":[` +
		`{"name":"ctxcheck","inputSchema":{"type":"object"}},` +
		`{"name":"echo","description":"Echoes text.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}},` +
		`{"name":"empty","inputSchema":{"type":"object"}},` +
		`{"name":"erring","inputSchema":{"type":"object"}},` +
		`{"name":"failing","inputSchema":{"type":"object"}},` +
		`{"name":"nothing","inputSchema":{"type":"object"}},` +
		`{"name":"raising","inputSchema":{"type":"object"}},` +
		`{"name":"twice","inputSchema":{"type":"object","required":["a","b"]}}]}`
	tests := []struct {
		name    string
		version string // the injected header; "" for none
		method  string
		params  string
		result  string
		err     string
	}{
		{name: "ping without version", method: "ping", result: `{}`},
		{name: "ping with params", version: v0618, method: "ping", params: `{"x":1}`, result: `{}`},
		{name: "no version", method: "tools/list", err: `{"code":-32600,"message":"No configured protocol dialect recognized the request"}`},
		{name: "no version, unknown method", method: "nope", err: `{"code":-32600,"message":"No configured protocol dialect recognized the request"}`},
		{name: "unknown method", version: v0618, method: "resources/list", err: `{"code":-32601,"message":"Method not found: resources/list"}`},
		{name: "notification as request", version: v0618, method: "notifications/initialized", err: `{"code":-32600,"message":"notifications/initialized must be a notification, received request"}`},
		{name: "wrong direction", version: v1125, method: "roots/list", err: `{"code":-32600,"message":"Method is not available in this direction"}`},
		{name: "tools/list", version: v0618, method: "tools/list", result: toolList},
		{name: "tools/list with cursor", version: v1125, method: "tools/list", params: `{"cursor":"x"}`, result: toolList},
		{name: "_meta not an object", version: v0618, method: "tools/list", params: `{"_meta":[]}`, err: `{"code":-32602,"message":"_meta must be an object"}`},
		{name: "string progress token", version: v0618, method: "tools/list", params: `{"_meta":{"progressToken":"tok"}}`, result: toolList},
		{name: "float progress token", version: v0618, method: "tools/list", params: `{"_meta":{"progressToken":1.5}}`,
			err: `{"code":-32602,"message":"progressToken must be a string of at most 256 bytes or an int64 integer"}`},
		{name: "long progress token", version: v0618, method: "tools/call", params: `{"name":"echo","_meta":{"progressToken":"` + strings.Repeat("x", 257) + `"}}`,
			err: `{"code":-32602,"message":"progressToken must be a string of at most 256 bytes or an int64 integer"}`},
		{name: "multi-round-trip input", version: v1125, method: "tools/call", params: `{"name":"echo","requestState":"x"}`,
			err: `{"code":-32602,"message":"Tasks and multi-round-trip inputs are not supported"}`},
		{name: "call echo", version: v0618, method: "tools/call", params: `{"name":"echo","arguments":{"text":"hi <&> \u2028"}}`,
			result: `{"content":[{"type":"text","text":"hi <&> \u2028"}],"isError":false}`},
		{name: "call echo empty text", version: v0618, method: "tools/call", params: `{"name":"echo","arguments":{"text":""}}`,
			result: `{"content":[{"type":"text","text":""}],"isError":false}`},
		{name: "name missing", version: v0618, method: "tools/call", params: `{"arguments":[]}`, err: `{"code":-32602,"message":"tools/call requires a string name"}`},
		{name: "no params", version: v0618, method: "tools/call", err: `{"code":-32602,"message":"tools/call requires a string name"}`},
		{name: "name not a string", version: v0618, method: "tools/call", params: `{"name":7}`, err: `{"code":-32602,"message":"tools/call requires a string name"}`},
		{name: "arguments not an object", version: v0618, method: "tools/call", params: `{"name":"nope","arguments":[]}`, err: `{"code":-32602,"message":"tools/call arguments must be an object"}`},
		{name: "arguments null", version: v0618, method: "tools/call", params: `{"name":"echo","arguments":null}`, err: `{"code":-32602,"message":"tools/call arguments must be an object"}`},
		{name: "unknown tool", version: v0618, method: "tools/call", params: `{"name":"nope"}`, err: `{"code":-32602,"message":"Unknown tool: nope"}`},
		{name: "missing argument 2025-06-18", version: v0618, method: "tools/call", params: `{"name":"twice","arguments":{"b":1}}`,
			err: `{"code":-32602,"message":"Invalid tool arguments","data":{"detail":"Missing required arguments: a"}}`},
		{name: "absent arguments 2025-06-18", version: v0618, method: "tools/call", params: `{"name":"twice"}`,
			err: `{"code":-32602,"message":"Invalid tool arguments","data":{"detail":"Missing required arguments: a, b"}}`},
		{name: "missing arguments 2025-11-25", version: v1125, method: "tools/call", params: `{"name":"twice","arguments":{}}`,
			result: `{"content":[{"type":"text","text":"Missing required arguments: a, b"}],"isError":true}`},
		{name: "isError result", version: v0618, method: "tools/call", params: `{"name":"failing"}`,
			result: `{"content":[{"type":"text","text":"it failed"}],"isError":true}`},
		{name: "handler error", version: v0618, method: "tools/call", params: `{"name":"erring","arguments":{}}`,
			result: `{"content":[{"type":"text","text":"cannot do that: try again"}],"isError":true}`},
		{name: "handler panic", version: v0618, method: "tools/call", params: `{"name":"raising"}`,
			err: `{"code":-32603,"message":"Tool raised an exception"}`},
		{name: "nil content", version: v0618, method: "tools/call", params: `{"name":"empty"}`, result: `{"content":[],"isError":false}`},
		{name: "nil result", version: v0618, method: "tools/call", params: `{"name":"nothing"}`,
			err: `{"code":-32603,"message":"Server produced an invalid result"}`},
		{name: "context passed", version: v0618, method: "tools/call", params: `{"name":"ctxcheck"}`,
			result: `{"content":[{"type":"text","text":"from caller"}],"isError":false}`},
		{name: "2026 tools/list", method: "tools/list", params: `{` + mcpMeta + `}`, result: toolList},
		{name: "2026 ignores the header", version: v0618, method: "tools/call", params: `{"name":"twice",` + mcpMeta + `}`,
			result: `{"content":[{"type":"text","text":"Missing required arguments: a, b"}],"isError":true}`},
		{name: "2026 ping", method: "ping", params: `{` + mcpMeta + `}`, err: `{"code":-32601,"message":"Method not found: ping"}`},
		{name: "2026 initialize", method: "initialize", params: `{` + mcpMeta + `}`, err: `{"code":-32601,"message":"Method not found: initialize"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &server.Request{ID: protocol.IntID(1), Method: tt.method, Header: http.Header{}}
			if tt.params != "" {
				req.Params = json.RawMessage(tt.params)
			}
			if tt.version != "" {
				req.Header.Set(server.HeaderProtocolVersion, tt.version)
			}
			ctx := context.WithValue(t.Context(), mcpCtxKey{}, "from caller")
			out := s.Dispatch(ctx, req)
			if out.Stream != nil {
				t.Fatal("unexpected stream")
			}
			if got := mcpErrJSON(out.Err); got != tt.err {
				t.Fatalf("error = %s, want %s", got, tt.err)
			}
			if out.Err != nil {
				return
			}
			if got := mcpJSON(t, out.Result); got != tt.result {
				t.Errorf("result =\n%s\nwant\n%s", got, tt.result)
			}
		})
	}
}

func TestServerNilHeader(t *testing.T) {
	s := mcpServer(t)
	out := s.Dispatch(t.Context(), &server.Request{Method: "ping"})
	if out.Err != nil || mcpJSON(t, out.Result) != `{}` {
		t.Fatalf("ping with a nil header = %+v", out)
	}
}

func TestServerToolPanicLogged(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(mcpLogWriter{&mu, &logs}, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })

	s := mcpServer(t)
	req := &server.Request{Method: "tools/call", Params: json.RawMessage(`{"name":"raising"}`), Header: http.Header{}}
	req.Header.Set(server.HeaderProtocolVersion, "2025-06-18")
	if out := s.Dispatch(t.Context(), req); out.Err != protocol.ErrToolPanicked {
		t.Fatalf("outcome = %+v, want ErrToolPanicked", out)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"level=ERROR", "tool=raising", "panic=\"tool exploded\"", "mcp_test.go"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

type mcpLogWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l mcpLogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestServerAddToolPanics(t *testing.T) {
	ok := func(context.Context, json.RawMessage) (*server.ToolResult, error) { return nil, nil }
	tests := []struct {
		name string
		tool server.Tool
	}{
		{"no name", server.Tool{Handler: ok}},
		{"no handler", server.Tool{Name: "x"}},
		{"invalid JSON", server.Tool{Name: "x", Handler: ok, InputSchema: json.RawMessage(`{`)}},
		{"not an object", server.Tool{Name: "x", Handler: ok, InputSchema: json.RawMessage(`[]`)}},
		{"not an object schema", server.Tool{Name: "x", Handler: ok, InputSchema: json.RawMessage(`{"type":"string"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("AddTool did not panic")
				}
			}()
			server.New(server.Info{}).AddTool(tt.tool)
		})
	}
}

// TestServerConcurrentAddTool runs AddTool while tools are listed and
// called; the race detector checks the locking.
func TestServerConcurrentAddTool(t *testing.T) {
	s := mcpServer(t)
	header := http.Header{}
	header.Set(server.HeaderProtocolVersion, "2025-11-25")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				if i == 0 {
					s.AddTool(server.Tool{Name: "added", Description: strings.Repeat("x", j),
						Handler: func(context.Context, json.RawMessage) (*server.ToolResult, error) {
							return server.TextResult("ok"), nil
						}})
					continue
				}
				if out := s.Dispatch(t.Context(), &server.Request{Method: "tools/list", Header: header}); out.Err != nil {
					t.Errorf("tools/list: %v", out.Err)
				}
				s.Dispatch(t.Context(), &server.Request{Method: "tools/call", Params: json.RawMessage(`{"name":"added"}`), Header: header})
			}
		})
	}
	wg.Wait()
}
