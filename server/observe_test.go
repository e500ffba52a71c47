package server

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/protocol"
)

// endRecorder is an Observer that keeps what it was told.
type endRecorder struct {
	mu   sync.Mutex
	ends []RequestEnd
	got  chan struct{}
}

func newEndRecorder() *endRecorder { return &endRecorder{got: make(chan struct{}, 16)} }

func (r *endRecorder) RequestEnded(e RequestEnd) {
	r.mu.Lock()
	r.ends = append(r.ends, e)
	r.mu.Unlock()
	r.got <- struct{}{}
}

func (r *endRecorder) last(t *testing.T) RequestEnd {
	t.Helper()
	select {
	case <-r.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the observer was not told")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ends[len(r.ends)-1]
}

// The Observer is told each request's method, the catalog name it was
// for, the relayed item's owner and the error answered; an unknown name
// is not labelled (docs/observability.md: bounded labels).
func TestObserverOutcomes(t *testing.T) {
	h := newRelayHarness(t)
	rec := newEndRecorder()
	h.s.SetObserver(rec)
	h.s.AddTool(&Tool{Name: "own"}, func(context.Context, *CallToolRequest) (*CallToolResult, error) {
		return &CallToolResult{}, nil
	})
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": {
		Tools:     []RawTool{{Name: "up__t", Definition: json.RawMessage(`{"name":"t","inputSchema":{"type":"object"}}`), Handler: echoRelay(`{"content":[]}`)}},
		Resources: []RawResource{{URI: "file:///a", Definition: json.RawMessage(`{"uri":"file:///a","name":"a"}`), Handler: echoRelay(`{"contents":[]}`)}},
	}})

	h.legacy("tools/call", `{"name":"own","arguments":{}}`)
	if e := rec.last(t); e.Method != "tools/call" || e.Item != "own" || e.Relayed || e.Owner != "" || e.Err != nil || e.Cancelled || e.TimedOut || e.Modern {
		t.Errorf("own tool: %+v", e)
	}
	h.modern("tools/call", `"name":"up__t","arguments":{}`)
	if e := rec.last(t); e.Item != "up__t" || !e.Relayed || e.Owner != "up" || e.Err != nil || !e.Modern || e.UpstreamDuration <= 0 || e.Duration < e.UpstreamDuration {
		t.Errorf("relayed tool: %+v", e)
	}
	h.legacy("resources/read", `{"uri":"file:///a"}`)
	if e := rec.last(t); e.Method != "resources/read" || e.Item != "" || !e.Relayed || e.Owner != "up" {
		t.Errorf("relayed read: %+v", e)
	}
	h.legacy("tools/call", `{"name":"nope","arguments":{}}`)
	if e := rec.last(t); e.Item != "" || e.Err == nil || e.Err.Code != protocol.CodeInvalidParams {
		t.Errorf("unknown tool: %+v", e)
	}
	h.legacy("no/such", `{}`)
	if e := rec.last(t); e.Method != "no/such" || e.Err == nil || e.Err.Code != protocol.CodeMethodNotFound {
		t.Errorf("unknown method: %+v", e)
	}
	h.s.SetObserver(nil)
	h.legacy("ping", `{}`)
	select {
	case <-rec.got:
		t.Error("told after SetObserver(nil)")
	default:
	}
}

// A request the client cancels is reported Cancelled; one the
// executor's deadline ends, TimedOut.
func TestObserverCancelledAndTimedOut(t *testing.T) {
	h := newRelayHarness(t)
	rec := newEndRecorder()
	h.s.SetObserver(rec)
	started := make(chan struct{}, 1)
	h.s.AddTool(&Tool{Name: "block"}, func(ctx context.Context, _ *CallToolRequest) (*CallToolResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	exec := newExec(t, ExecutorLimits{RequestTimeout: time.Hour})
	conn := exec.Conn()
	req := &Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(`{"name":"block","arguments":{}}`), State: h.sess,
		Header: map[string][]string{HeaderProtocolVersion: {"2025-11-25"}}}
	serve := func(ctx context.Context) Outcome { return h.s.Dispatch(ctx, req) }
	if err := conn.Submit(context.Background(), req.ID, serve, func(Outcome) {}); err != nil {
		t.Fatal(err)
	}
	<-started
	conn.Cancel(req.ID)
	if e := rec.last(t); !e.Cancelled || e.TimedOut || e.Item != "block" {
		t.Errorf("cancelled: %+v", e)
	}

	short := newExec(t, ExecutorLimits{RequestTimeout: time.Millisecond})
	if err := short.Conn().Submit(context.Background(), req.ID, serve, func(Outcome) {}); err != nil {
		t.Fatal(err)
	}
	<-started
	if e := rec.last(t); !e.TimedOut || e.Cancelled {
		t.Errorf("timed out: %+v", e)
	}
}
