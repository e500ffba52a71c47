package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// testCatalog is the test catalog of docs/transport.md §16: small controllable
// handlers behind the real dispatch interface. It speaks no MCP dialect; it
// reports the Mcp-Protocol-Version header it was given so tests can check
// the transport's header injection.
type testCatalog struct {
	release  chan struct{} // closed to release every block handler
	started  chan string   // the id of each block handler that started
	seen     chan error    // progress results seen by progress handlers
	ctxEnded chan string   // ids whose context ended while blocked
	ran      sync.Map      // ids of handlers that ran
	sources  chan *testSource

	releaseOnce sync.Once
}

func newTestCatalog() *testCatalog {
	return &testCatalog{
		release:  make(chan struct{}),
		started:  make(chan string, 1000),
		seen:     make(chan error, 5000),
		ctxEnded: make(chan string, 1000),
		sources:  make(chan *testSource, 100),
	}
}

func (tc *testCatalog) Release() { tc.releaseOnce.Do(func() { close(tc.release) }) }

var errNoDialect = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "No configured protocol dialect recognized the request. Send initialize first (or use 2026-07-28 _meta)"}

func (tc *testCatalog) Notify(*server.SessionState, string, json.RawMessage) {}

// DispatchInline serves nothing inline: every request takes the executor.
func (tc *testCatalog) DispatchInline(context.Context, *server.Request) (server.Outcome, bool) {
	return server.Outcome{}, false
}

func (tc *testCatalog) Initialize(_ *server.SessionState, params json.RawMessage) (any, string, *protocol.Error) {
	var p struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      *struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		} `json:"clientInfo"`
	}
	if json.Unmarshal(params, &p) != nil || p.ProtocolVersion == "" || len(p.Capabilities) == 0 ||
		p.ClientInfo == nil || p.ClientInfo.Name == nil || p.ClientInfo.Version == nil {
		return nil, "", &protocol.Error{Code: protocol.CodeInvalidParams, Message: "initialize requires protocolVersion, capabilities and clientInfo name/version"}
	}
	if *p.ClientInfo.Name == "panic" {
		panic("initialize failed") // on the coordinator: the instance fails
	}
	v := p.ProtocolVersion
	if v != "2025-06-18" && v != "2025-11-25" {
		v = "2025-11-25"
	}
	return map[string]any{"protocolVersion": v, "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "test", "version": "1"}}, v, nil
}

type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	URI       string          `json:"uri"`
	Meta      map[string]any  `json:"_meta"`
}

type toolArgs struct {
	Text    string    `json:"text"`
	DelayMs int       `json:"delayMs"`
	Ms      int       `json:"ms"`
	N       int       `json:"n"`
	Finish  string    `json:"finish"`
	Values  []float64 `json:"values"`
	Bytes   int       `json:"bytes"`
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": false}
}

func (tc *testCatalog) Dispatch(ctx context.Context, req *server.Request) server.Outcome {
	var p callParams
	if req.Params != nil {
		if err := json.Unmarshal(req.Params, &p); err != nil {
			return server.Outcome{Err: &protocol.Error{Code: protocol.CodeInvalidParams, Message: err.Error()}}
		}
	}
	modern := p.Meta != nil && p.Meta["io.modelcontextprotocol/protocolVersion"] != nil
	version := req.Header.Get(server.HeaderProtocolVersion)
	if !modern && version == "" && req.Method != "ping" {
		return server.Outcome{Err: errNoDialect}
	}
	tc.ran.Store(req.ID, true)
	switch req.Method {
	case "ping":
		return server.Outcome{Result: map[string]any{}}
	case "tools/list":
		return server.Outcome{Result: map[string]any{"tools": []any{}, "headerVersion": version, "modern": modern}}
	case "resources/read":
		if p.URI == "test://panic" {
			panic("read handler panicked")
		}
		return server.Outcome{Err: &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Resource not found"}}
	case "subscriptions/listen":
		s := newTestSource()
		tc.sources <- s
		return server.Outcome{Stream: s}
	case "tools/call":
		return tc.call(ctx, req, p)
	}
	return server.Outcome{Err: &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: " + req.Method}}
}

func (tc *testCatalog) call(ctx context.Context, req *server.Request, p callParams) (out server.Outcome) {
	var a toolArgs
	if p.Arguments != nil {
		_ = json.Unmarshal(p.Arguments, &a)
	}
	defer func() {
		if r := recover(); r != nil {
			out = server.Outcome{Err: protocol.ErrToolPanicked}
		}
	}()
	switch p.Name {
	case "echo":
		if a.DelayMs > 0 {
			select {
			case <-time.After(time.Duration(a.DelayMs) * time.Millisecond):
			case <-ctx.Done():
				return server.Outcome{Err: protocol.ErrTimedOut}
			}
		}
		return server.Outcome{Result: text(a.Text)}
	case "big":
		return server.Outcome{Result: text(string(make([]byte, a.Bytes)))}
	case "failing":
		return server.Outcome{Result: map[string]any{"content": []any{map[string]any{"type": "text", "text": "Actionable domain failure"}}, "isError": true}}
	case "raising":
		panic("tool failed")
	case "unencodable":
		return server.Outcome{Result: map[string]any{"x": func() {}}}
	case "block":
		tc.started <- req.ID.String()
		select {
		case <-tc.release:
			return server.Outcome{Result: text("released")}
		case <-ctx.Done():
			tc.ctxEnded <- req.ID.String()
			return server.Outcome{Err: protocol.ErrTimedOut}
		}
	case "stubborn":
		time.Sleep(time.Duration(a.Ms) * time.Millisecond)
		return server.Outcome{Result: text("stubborn")}
	case "progress":
		tc.seen <- server.ReportProgress(ctx, server.Progress{Progress: 0, Total: 1, HasTotal: true, Message: "starting"})
		tc.seen <- server.ReportProgress(ctx, server.Progress{Progress: 0.5, Total: 1, HasTotal: true})
		switch a.Finish {
		case "error":
			return server.Outcome{Err: &protocol.Error{Code: protocol.CodeInternalError, Message: "progress failed"}}
		case "input_required":
			return server.Outcome{Result: map[string]any{"resultType": "input_required", "requestState": "s"}}
		case "block":
			<-ctx.Done()
			tc.ctxEnded <- req.ID.String()
			return server.Outcome{Result: text("too late")}
		}
		return server.Outcome{Result: text("complete")}
	case "counter":
		for i := 1; i <= a.N; i++ {
			if err := server.ReportProgress(ctx, server.Progress{Progress: float64(i)}); err != nil {
				tc.seen <- err
			}
		}
		return server.Outcome{Result: text(fmt.Sprint(a.N))}
	case "invalid_reports":
		for _, p := range []server.Progress{
			{Progress: math.NaN()},
			{Progress: 1, Total: math.Inf(1), HasTotal: true},
			{Progress: 1, Message: strings.Repeat("m", 4097)},
			{Progress: 1, Message: "bad \xff utf-8"},
			{Progress: 1, Message: strings.Repeat("m", 4096)},
		} {
			tc.seen <- server.ReportProgress(ctx, p)
		}
		return server.Outcome{Result: text("reported")}
	case "concurrent_reports":
		// The first report waits for a stalled device; a second one from
		// another goroutine meanwhile is busy.
		first := make(chan error, 1)
		go func() { first <- server.ReportProgress(ctx, server.Progress{Progress: 1}) }()
		time.Sleep(100 * time.Millisecond)
		tc.seen <- server.ReportProgress(ctx, server.Progress{Progress: 2})
		tc.seen <- <-first
		return server.Outcome{Result: text("reported")}
	case "legacy_progress":
		tc.seen <- server.ReportProgress(ctx, server.Progress{Progress: 1, Total: 2, HasTotal: true, Message: "halfway"})
		return server.Outcome{Result: text("legacy")}
	case "sequence":
		for _, v := range a.Values {
			tc.seen <- server.ReportProgress(ctx, server.Progress{Progress: v})
		}
		return server.Outcome{Result: text("sequence")}
	}
	return server.Outcome{Err: &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Unknown tool: " + p.Name}}
}

// testSource is a subscription source the test drives.
type testSource struct {
	events chan server.Event
	fail   chan error
	closed chan closeInfo
	asked  chan struct{} // one value each time Next is called
}

type closeInfo struct {
	reason server.CloseReason
	detail string
}

func newTestSource() *testSource {
	return &testSource{
		events: make(chan server.Event, 100),
		fail:   make(chan error, 1),
		closed: make(chan closeInfo, 1),
		asked:  make(chan struct{}, 1000),
	}
}

func (s *testSource) Ack() any {
	return map[string]any{"notifications": map[string]any{"toolsListChanged": true}}
}

func (s *testSource) Next(ctx context.Context) (server.Event, error) {
	s.asked <- struct{}{}
	select {
	case ev := <-s.events:
		return ev, nil
	case err := <-s.fail:
		return server.Event{}, err
	case <-ctx.Done():
		return server.Event{}, ctx.Err()
	}
}

func (s *testSource) Close(reason server.CloseReason, detail string) {
	select {
	case s.closed <- closeInfo{reason, detail}:
	default:
		panic("testSource closed twice")
	}
}

var errSourceFailed = errors.New("source failed")
