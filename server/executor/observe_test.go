package executor

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// ends is a server.Observer that hands each RequestEnd over.
type ends chan server.RequestEnd

func (e ends) RequestEnded(end server.RequestEnd) { e <- end }

// A request the client cancels is reported Cancelled to the runtime's
// Observer; one the executor's deadline ends, TimedOut: the runtime reads
// the executor's timeout from the handler's context.
func TestObserverCancelledAndTimedOut(t *testing.T) {
	s, err := server.New(server.Options{Info: protocol.Implementation{Name: "snodod", Version: "1.0.0"}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sess := server.NewSessionState(0)
	if _, _, perr := s.Initialize(sess, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)); perr != nil {
		t.Fatal(perr)
	}
	s.Notify(sess, "notifications/initialized", nil)
	rec := make(ends, 1)
	s.SetObserver(rec)
	started := make(chan struct{}, 1)
	s.AddTool(&server.Tool{Name: "block"}, func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	last := func() server.RequestEnd {
		t.Helper()
		select {
		case e := <-rec:
			return e
		case <-time.After(wait):
			t.Fatal("the observer was not told")
			return server.RequestEnd{}
		}
	}
	req := &server.Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(`{"name":"block","arguments":{}}`), State: sess,
		Header: map[string][]string{server.HeaderProtocolVersion: {"2025-11-25"}}}
	serve := func(ctx context.Context) server.Outcome { return s.Dispatch(ctx, req) }

	conn := newExec(t, Limits{RequestTimeout: time.Hour}).Conn()
	if err := conn.Submit(context.Background(), req.ID, serve, func(server.Outcome) {}); err != nil {
		t.Fatal(err)
	}
	<-started
	conn.Cancel(req.ID)
	if e := last(); !e.Cancelled || e.TimedOut || e.Item != "block" {
		t.Errorf("cancelled: %+v", e)
	}

	short := newExec(t, Limits{RequestTimeout: time.Millisecond})
	if err := short.Conn().Submit(context.Background(), req.ID, serve, func(server.Outcome) {}); err != nil {
		t.Fatal(err)
	}
	<-started
	if e := last(); !e.TimedOut || e.Cancelled {
		t.Errorf("timed out: %+v", e)
	}
}
