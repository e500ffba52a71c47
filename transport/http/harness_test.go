package http_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	mcphttp "github.com/snodod/snodod/transport/http"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// META is the request metadata of docs/transport.md §16 as a JSON fragment.
const META = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// env is one handler on a real loopback listener, serving the test
// catalog, and the handles the tests use.
type env struct {
	url     string
	handler *mcphttp.Handler
	srv     *server.Server
	exec    *executor.Executor
	// cancelled receives the name of a blocking tool whose context ended.
	cancelled chan string
	// started receives the name of a blocking tool once it runs.
	started chan string
}

var quiet = slog.New(slog.DiscardHandler)

// newEnv starts a handler with the options edit sets (on top of the test
// defaults) and stops it when the test ends.
func newEnv(t *testing.T, edit func(*mcphttp.Options, *mcphttp.ServerLimits)) *env {
	t.Helper()
	srv, err := server.New(server.Options{Instructions: "Use only when useful", SubscribableResources: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := executor.New(executor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{srv: srv, exec: exec, cancelled: make(chan string, 16), started: make(chan string, 16)}
	addTestCatalog(e)
	o := mcphttp.Options{Dispatcher: srv, Executor: exec, Logger: quiet}
	var limits mcphttp.ServerLimits
	if edit != nil {
		edit(&o, &limits)
	}
	h, err := mcphttp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.handler = h
	e.url = serveLoopback(t, h, limits, exec) + h.Path()
	return e
}

// serveLoopback serves h on a new loopback listener until the test ends,
// then shuts it down and closes exec; it returns the listener's URL.
func serveLoopback(t testing.TB, h *mcphttp.Handler, limits mcphttp.ServerLimits, exec *executor.Executor) string {
	t.Helper()
	return serveAt(t, "127.0.0.1:0", h, limits, exec)
}

// serveAt is serveLoopback on addr; a test skips where addr cannot be bound.
func serveAt(t testing.TB, addr string, h *mcphttp.Handler, limits mcphttp.ServerLimits, exec *executor.Executor) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		exec.Close()
		t.Skipf("listen on %s: %v", addr, err)
	}
	hs := mcphttp.NewServer(h, limits, quiet)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = hs.Serve(ln)
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
		_ = hs.Shutdown(ctx)
		hs.Close()
		<-done
		exec.Close()
	})
	return "http://" + ln.Addr().String()
}

// addTestCatalog registers the tools of docs/protocol.md §14.1 that the HTTP
// cases use.
func addTestCatalog(e *env) {
	s := e.srv
	s.AddTool(&server.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct{ Text string }
			_ = json.Unmarshal(req.Arguments, &in)
			return &server.CallToolResult{Content: []server.Content{server.TextContent(in.Text)}}, nil
		})
	s.AddTool(&server.Tool{Name: "needs_choice"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		res, err := server.Elicit(ctx, "choice", server.ElicitParams{Message: "Pick",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`)})
		if err != nil {
			return nil, err
		}
		label, _ := res.Content["label"].(string)
		return &server.CallToolResult{Content: []server.Content{server.TextContent(label)}}, nil
	})
	// progress reports 1 and 2 of 3, then waits for its context when
	// block is set, else finishes.
	s.AddTool(&server.Tool{Name: "progress", InputSchema: json.RawMessage(`{"type":"object","properties":{"block":{"type":"boolean"}}}`)},
		func(ctx context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct{ Block bool }
			_ = json.Unmarshal(req.Arguments, &in)
			for _, p := range []float64{1, 2} {
				if err := server.ReportProgress(ctx, server.Progress{Progress: p, Total: 3, HasTotal: true}); err != nil {
					return nil, err
				}
			}
			if in.Block {
				e.started <- "progress"
				<-ctx.Done()
				e.cancelled <- "progress"
				return nil, ctx.Err()
			}
			return &server.CallToolResult{Content: []server.Content{server.TextContent("finished")}}, nil
		})
	s.AddTool(&server.Tool{Name: "block"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		e.started <- "block"
		<-ctx.Done()
		e.cancelled <- "block"
		return nil, ctx.Err()
	})
	s.AddResource(&server.Resource{URI: "test://watched", Name: "watched"},
		func(context.Context, *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: "test://watched", Text: "w"}}}, nil
		})
}

// changeTools adds a tool: a tools list change.
func (e *env) changeTools(name string) {
	e.srv.AddTool(&server.Tool{Name: name}, func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
		return &server.CallToolResult{}, nil
	})
}

// reply is one HTTP response as the tests see it.
type reply struct {
	status int
	header nethttp.Header
	body   string
}

// msg decodes the body as one JSON-RPC message.
func (r reply) msg(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q (status %d): %v", r.body, r.status, err)
	}
	return m
}

// errorCode returns the JSON-RPC error code and message of the body.
func (r reply) errorCode(t *testing.T) (int, string) {
	t.Helper()
	m := r.msg(t)
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error in %s", r.body)
	}
	return int(e["code"].(float64)), e["message"].(string)
}

// hdr builds headers from name, value pairs.
func hdr(kv ...string) nethttp.Header {
	h := nethttp.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// modernHeaders are the headers a 2026 client sends with method (and name).
func modernHeaders(method, name string) nethttp.Header {
	h := hdr("Content-Type", "application/json", "Accept", "application/json, text/event-stream",
		"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	return h
}

func do(t *testing.T, method, url string, h nethttp.Header, body string) reply {
	t.Helper()
	req, err := nethttp.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if host := h.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func post(t *testing.T, url string, h nethttp.Header, body string) reply {
	t.Helper()
	return do(t, nethttp.MethodPost, url, h, body)
}

// call posts a 2026 request with META and the right headers.
func (e *env) call(t *testing.T, id, method, name, params string) reply {
	t.Helper()
	return post(t, e.url, modernHeaders(method, name), modernBody(id, method, params))
}

// progressBody is a 2026 call of the test catalog's progress tool with a
// progress token, so that it is answered over SSE; block makes it wait
// for its cancellation.
func progressBody(block bool) string {
	b := `"name":"progress","arguments":{"block":false}`
	if block {
		b = `"name":"progress","arguments":{"block":true}`
	}
	return strings.Replace(modernBody("5", "tools/call", b), `"_meta":{`, `"_meta":{"progressToken":"pt",`, 1)
}

// modernBody is REQ(id, method, params): params (an object's members,
// possibly empty) gain "_meta":META.
func modernBody(id, method, params string) string {
	if params != "" {
		params += ","
	}
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":{` + params + `"_meta":` + META + `}}`
}

// sse is an open event stream.
type sse struct {
	resp   *nethttp.Response
	lines  chan string // data lines, in order; closed at the end
	cancel context.CancelFunc
	mu     sync.Mutex
	others []string // non-data lines (comments)
}

// openSSE sends a request and reads its response as an event stream.
func openSSE(t *testing.T, method, url string, h nethttp.Header, body string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := nethttp.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := nethttp.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s := &sse{resp: resp, lines: make(chan string, 64), cancel: cancel}
	go func() {
		defer close(s.lines)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				s.lines <- strings.TrimSuffix(data, "\n")
			} else if strings.TrimSpace(line) != "" {
				s.mu.Lock()
				s.others = append(s.others, line)
				s.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *sse) close() {
	s.cancel()
	s.resp.Body.Close()
	for range s.lines {
	}
}

var errEnded = errors.New("stream ended")

// next returns the next data line within d.
func (s *sse) next(d time.Duration) (string, error) {
	select {
	case l, ok := <-s.lines:
		if !ok {
			return "", errEnded
		}
		return l, nil
	case <-time.After(d):
		return "", errors.New("no event within " + d.String())
	}
}

// must returns the next data line or fails the test.
func (s *sse) must(t *testing.T) string {
	t.Helper()
	l, err := s.next(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// contains reports whether b holds every fragment.
func contains(b string, fragments ...string) bool {
	for _, f := range fragments {
		if !bytes.Contains([]byte(b), []byte(f)) {
			return false
		}
	}
	return true
}
