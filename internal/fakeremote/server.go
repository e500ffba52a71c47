//lint:file-ignore SA1019 the test server exercises the sampling feature the SDK deprecates (SEP-2577).

// Package fakeremote is a TEST-ONLY remote MCP server: the official Go SDK's
// server behind its Streamable HTTP handler (stateful, the 2025 eras, with
// an event store for resumption; or stateless, 2026-07-28 and sessionless
// legacy) or its HTTP+SSE handler (2024-11-05), with tools that exercise
// what a remote transport must carry, and fault hooks (an expired session,
// a cut stream, an error status) for mcpclient's and e2e's tests. The
// command in ./cmd serves it on loopback for e2e.
package fakeremote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The modes of Handler.
const (
	// ModeStreamable is the stateful Streamable HTTP server of the 2025
	// eras: sessions, a GET stream, resumption from an event store.
	ModeStreamable = "streamable"
	// ModeStateless serves 2026-07-28 (and legacy requests without
	// sessions).
	ModeStateless = "stateless"
	// ModeSSE is the HTTP+SSE transport of 2024-11-05.
	ModeSSE = "sse"
)

// Server is the test server and its fault hooks. Its methods may be called
// from any goroutine.
type Server struct {
	// Name is the serverInfo name, and the echo tool's prefix.
	Name string

	srv      *mcp.Server // one for every session: Close ends them all
	quit     chan struct{}
	quitOnce sync.Once
	mu       sync.Mutex
	sessions []string

	// Calls counts the tools/call requests it served; Cancelled the calls
	// of slow that ended by their cancellation; Deletes the DELETE
	// requests; Resumes the GET requests with Last-Event-ID; Connections
	// the TCP connections its server saw (ConnState).
	Calls, Cancelled, Deletes, Resumes, Connections atomic.Int64
	// Header is the last request's headers.
	lastHeader atomic.Pointer[http.Header]
	// failStatus is what the next failCount tools/call POST requests answer
	// (FailNext).
	failStatus atomic.Int64
	failCount  atomic.Int64
	// expire, when set, makes every known session unknown (404).
	expired map[string]bool
}

// New returns a test server named name.
func New(name string) *Server {
	s := &Server{Name: name, expired: map[string]bool{}, quit: make(chan struct{})}
	s.srv = s.mcpServer()
	return s
}

// Close ends every session the server has (their goroutines end), and
// the calls of slow.
func (s *Server) Close() {
	s.quitOnce.Do(func() { close(s.quit) })
	for ss := range s.srv.Sessions() {
		_ = ss.Close()
	}
}

// FailNext makes the next n tools/call POST requests answer status (a
// 5xx, say); other requests (a health ping, a list) are served, so that a
// test's call is the one that fails whatever the client sends meanwhile.
func (s *Server) FailNext(status, n int) {
	s.failStatus.Store(int64(status))
	s.failCount.Store(int64(n))
}

// ExpireSessions makes every session open now unknown: their requests get
// 404, as a server that expired them answers.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.sessions {
		s.expired[id] = true
	}
	for ss := range s.srv.Sessions() {
		if s.expired[ss.ID()] {
			_ = ss.Close()
		}
	}
}

// Handler serves the server in mode (ModeStreamable, ModeStateless,
// ModeSSE).
func (s *Server) Handler(mode string) http.Handler {
	getServer := func(*http.Request) *mcp.Server { return s.srv }
	var inner http.Handler
	switch mode {
	case ModeSSE:
		inner = mcp.NewSSEHandler(getServer, nil)
	case ModeStateless:
		inner = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	default:
		inner = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := s.failCount.Load(); r.Method == http.MethodPost && n > 0 && isToolCall(r) && s.failCount.CompareAndSwap(n, n-1) {
			status := int(s.failStatus.Load())
			http.Error(w, fmt.Sprintf("fakeremote: failing on purpose (%d)", status), status)
			return
		}
		h := r.Header.Clone()
		s.lastHeader.Store(&h)
		switch {
		case r.Method == http.MethodDelete:
			s.Deletes.Add(1)
		case r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "":
			s.Resumes.Add(1)
		}
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			s.mu.Lock()
			gone := s.expired[id]
			s.mu.Unlock()
			if gone {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		inner.ServeHTTP(&sessionWatch{ResponseWriter: w, s: s}, r)
	})
}

// LastHeader is the headers of the last request served.
func (s *Server) LastHeader() http.Header {
	if h := s.lastHeader.Load(); h != nil {
		return *h
	}
	return nil
}

// ConnState counts connections: an http.Server's ConnState hook.
func (s *Server) ConnState(_ net.Conn, st http.ConnState) {
	if st == http.StateNew {
		s.Connections.Add(1)
	}
}

// sessionWatch records the session ids the handler hands out.
type sessionWatch struct {
	http.ResponseWriter
	s    *Server
	seen bool
}

func (w *sessionWatch) WriteHeader(code int) {
	w.note()
	w.ResponseWriter.WriteHeader(code)
}

func (w *sessionWatch) Write(b []byte) (int, error) {
	w.note()
	return w.ResponseWriter.Write(b)
}

func (w *sessionWatch) note() {
	if w.seen {
		return
	}
	w.seen = true
	if id := w.Header().Get("Mcp-Session-Id"); id != "" {
		w.s.mu.Lock()
		w.s.sessions = append(w.s.sessions, id)
		w.s.mu.Unlock()
	}
}

func (w *sessionWatch) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *sessionWatch) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type textIn struct {
	Text string `json:"text,omitempty"`
}

type sizeIn struct {
	Bytes int `json:"bytes,omitempty"`
}

type stepsIn struct {
	Steps int `json:"steps,omitempty"`
	// DelayMs is the pause before each step.
	DelayMs int `json:"delay_ms,omitempty"`
}

type cutIn struct {
	// RetryMs is the retry delay the server names when it cuts the
	// stream.
	RetryMs int `json:"retry_ms,omitempty"`
}

// mcpServer is the MCP server: echo, big, steps (progress), slow (waits for
// its cancellation or its delay), cut (closes its stream after a progress
// report, then answers), ask (an elicitation), sample (a sampling request),
// headerecho (the request's configured header), and a resource.
func (s *Server) mcpServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: s.Name, Version: "1.0.0"}, &mcp.ServerOptions{Instructions: "A test server."})
	text := func(t string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: t}}}
	}
	count := func() { s.Calls.Add(1) }
	mcp.AddTool(srv, &mcp.Tool{Name: "echo", Description: "Echoes its text."}, func(_ context.Context, _ *mcp.CallToolRequest, in textIn) (*mcp.CallToolResult, any, error) {
		count()
		return text(s.Name + ": " + in.Text), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "big", Description: "Answers a text of the given size."}, func(_ context.Context, _ *mcp.CallToolRequest, in sizeIn) (*mcp.CallToolResult, any, error) {
		count()
		return text(strings.Repeat("x", in.Bytes)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "steps", Description: "Reports progress, then answers."}, func(ctx context.Context, req *mcp.CallToolRequest, in stepsIn) (*mcp.CallToolResult, any, error) {
		count()
		token := req.Params.GetProgressToken()
		for i := 1; i <= in.Steps; i++ {
			if in.DelayMs > 0 {
				select {
				case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			if token != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: float64(in.Steps), Message: fmt.Sprintf("step %d", i)})
			}
		}
		return text(fmt.Sprintf("%d steps", in.Steps)), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow", Description: "Waits its delay, or its cancellation."}, func(ctx context.Context, _ *mcp.CallToolRequest, in stepsIn) (*mcp.CallToolResult, any, error) {
		count()
		select {
		case <-time.After(time.Duration(in.DelayMs) * time.Millisecond):
			return text("slept"), nil, nil
		case <-s.quit:
			return nil, nil, errors.New("the server is closing")
		case <-ctx.Done():
			s.Cancelled.Add(1)
			return nil, nil, ctx.Err()
		}
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "cut", Description: "Closes its response stream, then answers."}, func(ctx context.Context, req *mcp.CallToolRequest, in cutIn) (*mcp.CallToolResult, any, error) {
		count()
		if token := req.Params.GetProgressToken(); token != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: 1, Message: "before the cut"})
		}
		if req.Extra != nil && req.Extra.CloseSSEStream != nil {
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: time.Duration(in.RetryMs) * time.Millisecond})
		}
		time.Sleep(50 * time.Millisecond)
		return text("answered after the cut"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "ask", Description: "Asks its client for a name."}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		count()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Your name?", RequestedSchema: map[string]any{
			"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}},
		}})
		if err != nil {
			return nil, nil, err
		}
		return text(fmt.Sprintf("%s: %v", res.Action, res.Content["name"])), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "headerecho", Description: "Answers the value of the request's X-Test header."}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		count()
		v := ""
		if req.Extra != nil && req.Extra.Header != nil {
			v = req.Extra.Header.Get("X-Test")
		}
		return text(v), nil, nil
	})
	region := &mcp.Tool{Name: "region", Description: "Answers the Mcp-Param-Region header.", InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}
	srv.AddTool(region, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		count()
		v := ""
		if req.Extra != nil && req.Extra.Header != nil {
			v = req.Extra.Header.Get("Mcp-Param-Region") + " " + req.Extra.Header.Get("Mcp-Name")
		}
		return text(v), nil
	})
	srv.AddResource(&mcp.Resource{URI: "test://hello", Name: "hello", MIMEType: "text/plain"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://hello", MIMEType: "text/plain", Text: "hello from " + s.Name}}}, nil
	})
	return srv
}

// isToolCall reports whether r, a POST, sends a tools/call; its body is
// put back for the handler.
func isToolCall(r *http.Request) bool {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string `json:"method"`
	}
	return err == nil && json.Unmarshal(body, &m) == nil && m.Method == "tools/call"
}
