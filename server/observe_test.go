package server

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
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

// starterRecorder is a RequestStarter: it keeps what it was told of each
// start and serves the request under a context of its own.
type starterRecorder struct {
	*endRecorder
	starts []RequestStart
	traces []string // each start's _meta.traceparent
}

type startKey struct{}

func (r *starterRecorder) RequestStarted(ctx context.Context, s *RequestStart) context.Context {
	raw, _ := s.Meta.Get("traceparent")
	tp, _ := protocol.String(raw)
	r.mu.Lock()
	r.starts = append(r.starts, *s)
	r.traces = append(r.traces, tp)
	r.mu.Unlock()
	return context.WithValue(ctx, startKey{}, s.Method)
}

// A RequestStarter is told of the start with the request's _meta, its
// context reaches the handler (which still has the runtime's own values),
// and comes back with the end.
func TestRequestStarter(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var seen any
	AddTool(s, &Tool{Name: "echo"}, func(ctx context.Context, _ *CallToolRequest, _ struct{}) (*CallToolResult, any, error) {
		seen = ctx.Value(startKey{})
		Log(ctx, "info", "still legacy", nil) // the call's own context is below the starter's
		return &CallToolResult{}, nil, nil
	})
	r := &starterRecorder{endRecorder: newEndRecorder()}
	s.SetObserver(r)
	sess := NewSessionState(0)
	sess.SetCaller(&Caller{View: "v", Kind: "socket"})
	sess.SetNegotiated(protocol.Version20250618)
	msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`))
	req := &Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess,
		Header: map[string][]string{HeaderProtocolVersion: {protocol.Version20250618}}}
	if out := s.Dispatch(context.Background(), req); out.Err != nil {
		t.Fatal(out.Err)
	}
	e := r.last(t)
	if len(r.starts) != 1 || r.starts[0].Method != "tools/call" || r.starts[0].Modern || r.starts[0].Session != sess ||
		r.traces[0] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("starts %+v, traceparents %q", r.starts, r.traces)
	}
	if seen != "tools/call" {
		t.Errorf("the handler's context has %v of the starter's", seen)
	}
	if e.Context == nil || e.Context.Value(startKey{}) != "tools/call" || e.Item != "echo" {
		t.Errorf("the end has context %v, item %q", e.Context, e.Item)
	}
}

// An Observer that is not a RequestStarter (the metrics alone, tracing
// off) costs the dispatch no allocation, as no Observer does.
func TestObserverAllocs(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	AddTool(s, &Tool{Name: "echo"}, func(context.Context, *CallToolRequest, struct{}) (*CallToolResult, any, error) {
		return &CallToolResult{}, nil, nil
	})
	msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	sess := NewSessionState(0)
	sess.SetNegotiated(protocol.Version20250618)
	req := &Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess,
		Header: map[string][]string{HeaderProtocolVersion: {protocol.Version20250618}}}
	allocs := func() float64 {
		return testing.AllocsPerRun(200, func() {
			if o := s.Dispatch(context.Background(), req); o.Err != nil {
				t.Fatal(o.Err)
			}
		})
	}
	none := allocs()
	s.SetObserver(nopObserver{})
	observed := allocs()
	var st RequestStarter = &nopStarter{}
	s.SetObserver(st)
	started := allocs()
	if observed != none {
		t.Errorf("a dispatch allocates %v times with an Observer, %v without", observed, none)
	}
	if started < none {
		t.Errorf("a RequestStarter's dispatch allocates %v times, fewer than %v", started, none)
	}
	t.Logf("allocations per dispatch: %v without an Observer, %v with one, %v with a RequestStarter", none, observed, started)
}

type nopStarter struct{ nopObserver }

func (*nopStarter) RequestStarted(ctx context.Context, _ *RequestStart) context.Context { return ctx }

// idleRecorder is an endRecorder that is an Idler, idle while idle is
// set.
type idleRecorder struct {
	*endRecorder
	idle atomic.Bool
}

func (r *idleRecorder) Idle() bool { return r.idle.Load() }

// An idle Observer is not told of the requests that start while it is
// idle, and is of those after it stops being idle: the audit log's sink,
// off and then turned on by a reload, while the server serves.
func TestIdleObserver(t *testing.T) {
	h := newRelayHarness(t)
	rec := &idleRecorder{endRecorder: newEndRecorder()}
	rec.idle.Store(true)
	h.s.SetObserver(rec)
	h.s.AddTool(&Tool{Name: "own"}, func(context.Context, *CallToolRequest) (*CallToolResult, error) {
		return &CallToolResult{}, nil
	})
	h.legacy("tools/call", `{"name":"own","arguments":{}}`)
	h.modern("tools/call", `"name":"own","arguments":{}`)
	rec.mu.Lock()
	told := len(rec.ends)
	rec.mu.Unlock()
	if told != 0 {
		t.Fatalf("an idle Observer was told of %d requests", told)
	}
	rec.idle.Store(false)
	h.legacy("tools/call", `{"name":"own","arguments":{}}`)
	if e := rec.last(t); e.Method != "tools/call" || e.Item != "own" || e.Duration <= 0 || e.End.IsZero() {
		t.Errorf("once active: %+v", e)
	}
}

// An idle Observer costs a dispatch no allocation either.
func TestIdleObserverAllocs(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	AddTool(s, &Tool{Name: "echo"}, func(context.Context, *CallToolRequest, struct{}) (*CallToolResult, any, error) {
		return &CallToolResult{}, nil, nil
	})
	msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`))
	sess := NewSessionState(0)
	sess.SetNegotiated(protocol.Version20250618)
	req := &Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess,
		Header: map[string][]string{HeaderProtocolVersion: {protocol.Version20250618}}}
	none := testing.AllocsPerRun(200, func() { s.Dispatch(context.Background(), req) })
	var o idleCounter
	s.SetObserver(&o)
	idle := testing.AllocsPerRun(200, func() { s.Dispatch(context.Background(), req) })
	if idle != none || o.told.Load() != 0 {
		t.Errorf("with an idle Observer a dispatch allocates %v times (%v without) and told it %d times", idle, none, o.told.Load())
	}
}

// idleCounter is an always idle Observer that counts what it is told.
type idleCounter struct{ told atomic.Int64 }

func (o *idleCounter) RequestEnded(RequestEnd) { o.told.Add(1) }
func (o *idleCounter) Idle() bool              { return true }
