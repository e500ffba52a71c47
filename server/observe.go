package server

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server/internal/ctxkey"
)

// Observer is told of every request Dispatch served, when its handler
// returned: the one hook of the daemon's metrics (docs/observability.md).
// RequestEnded is called on the worker that served the request, once per
// request, possibly from many goroutines at once; it must not block. e
// is passed by value so that telling costs no allocation.
//
// Requests answered before Dispatch (the executor's refusals, a
// malformed line) and the runtime's inline methods (architecture.md §4.1)
// are not seen.
type Observer interface {
	RequestEnded(e RequestEnd)
}

// RequestEnd is what an Observer is told of one request. Its first fields
// hold no argument values and no session id: only names the catalog
// bounds (what metrics may label with). Params, State and ClientInfo are
// the request's own, for the audit log alone.
type RequestEnd struct {
	// Method is the request's method, as sent: the runtime answers an
	// unknown one with -32601 before anything else.
	Method string
	// Item is the catalog name the request was for: a tools/call's tool
	// or a prompts/get's prompt when the catalog has it, "" otherwise (an
	// unknown name, a resource read, any other method).
	Item string
	// Relayed is true when another server served it (a hosted upstream,
	// docs/upstreams.md §2); Owner is then the owner of the relayed item
	// (server.ReplaceRelayed's key; "" for a read fallback), and
	// UpstreamDuration the time its handler took.
	Relayed          bool
	Owner            string
	UpstreamDuration time.Duration
	// Err is the error answered, nil for a result (a tool's result with
	// isError is a result).
	Err *protocol.Error
	// Cancelled is true when the client cancelled the request or its
	// connection ended before the handler returned; TimedOut when the
	// executor's deadline did (session.request_timeout, transport.md
	// §13.4). Either way the client got no result from this handler.
	Cancelled, TimedOut bool
	// Modern is true for a 2026-era request.
	Modern bool
	// Duration is from Dispatch's start to the handler's return.
	Duration time.Duration
	// URI is a resources/read's uri, "" for any other method. Unlike
	// Item it is not bounded by the catalog: not a metric's label.
	URI string
	// Context is the context RequestStarted returned, for an Observer
	// that is a RequestStarter; nil otherwise.
	Context context.Context
	// Params are the request's raw params and State its session (its
	// Caller, its ClientInfo), for the audit log. Params may be the
	// transport's buffer: they are valid only during RequestEnded, and an
	// Observer that keeps them must copy them. Both may be nil.
	Params json.RawMessage
	State  *SessionState
	// ClientInfo is a 2026 request's io.modelcontextprotocol/clientInfo
	// (nil otherwise: a legacy session's is State.ClientInfo()); valid
	// only during RequestEnded, as Params.
	ClientInfo json.RawMessage
	// End is when the handler returned (Duration after the start).
	End time.Time
}

// RequestStarter is an Observer that is also told when each request
// starts, before its handler runs: the tracer's hook (docs/observability.md,
// "Traces"). RequestStarted is called on the worker that serves the
// request, once per request, before RequestEnded; it must not block. It
// returns the context the request is served in, ctx or one made from it
// (a span's), which reaches the handler and whatever it relays, and which
// RequestEnded gets back in RequestEnd.Context. s is only valid during the
// call.
type RequestStarter interface {
	Observer
	RequestStarted(ctx context.Context, s *RequestStart) context.Context
}

// RequestStart is what a RequestStarter is told of a request as it
// starts.
type RequestStart struct {
	// Method is the request's method, as sent.
	Method string
	// Meta are params._meta's members (nil without): where a client
	// sends its W3C trace context (traceparent, tracestate).
	Meta protocol.Object
	// Modern is true for a request of the 2026 era (its _meta says so).
	Modern bool
	// Session is the connection's state; its Caller says who asks.
	Session *SessionState
}

// Idler is an Observer that may have nothing to observe for a while:
// the daemon's audit log while it is off and nothing else observes (a
// reload may turn it on). Dispatch asks Idle as a request starts and,
// when it says true, serves the request as without an Observer: no
// clock is read, nothing is told, and the request is not told later
// either. Idle is called as RequestEnded is; it must be cheap (an
// atomic load) and must not block.
type Idler interface {
	Observer
	Idle() bool
}

// observerBox holds the Observer, replaced atomically; starter is o as
// a RequestStarter, nil when it is not one; idler o as an Idler.
type observerBox struct {
	o       Observer
	starter RequestStarter
	idler   Idler
}

// active is b when its Observer is to see a request starting now, nil
// otherwise (no Observer, or an idle one).
func (b *observerBox) active() *observerBox {
	if b == nil || b.idler != nil && b.idler.Idle() {
		return nil
	}
	return b
}

// SetObserver makes o the server's Observer (nil: none). It may be called
// while serving; a request already in Dispatch reports to the Observer
// it started with.
func (s *Server) SetObserver(o Observer) {
	if o == nil {
		s.observer.Store(nil)
		return
	}
	st, _ := o.(RequestStarter)
	idler, _ := o.(Idler)
	s.observer.Store(&observerBox{o: o, starter: st, idler: idler})
}

// observed serves one request of either era and reports it to o.
func (c *call) observed(ctx context.Context, o Observer, modern bool) Outcome {
	c.observing = true
	start := time.Now()
	var out Outcome
	if modern {
		out = c.serveModern(ctx)
	} else {
		out = c.serveLegacy(ctx)
	}
	// One clock read, the monotonic one: the end's wall time is the
	// start's plus the duration.
	d := time.Since(start)
	end := start.Add(d)
	e := RequestEnd{Method: c.req.Method, Item: c.item, Relayed: c.relayed, Owner: c.owner,
		UpstreamDuration: c.relayTime, Err: out.Err, Modern: c.modern, Duration: d,
		URI: c.uri, Params: c.req.Params, State: c.req.State, End: end}
	if c.meta != nil {
		e.ClientInfo = c.meta.ClientInfo
	}
	if c.started {
		e.Context = c.ctx.Context
	}
	if ctx.Err() != nil {
		if timedOut(ctx) {
			e.TimedOut = true
		} else {
			e.Cancelled = true
		}
	}
	o.RequestEnded(e)
	return out
}

// start tells b's RequestStarter, if it has one, that c starts, and
// makes the context it returns the parent of the call's own context;
// before that context is used.
func (c *call) start(ctx context.Context, b *observerBox) {
	if b.starter == nil {
		return
	}
	c.ctx.Context = b.starter.RequestStarted(ctx, &RequestStart{Method: c.req.Method, Meta: c.split.Meta, Modern: c.split.Modern, Session: c.sess})
	c.started = true
}

// timedOut reports whether the request ctx belongs to was ended by its
// executor deadline (rather than cancelled): the executor answers
// ctxkey.TimedOut in its handlers' contexts.
func timedOut(ctx context.Context) bool {
	t, _ := ctx.Value(ctxkey.TimedOut{}).(*atomic.Bool)
	return t != nil && t.Load()
}
