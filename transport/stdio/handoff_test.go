package stdio_test

import (
	"context"
	"encoding/json"
	"errors"

	"io"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/stdio"
)

// handoffServer is a real runtime with three tools: echo, slow (returns
// when released) and stuck (returns only when its context ends).
func handoffServer(t *testing.T, release <-chan struct{}) *server.Server {
	t.Helper()
	srv, err := server.New(server.Options{Info: protocol.Implementation{Name: "t", Version: "1"}})
	if err != nil {
		t.Fatal(err)
	}
	text := func(s string) *server.CallToolResult {
		return &server.CallToolResult{Content: []server.Content{{Type: "text", Text: s}}}
	}
	srv.AddTool(&server.Tool{Name: "echo"}, func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
		var a struct{ Text string }
		_ = json.Unmarshal(req.Arguments, &a)
		return text(a.Text), nil
	})
	srv.AddTool(&server.Tool{Name: "slow"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		select {
		case <-release:
			return text("slow done"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	srv.AddTool(&server.Tool{Name: "stuck"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	return srv
}

// collect reads lines until it has one of each wanted line (in any order),
// failing on any other.
func collect(t *testing.T, r *lineSource, want ...string) {
	t.Helper()
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	for len(left) > 0 {
		l := r.next(t)
		if !left[l] {
			t.Fatalf("unexpected line %s\nstill waiting for %v", l, left)
		}
		delete(left, l)
	}
}

// A connection handed over pauses and continues in a new transport, with
// a new Reader, State and runtime (as a new process would have): admitted
// requests finish or, after the grace, are answered "snodod restarted;
// this request was cancelled"; the lines the client sent meanwhile are
// served by the successor; the legacy session and the listen stream go
// on, with no second initialize and no second acknowledgement.
func TestHandoffContinuesInANewTransport(t *testing.T) {
	onDevices(t, func(t *testing.T, open func(*testing.T) endpoints) {
		ep := open(t)
		defer ep.closeAll()
		release := make(chan struct{})
		oldSrv := handoffServer(t, release)
		exec, _ := executor.New(executor.Limits{})
		defer exec.Close()
		reader := stdio.NewReader(ep.in, 0)
		state := server.NewSessionState(0)
		defer state.Close()
		r := newLineSource(ep.r)
		old := &stdio.Transport{Reader: reader, Out: ep.out, Dispatcher: oldSrv, Executor: exec, State: state}
		old.Limits.UpgradeGrace = 300 * time.Millisecond
		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		served := make(chan error, 1)
		go func() { served <- old.Serve(ctx) }()

		io.WriteString(ep.w, initReq("2025-06-18")+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		r.next(t) // the initialize result
		io.WriteString(ep.w, listen("L")+"\n")
		if l := r.next(t); !strings.HasPrefix(l, ackPrefix) {
			t.Fatalf("want the acknowledgement, got %s", l)
		}
		io.WriteString(ep.w, lreq(1, "tools/call", map[string]any{"name": "slow", "arguments": map[string]any{}})+"\n"+
			lreq(2, "tools/call", map[string]any{"name": "stuck", "arguments": map[string]any{}})+"\n")
		eventually.True(t, "two running calls", func() bool { return exec.Stats().Running == 2 })

		cancel(stdio.ErrHandOver)
		// Sent during the pause: for the successor.
		io.WriteString(ep.w, lreq(3, "tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"text": "after"}})+"\n"+"partial")
		close(release)
		collect(t, r,
			`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"slow done"}],"isError":false}}`,
			errLine("2", -32603, "snodod restarted; this request was cancelled"))
		err := <-served
		var h *stdio.Handoff
		if !errors.As(err, &h) || !errors.Is(err, stdio.ErrHandOver) {
			t.Fatalf("Serve returned %v, want a *Handoff", err)
		}
		if len(h.Streams) != 1 || string(h.Streams[0].ID) != `"L"` || !h.Streams[0].Tools {
			t.Fatalf("handed-over streams %+v", h.Streams)
		}
		carry, err := reader.Detach()
		if err != nil {
			t.Fatal(err)
		}
		// What crosses to the new process is JSON.
		var back struct {
			Carry   stdio.Carry
			State   server.SessionSnapshot
			Streams []server.ListenRecord
		}
		b, _ := json.Marshal(map[string]any{"Carry": carry, "State": state.Snapshot(), "Streams": h.Streams})
		mustUnmarshal(t, b, &back)

		newSrv := handoffServer(t, nil)
		state2 := server.NewSessionState(0)
		defer state2.Close()
		if err := state2.Restore(back.State, newSrv); err != nil {
			t.Fatal(err)
		}
		reader2 := stdio.NewReaderFrom(ep.in, 0, back.Carry)
		defer reader2.Close()
		next := &stdio.Transport{Reader: reader2, Out: ep.out, Dispatcher: newSrv, Executor: exec, State: state2,
			Resume: &stdio.Resume{Streams: back.Streams}}
		ctx2, cancel2 := context.WithCancel(context.Background())
		served2 := make(chan error, 1)
		go func() { served2 <- next.Serve(ctx2) }()
		r.expectText(t, `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"after"}],"isError":false}}`)
		// The rest of the partial line, then a legacy request under the
		// version negotiated before the hand-over.
		io.WriteString(ep.w, ` line`+"\n"+lreq(4, "tools/list", map[string]any{})+"\n")
		r.expectText(t, errLine("null", -32700, "Parse error"))
		if l := r.next(t); !strings.HasPrefix(l, `{"jsonrpc":"2.0","id":4,"result":{"tools":[`) {
			t.Fatalf("want the tool list, got %s", l)
		}
		// Events: the listen stream's and the legacy session's.
		newSrv.RemoveTools("none")
		collect(t, r,
			`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}}`,
			`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)
		cancel2()
		r.expectText(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"L","reason":"Subscription closed by server"}}`)
		if err := <-served2; err != nil {
			t.Fatalf("the successor's Serve: %v", err)
		}
	})
}

// A resumed connection first answers the requests its predecessor lost
// (a crash), then reads.
func TestResumeAnswersLostRequests(t *testing.T) {
	ep := pipes(t)
	defer ep.closeAll()
	r := newLineSource(ep.r)
	tr := &stdio.Transport{In: ep.in, Out: ep.out, Dispatcher: handoffServer(t, nil),
		Resume: &stdio.Resume{Lost: []protocol.ID{protocol.IntID(7), protocol.StringID("x")},
			Streams: []server.ListenRecord{{ID: json.RawMessage(`"bad"`), Version: "1999-01-01"}}}}
	served := make(chan error, 1)
	go func() { served <- tr.Serve(context.Background()) }()
	r.expectText(t, errLine("7", -32603, "snodod restarted; this request was lost"))
	r.expectText(t, errLine(`"x"`, -32603, "snodod restarted; this request was lost"))
	r.expectText(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"bad","reason":"Subscription closed by server"}}`)
	ep.closeInput()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func (s *lineSource) expectText(t *testing.T, want string) {
	t.Helper()
	if got := s.next(t); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
