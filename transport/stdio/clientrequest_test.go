//lint:file-ignore SA1019 snodod serves the roots and sampling features the SDK deprecates (SEP-2577).

package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// Requests from snodod to legacy clients (docs/protocol.md §3.1, docs/transport.md
// §7.1), over real pipes and sockets, with the official Go SDK client as
// the peer where it fits, and raw lines where the test must see or withhold
// what the client answers.

// askServer is a runtime whose tools ask the client. Each handler reports
// on returned when it has returned, so tests see that no handler hangs.
type askServer struct {
	srv      *server.Server
	returned chan error
}

func newAskServer(t *testing.T) *askServer {
	t.Helper()
	srv, err := server.New(server.Options{Logger: discardLog})
	if err != nil {
		t.Fatal(err)
	}
	a := &askServer{srv: srv, returned: make(chan error, 100)}
	tool := func(name string, h func(ctx context.Context, args json.RawMessage) (string, error)) {
		srv.AddTool(&server.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
				text, err := h(ctx, req.Arguments)
				a.returned <- err
				if err != nil {
					return nil, err
				}
				return textResult(text), nil
			})
	}
	tool("ask_elicit", func(ctx context.Context, _ json.RawMessage) (string, error) {
		r, err := server.Elicit(ctx, "name", server.ElicitParams{Message: "Your name?",
			RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("elicited %s %v", r.Action, r.Content["name"]), nil
	})
	tool("ask_sample", func(ctx context.Context, _ json.RawMessage) (string, error) {
		r, err := server.Sample(ctx, "s", server.CreateMessageParams{MaxTokens: 10,
			Messages: []server.SamplingMessage{{Role: "user", Content: server.TextContent("Say hi")}}})
		if err != nil {
			return "", err
		}
		return "sampled " + r.Role + " " + r.Model + " " + string(r.Content), nil
	})
	tool("ask_roots", func(ctx context.Context, _ json.RawMessage) (string, error) {
		r, err := server.ListRoots(ctx, "r")
		if err != nil {
			return "", err
		}
		var uris []string
		for _, root := range r.Roots {
			uris = append(uris, root.URI)
		}
		return "roots " + strings.Join(uris, ","), nil
	})
	// ask_many sends n requests to the client at once.
	tool("ask_many", func(ctx context.Context, args json.RawMessage) (string, error) {
		var in struct{ N int }
		if err := json.Unmarshal(args, &in); err != nil {
			return "", err
		}
		var wg sync.WaitGroup
		errs := make([]error, in.N)
		for i := range in.N {
			wg.Go(func() { _, errs[i] = server.RequestClient(ctx, "roots/list", struct{}{}) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
		return fmt.Sprintf("%d answered", in.N), nil
	})
	return a
}

// serveAsk serves a on a fresh device from open, with the executor limits
// l, and returns the device and a function that ends the connection and
// checks Serve returned and no goroutine leaked.
func serveAsk(t *testing.T, a *askServer, open func(*testing.T) endpoints, l executor.Limits) (endpoints, func()) {
	t.Helper()
	ep := open(t)
	exec, err := executor.New(l)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: a.srv, Executor: exec, Logger: discardLog}
	go func() { served <- tr.Serve(context.Background()) }()
	var once sync.Once
	end := func() {
		once.Do(func() {
			ep.closeInput()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve returned %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Serve did not return within 10s of the end of input")
			}
			ep.closeAll()
			exec.Close()
			goleak.VerifyNone(t)
		})
	}
	t.Cleanup(end)
	return ep, end
}

// sdkTransport gives the Go SDK client the test's ends of the device.
func sdkTransport(ep endpoints) mcp.Transport {
	return &mcp.IOTransport{Reader: ep.r.(io.ReadCloser), Writer: ep.w.(io.WriteCloser)}
}

func callText(t *testing.T, cs *mcp.ClientSession, name string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

var legacyVersions = []string{protocol.Version20250618, protocol.Version20251125}

// A handler's Elicit, Sample and ListRoots reach the Go SDK client, and its
// answers come back to the handler, at both legacy versions, on pipes and
// sockets.
func TestClientRequestsGoSDK(t *testing.T) {
	for _, version := range legacyVersions {
		t.Run(version, func(t *testing.T) {
			onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
				a := newAskServer(t)
				ep, end := serveAsk(t, a, open, executor.Limits{})
				client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
					Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}},
					ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada " + req.Params.Message}}, nil
					},
					CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
						return &mcp.CreateMessageResult{Role: "assistant", Model: "m1", Content: &mcp.TextContent{Text: "hi"}}, nil
					},
				})
				client.AddRoots(&mcp.Root{URI: "file:///work", Name: "work"})
				cs, err := client.Connect(context.Background(), sdkTransport(ep), &mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer end()
				defer cs.Close()
				for name, want := range map[string]string{
					"ask_elicit": "elicited accept Ada Your name?",
					"ask_sample": `sampled assistant m1 {"type":"text","text":"hi"}`,
					"ask_roots":  "roots file:///work",
				} {
					if got, isErr := callText(t, cs, name); got != want || isErr {
						t.Errorf("%s = %q (isError %v), want %q", name, got, isErr, want)
					}
				}
			})
		})
	}
}

// A client that did not declare sampling is sent nothing: the call is
// answered -32603 "Client does not support sampling/createMessage" (the
// SDK would have answered a request it has no handler for with an error
// of its own).
func TestClientRequestsMissingCapability(t *testing.T) {
	for _, version := range legacyVersions {
		t.Run(version, func(t *testing.T) {
			a := newAskServer(t)
			ep, end := serveAsk(t, a, socketPair, executor.Limits{})
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				Capabilities: &mcp.ClientCapabilities{},
			})
			cs, err := client.Connect(context.Background(), sdkTransport(ep), &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer end()
			defer cs.Close()
			_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "ask_sample", Arguments: map[string]any{}})
			if err == nil || !strings.Contains(err.Error(), "Client does not support sampling/createMessage") {
				t.Fatalf("call: %v, want -32603 Client does not support sampling/createMessage", err)
			}
			if err := <-a.returned; !errors.Is(err, server.ErrMissingClientCapability) {
				t.Errorf("the handler got %v, want ErrMissingClientCapability", err)
			}
		})
	}
}

// Cancelling the originating request, or its deadline passing, sends
// notifications/cancelled for the request to the client (the SDK then
// cancels its handler's context) and unblocks the handler.
func TestClientRequestsCancelled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
	}{{"client cancels", 0}, {"deadline", 300 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAskServer(t)
			ep, end := serveAsk(t, a, socketPair, executor.Limits{RequestTimeout: tc.timeout})
			asked, handlerDone := make(chan struct{}), make(chan error, 1)
			client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ClientOptions{
				ElicitationHandler: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					close(asked)
					select {
					case <-ctx.Done(): // notifications/cancelled for it arrived
						handlerDone <- nil
					case <-time.After(10 * time.Second):
						handlerDone <- errors.New("the client's handler was never cancelled")
					}
					return nil, ctx.Err()
				},
			})
			cs, err := client.Connect(context.Background(), sdkTransport(ep), &mcp.ClientSessionOptions{ProtocolVersion: protocol.Version20251125})
			if err != nil {
				t.Fatal(err)
			}
			defer end()
			defer cs.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			callErr := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask_elicit", Arguments: map[string]any{}})
				callErr <- err
			}()
			<-asked
			if tc.timeout == 0 {
				cancel()
			}
			if err := <-handlerDone; err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-a.returned:
				if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the tool's Elicit returned %v, want its context's error", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the tool handler did not return")
			}
			err = <-callErr
			if tc.timeout != 0 && (err == nil || !strings.Contains(err.Error(), "Request execution timed out")) {
				t.Errorf("call: %v, want Request execution timed out", err)
			}
		})
	}
}

// rawSession is a legacy session driven line by line: the test sees each
// request snodod sends and answers it, or not, itself.
type rawSession struct {
	t   *testing.T
	ep  endpoints
	out *lineSource
}

func (s *rawSession) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.ep.w, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
}

// initialize negotiates 2025-11-25 declaring caps and reads the answer.
func (s *rawSession) initialize(caps string) {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"t","version":"1"}}}`)
	if l := s.out.next(s.t); !strings.Contains(l, `"id":"init","result"`) {
		s.t.Fatalf("initialize: %s", l)
	}
}

// At most server.MaxClientRequests requests to the client are outstanding
// on a session: the 17th is sent only once one of the 16 is answered.
func TestClientRequestsCap(t *testing.T) {
	a := newAskServer(t)
	ep, end := serveAsk(t, a, socketPair, executor.Limits{})
	defer end()
	s := &rawSession{t: t, ep: ep, out: newLineSource(ep.r)}
	s.initialize(`{"roots":{}}`)
	const n = server.MaxClientRequests + 1
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_many","arguments":{"n":%d}}}`, n))
	ids := map[string]bool{}
	for range server.MaxClientRequests {
		m := parse(t, s.out.next(t))
		id, _ := protocol.String(m.ID)
		if m.Method != "roots/list" || !strings.HasPrefix(id, "snodod:") || ids[id] {
			t.Fatalf("want a new roots/list request, got %+v", m)
		}
		ids[id] = true
	}
	select {
	case l := <-s.out.ch:
		t.Fatalf("a request beyond the %d outstanding: %s", server.MaxClientRequests, l)
	case <-time.After(300 * time.Millisecond):
	}
	answer := func(id string) { s.send(`{"jsonrpc":"2.0","id":"` + id + `","result":{"roots":[]}}`) }
	var first string
	for id := range ids {
		first = id
		break
	}
	answer(first)
	last := parse(t, s.out.next(t))
	lastID, _ := protocol.String(last.ID)
	if last.Method != "roots/list" || ids[lastID] {
		t.Fatalf("after one answer, want the last request, got %+v", last)
	}
	delete(ids, first)
	ids[lastID] = true
	for id := range ids {
		answer(id)
	}
	if l := s.out.next(t); !strings.Contains(l, `"id":1,"result"`) || !strings.Contains(l, fmt.Sprintf("%d answered", n)) {
		t.Fatalf("the call: %s", l)
	}
}

// A session restart while a handler waits for the client: the handler gets
// an error at once (never a hang), the request is answered "Session closed
// by server", the new instance drops the late answer, and ids go on
// counting on the connection.
func TestClientRequestsRestart(t *testing.T) {
	a := newAskServer(t)
	ep := pipes(t)
	exec, err := executor.New(executor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(faults.Arm())
	reader, state := stdio.NewReader(ep.in, 0), server.NewSessionState(0)
	point := faults.New(state, nil)
	t.Cleanup(func() {
		point.Release()
		reader.Close()
		state.Close()
		ep.closeAll()
		exec.Close()
		goleak.VerifyNone(t)
	})
	serve := func() chan error {
		tr := &stdio.Transport{Reader: reader, Out: ep.out, Dispatcher: a.srv, Executor: exec, State: state, Logger: discardLog}
		done := make(chan error, 1)
		go func() { done <- tr.Serve(faults.With(context.Background(), point)) }()
		return done
	}
	s := &rawSession{t: t, ep: ep, out: newLineSource(ep.r)}
	first := serve()
	s.initialize(`{"elicitation":{}}`)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_elicit","arguments":{}}}`)
	if m := parse(t, s.out.next(t)); m.Method != "elicitation/create" || string(m.ID) != `"snodod:1"` {
		t.Fatalf("want elicitation/create snodod:1, got %+v", m)
	}
	faults.Inject(state)
	// The failed instance cancels what the call had asked of the client,
	// then answers the call.
	if l := s.out.next(t); l != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"snodod:1","reason":"Request ended"}}` {
		t.Fatalf("want the client request cancelled, got %s", l)
	}
	if l := s.out.next(t); l != `{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Session closed by server"}}` {
		t.Fatalf("the call in flight: %s", l)
	}
	if err := <-first; !errors.Is(err, stdio.ErrSessionFailed) {
		t.Fatalf("the failed instance returned %v", err)
	}
	select {
	case err := <-a.returned:
		if err == nil {
			t.Error("the handler's Elicit succeeded across a restart")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler waiting on the client hung across the restart")
	}
	second := serve()
	s.send(`{"jsonrpc":"2.0","id":"snodod:1","result":{"action":"accept","content":{"name":"late"}}}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask_elicit","arguments":{}}}`)
	m := parse(t, s.out.next(t))
	if m.Method != "elicitation/create" || string(m.ID) != `"snodod:2"` {
		t.Fatalf("after the restart want elicitation/create snodod:2 (ids never reused), got %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":"snodod:2","result":{"action":"accept","content":{"name":"Bo"}}}`)
	if l := s.out.next(t); !strings.Contains(l, `"id":2,"result"`) || !strings.Contains(l, "elicited accept Bo") {
		t.Fatalf("the call after the restart: %s", l)
	}
	<-a.returned
	ep.closeInput()
	if err := <-second; err != nil {
		t.Fatalf("the second instance returned %v", err)
	}
}

// End of input while a handler waits for the client: it can no longer
// answer, so the handler gets an error at once and its call is answered.
func TestClientRequestsEndOfInput(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		a := newAskServer(t)
		ep, end := serveAsk(t, a, open, executor.Limits{})
		s := &rawSession{t: t, ep: ep, out: newLineSource(ep.r)}
		s.initialize(`{"elicitation":{}}`)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ask_elicit","arguments":{}}}`)
		if m := parse(t, s.out.next(t)); m.Method != "elicitation/create" {
			t.Fatalf("want elicitation/create, got %+v", m)
		}
		ep.closeInput()
		if l := s.out.next(t); !strings.Contains(l, `"id":1,"result"`) || !strings.Contains(l, `"isError":true`) {
			t.Fatalf("the call after EOF: %s", l)
		}
		if err := <-a.returned; err == nil {
			t.Error("Elicit succeeded after EOF")
		}
		end()
	})
}
