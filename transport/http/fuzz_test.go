package http_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// fuzzToken is the bearer token of FuzzHandler's endpoint.
const fuzzToken = "s3cret-token"

// fuzzEndpoint starts a handler with a bearer token on a loopback
// listener, serving tools that end on their own (a fuzzer would find a
// blocking one and wait on it every time), and returns its URL.
func fuzzEndpoint(f *testing.F) string {
	srv, err := server.New(server.Options{SubscribableResources: true, Logger: quiet})
	if err != nil {
		f.Fatal(err)
	}
	srv.AddTool(&server.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(req.Arguments, &in)
			return &server.CallToolResult{Content: []server.Content{server.TextContent(in.Text)}}, nil
		})
	srv.AddTool(&server.Tool{Name: "progress"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		_ = server.ReportProgress(ctx, server.Progress{Progress: 1, Total: 2, HasTotal: true})
		return &server.CallToolResult{Content: []server.Content{server.TextContent("finished")}}, nil
	})
	srv.AddResource(&server.Resource{URI: "test://watched", Name: "watched"},
		func(context.Context, *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: "test://watched", Text: "w"}}}, nil
		})
	exec, err := executor.New(executor.Limits{RequestTimeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	h, err := mcphttp.New(mcphttp.Options{Dispatcher: srv, Executor: exec, Logger: quiet, AuthToken: fuzzToken,
		MaxBodyBytes: 4096, ReadTimeout: 2 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	return serveLoopback(f, h, mcphttp.ServerLimits{MaxHeaderBytes: 8192}, exec)
}

var fuzzMethods = []string{"POST", "GET", "DELETE", "PUT", "OPTIONS", "PATCH", "HEAD"}

// FuzzHandler sends requests of any method, path, headers and body to a
// Streamable HTTP endpoint on a loopback listener with a bearer token,
// and checks the answer: a status docs/protocol.md §13 lists; the Host,
// Origin and token rules applied before anything else (403, 401); every
// JSON body one JSON-RPC 2.0 message, an error for a 4xx or 5xx; every
// SSE event one JSON-RPC message.
func FuzzHandler(f *testing.F) {
	auth := "Authorization: Bearer " + fuzzToken + "\n"
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	for _, seed := range []struct {
		method  uint8
		path    string
		headers string
		body    string
	}{
		{0, "/mcp", auth + "Content-Type: application/json\nMCP-Protocol-Version: 2026-07-28\nMcp-Method: tools/call\nMcp-Name: echo\n",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},` + meta + `}}`},
		{0, "/mcp", auth + "Content-Type: application/json\nAccept: application/json, text/event-stream\nMCP-Protocol-Version: 2026-07-28\nMcp-Method: tools/call\nMcp-Name: progress\n",
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`},
		{0, "/mcp", auth + "Content-Type: application/json\n",
			`{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}`},
		{0, "/mcp", auth + "Content-Type: application/json\nMcp-Session-Id: 0123456789abcdef0123456789abcdef\n", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{1, "/mcp", auth + "Accept: text/event-stream\nMcp-Session-Id: nope\n", ""},
		{2, "/mcp", auth, ""},
		{0, "/mcp", "Host: evil.example\n" + auth + "Content-Type: application/json\n", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{0, "/mcp", "Origin: https://evil.example\n" + auth + "Content-Type: application/json\n", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{0, "/mcp", "Authorization: Bearer wrong\nContent-Type: application/json\n", `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{0, "/mcp/view", auth + "Content-Type: text/plain\n", `[]`},
		{3, "/other", "", "{"},
	} {
		f.Add(seed.method, seed.path, seed.headers, []byte(seed.body))
	}
	base := fuzzEndpoint(f)
	client := &nethttp.Client{Timeout: 10 * time.Second, Transport: &nethttp.Transport{DisableKeepAlives: true}}
	f.Fuzz(func(t *testing.T, method uint8, path, headers string, body []byte) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := nethttp.NewRequest(fuzzMethods[int(method)%len(fuzzMethods)], base+path, bytes.NewReader(body))
		if err != nil {
			return // not a URL: nothing a client could send
		}
		for _, line := range strings.Split(headers, "\n") {
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if strings.EqualFold(name, "Host") {
				req.Host = strings.TrimSpace(value)
			} else {
				req.Header.Add(name, strings.TrimSpace(value))
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("no answer within the client's timeout: %v", err)
			}
			return // a request Go's client refuses to send (a bad header, Host)
		}
		defer resp.Body.Close()
		checkAnswer(t, req, resp)
	})
}

// statuses are the statuses docs/protocol.md §13 gives an endpoint; 400 and
// 431 also come from Go's HTTP server for requests it cannot parse.
var statuses = map[int]bool{200: true, 202: true, 204: true, 400: true, 401: true, 403: true, 404: true, 405: true,
	406: true, 408: true, 409: true, 413: true, 415: true, 431: true, 503: true}

func checkAnswer(t *testing.T, req *nethttp.Request, resp *nethttp.Response) {
	if !statuses[resp.StatusCode] {
		t.Fatalf("status %d for %s %s", resp.StatusCode, req.Method, req.URL.Path)
	}
	// The guard's rules, in their order: Host (loopback listener), Origin,
	// then the token (docs/protocol.md §13.1).
	want := 0
	switch {
	case !loopbackHost(req.Host):
		want = 403
	case req.Header.Get("Origin") != "" && !loopbackOrigin(req.Header.Get("Origin")):
		want = 403
	case !bearerOK(req.Header.Get("Authorization")):
		want = 401
	}
	if want != 0 && resp.StatusCode != want && resp.StatusCode != 400 && resp.StatusCode != 431 {
		t.Fatalf("status %d, want %d (Host %q, Origin %q, Authorization %q)", resp.StatusCode, want,
			req.Host, req.Header.Get("Origin"), req.Header.Get("Authorization"))
	}
	// The Origin rule parses the origin more strictly than this test
	// does, so only a request without one must be let in.
	if want == 0 && req.Header.Get("Origin") == "" && (resp.StatusCode == 401 || resp.StatusCode == 403) {
		t.Fatalf("status %d for a request the guard lets in (Host %q, Origin %q)", resp.StatusCode, req.Host, req.Header.Get("Origin"))
	}
	ctype := resp.Header.Get("Content-Type")
	switch {
	case req.Method == "HEAD": // an answer without a body
	case strings.HasPrefix(ctype, "text/event-stream"):
		checkEvents(t, resp.Body)
	case strings.HasPrefix(ctype, "application/json"):
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("read the body: %v", err)
		}
		var msg struct {
			JSONRPC string          `json:"jsonrpc"`
			Result  json.RawMessage `json:"result"`
			Error   json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(b, &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Fatalf("status %d body is not one JSON-RPC message (%v): %.300s", resp.StatusCode, err, b)
		}
		if resp.StatusCode >= 400 && msg.Error == nil {
			t.Fatalf("status %d without a JSON-RPC error: %.300s", resp.StatusCode, b)
		}
	case resp.StatusCode == 202 || resp.StatusCode == 204 || resp.StatusCode == 431:
	case resp.StatusCode == 400 && ctype == "text/plain; charset=utf-8":
		// Go's server refusing what it cannot parse (the fuzzer found a
		// space in the request target) before the handler runs, so before
		// the guard's rules too.
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		t.Fatalf("status %d with Content-Type %q: %q", resp.StatusCode, ctype, b)
	}
}

// checkEvents reads an SSE stream until it ends (a stream that stays open,
// a listen, is left after its first event): every data field must be one
// JSON-RPC message.
func checkEvents(t *testing.T, body io.Reader) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal([]byte(data), &msg); err != nil || msg.JSONRPC != "2.0" {
			t.Fatalf("an SSE event that is not a JSON-RPC message (%v): %.300s", err, data)
		}
		if strings.Contains(data, `"method":"notifications/`) && !strings.Contains(data, "progress") {
			return // a listen stream's first notification: it stays open
		}
	}
}

func loopbackHost(host string) bool {
	name := strings.ToLower(host)
	if h, _, err := net.SplitHostPort(name); err == nil {
		name = h
	} else {
		name = strings.Trim(name, "[]")
	}
	return name == "localhost" || name == "127.0.0.1" || name == "::1"
}

func loopbackOrigin(origin string) bool {
	scheme, rest, ok := strings.Cut(strings.ToLower(origin), "://")
	if !ok || scheme != "http" && scheme != "https" || strings.ContainsAny(rest, "/?#@") {
		return false
	}
	return loopbackHost(rest)
}

func bearerOK(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	return ok && strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(token) == fuzzToken
}
