package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/snodod/snodod/protocol"
)

// CallOptions are one call's routing data.
type CallOptions struct {
	// Owner is who the call is for (a session); Handler.Request sees the
	// owners in flight. It must be comparable (a pointer, typically); nil
	// owners are not reported.
	Owner any
	// Progress, when non-nil, makes the Conn put a progressToken unique on
	// this Conn into params._meta (replacing the client's), and call
	// Progress with each notifications/progress params the upstream sends
	// for it (the token member removed; progress, total, message kept), in
	// order, only while the call is in flight, only when progress
	// increases. It is called on the Conn's reading goroutine and must not
	// block; no call happens after Call returns.
	Progress func(params json.RawMessage)
	// ClientCapabilities (2026 upstream only) is stamped into _meta as
	// io.modelcontextprotocol/clientCapabilities: the client's own declared
	// capabilities, never more ({} when nil). ClientInfo likewise, when
	// non-nil (else ConnConfig.ClientInfo).
	ClientCapabilities json.RawMessage
	ClientInfo         json.RawMessage
	// LogLevel (2026 upstream only), when set, is stamped into _meta as
	// io.modelcontextprotocol/logLevel.
	LogLevel string
	// TraceParent and TraceState, when TraceParent is set, are the W3C
	// trace context of the call's span (docs/observability.md, "Traces"):
	// stamped into _meta as traceparent and tracestate, replacing the
	// client's, and sent by an HTTP transport as the traceparent and
	// tracestate headers too.
	TraceParent, TraceState string
}

// call is one request in flight: in Conn.calls from before its message is
// sent until whoever takes it out (the answer, the caller giving up, the
// end of the stream) delivers its outcome, exactly once.
type call struct {
	c        *Conn
	id       int64
	out      *Outgoing // the request as the stream has it
	owner    any
	progress func(json.RawMessage)
	resp     chan response // buffered: deliver never blocks

	// pmu orders Progress callbacks before the call's end: after deliver
	// or stopProgress no callback runs.
	pmu          sync.Mutex
	finished     bool
	lastProgress float64
	anyProgress  bool
}

type response struct {
	result json.RawMessage
	err    error
}

// deliver ends the call with its outcome. Only the goroutine that took the
// call out of Conn.calls calls it.
func (cl *call) deliver(result json.RawMessage, err error) {
	cl.stopProgress()
	cl.resp <- response{result, err}
}

func (cl *call) stopProgress() {
	cl.pmu.Lock()
	cl.finished = true
	cl.pmu.Unlock()
}

// fail ends the call with err if it is still in flight.
func (cl *call) fail(err error) {
	if cl.c.forget(cl) {
		cl.deliver(nil, err)
	}
}

// forget takes cl out of the table; it reports false when someone else
// already did (and so delivers).
func (c *Conn) forget(cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := protocol.IntID(cl.id)
	if c.calls[id] != cl {
		return false
	}
	delete(c.calls, id)
	return true
}

// take takes the call with id out of the table, nil when there is none.
func (c *Conn) take(id protocol.ID) *call {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl := c.calls[id]
	if cl != nil {
		delete(c.calls, id)
	}
	return cl
}

// Call sends one request with an id from this Conn's own space (integers
// from 1, never reused while the Conn lives) and waits for its answer.
// params is the params object as the client sent it (nil for none): the
// client's progressToken and per-hop reserved _meta keys
// (io.modelcontextprotocol/protocolVersion, clientCapabilities, clientInfo,
// logLevel, serverInfo, subscriptionId) are removed and this hop's are
// stamped for the upstream's era; other _meta keys (other reserved ones
// such as io.modelcontextprotocol/related-task, and
// traceparent/tracestate/baggage) pass through, but CallOptions.TraceParent
// replaces traceparent and tracestate. If ctx ends first,
// notifications/cancelled {requestId} is sent (nothing at all when the
// request was not written yet), a late answer is dropped, and ctx's error
// is returned.
//
// Errors: *protocol.Error (the server's error response, code/message/data
// as sent; Data is a json.RawMessage), the stream's end when it ended
// while the call was in flight (for a Command, an *ExitError: the process
// exited or its stdout ended), ErrClosed (the Conn was stopping or stopped
// before the request was sent), ErrResponseTooLong (the answer exceeded
// MaxLineBytes; it was dropped), or an error for params that are not a
// JSON object. Call may be called from many goroutines at once.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	id := c.nextID.Add(1)
	var token int64
	if o.Progress != nil {
		token = id
	}
	p, err := c.outParams(params, o, token)
	if err != nil {
		return nil, err
	}
	return c.roundTrip(ctx, id, method, p, o)
}

// roundTrip sends request id and waits for its outcome (see Call).
func (c *Conn) roundTrip(ctx context.Context, id int64, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	if ws, ok := c.s.(waitingSender); ok {
		return c.roundTripOn(ws, ctx, id, method, params, o)
	}
	cl, err := c.beginTraced(id, method, params, o.Owner, o.Progress, o.TraceParent, o.TraceState)
	if err != nil {
		return nil, err
	}
	return c.waitFor(ctx, cl)
}

// roundTripOn is roundTrip on a stream that sends a request and reads its
// answer on the caller's goroutine (HTTP): no goroutine of the stream's
// to start and hand the answer back from, each a thread's wake-up on a
// loaded machine (docs/bench.md, "Remote servers"). ctx ending while it sends abandons the call
// as roundTrip does, which ends the request's exchange.
func (c *Conn) roundTripOn(ws waitingSender, ctx context.Context, id int64, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // never sent, as roundTrip's would be at best
	}
	cl, err := c.prepare(id, method, params, o.Owner, o.Progress, o.TraceParent, o.TraceState)
	if err != nil {
		return nil, err
	}
	// Watched from when the stream holds the request, so that abandoning
	// it withdraws it, as roundTrip's does.
	abandoned := make(chan bool, 1)
	var stop func() bool
	if !ws.sendWait(cl.out, func() {
		stop = context.AfterFunc(ctx, func() { abandoned <- c.abandon(cl, ctx.Err()) })
	}) {
		cl.fail(ErrClosed)
	}
	if stop != nil && !stop() {
		if <-abandoned {
			return nil, ctx.Err()
		}
		r := <-cl.resp // the outcome raced in: it is the call's
		return r.result, r.err
	}
	return c.waitFor(ctx, cl) // an answer that came another way (a GET stream, after progress) may be on its way
}

// waitFor waits for cl's outcome, or abandons it when ctx ends first.
func (c *Conn) waitFor(ctx context.Context, cl *call) (json.RawMessage, error) {
	select {
	case r := <-cl.resp:
		return r.result, r.err
	case <-ctx.Done():
	}
	if !c.abandon(cl, ctx.Err()) {
		r := <-cl.resp // the outcome raced in: it is the call's
		return r.result, r.err
	}
	return nil, ctx.Err()
}

// begin puts request id in flight; its outcome arrives on the call's resp.
func (c *Conn) begin(id int64, method string, params json.RawMessage, owner any, progress func(json.RawMessage)) (*call, error) {
	return c.beginTraced(id, method, params, owner, progress, "", "")
}

// beginTraced is begin of a request sent with a trace context (an HTTP
// transport's headers, Outgoing.TraceParent).
func (c *Conn) beginTraced(id int64, method string, params json.RawMessage, owner any, progress func(json.RawMessage), traceparent, tracestate string) (*call, error) {
	cl, err := c.prepare(id, method, params, owner, progress, traceparent, tracestate)
	if err != nil {
		return nil, err
	}
	if !c.s.Send(cl.out) {
		cl.fail(ErrClosed)
	}
	return cl, nil
}

// prepare puts request id in flight, not sent yet.
func (c *Conn) prepare(id int64, method string, params json.RawMessage, owner any, progress func(json.RawMessage), traceparent, tracestate string) (*call, error) {
	cl := &call{c: c, id: id, owner: owner, progress: progress, resp: make(chan response, 1)}
	cl.out = &Outgoing{Data: requestFrame(id, method, params), ID: id, Method: method, call: cl,
		TraceParent: traceparent, TraceState: tracestate}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.calls[protocol.IntID(id)] = cl
	c.mu.Unlock()
	return cl, nil
}

// abandon gives up on cl: the server is told when the request reached it,
// and a late answer will be dropped. It reports false when the outcome was
// already on its way (it is then on cl.resp).
func (c *Conn) abandon(cl *call, why error) bool {
	if !c.forget(cl) {
		return false
	}
	cl.stopProgress()
	if c.s.Cancel(cl.out, "snodod: "+why.Error()) {
		c.stats.cancelled.Add(1)
	}
	return true
}

func requestFrame(id int64, method string, params json.RawMessage) []byte {
	b := make([]byte, 0, 48+len(method)+len(params))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":`...)
	b = protocol.AppendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// Per-hop _meta members: each hop stamps its own (docs/upstreams.md §5).
var perHopMeta = []string{
	protocol.MetaProtocolVersion,
	"io.modelcontextprotocol/clientCapabilities",
	"io.modelcontextprotocol/clientInfo",
	"io.modelcontextprotocol/logLevel",
	"io.modelcontextprotocol/serverInfo",
	"io.modelcontextprotocol/subscriptionId",
	"progressToken",
}

// outParams rewrites the client's params for this hop: token (non-zero)
// becomes the progressToken, and a 2026 upstream gets its per-request
// metadata.
func (c *Conn) outParams(params json.RawMessage, o CallOptions, token int64) (json.RawMessage, error) {
	modern := c.era == Era2026
	if !modern && token == 0 && o.TraceParent == "" && !mentionsMeta(params) {
		// Nothing to rewrite, the common legacy case: only the outline is
		// checked (the client's transport validated the JSON).
		if t := bytes.TrimSpace(params); params != nil && (len(t) < 2 || t[0] != '{' || t[len(t)-1] != '}') {
			return nil, errParamsObject
		}
		return params, nil
	}
	var members map[string]json.RawMessage
	if params != nil {
		var ok bool
		if members, ok = protocol.Members(params); !ok {
			return nil, errParamsObject
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := members["_meta"]; ok {
		m, ok := protocol.Members(raw)
		if !ok && string(raw) != "null" {
			return nil, fmt.Errorf("params._meta must be a JSON object")
		}
		for k, v := range m {
			meta[k] = v
		}
		for _, k := range perHopMeta {
			delete(meta, k)
		}
	}
	if token != 0 {
		meta["progressToken"] = json.RawMessage(strconv.FormatInt(token, 10))
	}
	if modern {
		c.stamp2026(meta, o)
	}
	if o.TraceParent != "" {
		// This hop's span is the next server's parent: the client's
		// traceparent and tracestate are replaced, whatever they were.
		meta["traceparent"] = protocol.AppendString(nil, o.TraceParent)
		delete(meta, "tracestate")
		if o.TraceState != "" {
			meta["tracestate"] = protocol.AppendString(nil, o.TraceState)
		}
	}
	out := make(map[string]json.RawMessage, len(members)+1)
	for k, v := range members {
		out[k] = v
	}
	delete(out, "_meta")
	if len(meta) > 0 {
		out["_meta"] = appendObject(nil, meta)
	}
	return appendObject(nil, out), nil
}

var errParamsObject = errors.New("params must be a JSON object")

// stamp2026 adds the 2026 per-request metadata (docs/protocol.md §5.1).
func (c *Conn) stamp2026(meta map[string]json.RawMessage, o CallOptions) {
	meta[protocol.MetaProtocolVersion] = protocol.AppendString(nil, c.version)
	caps := o.ClientCapabilities
	if len(caps) == 0 {
		caps = json.RawMessage(`{}`)
	}
	meta["io.modelcontextprotocol/clientCapabilities"] = caps
	info := o.ClientInfo
	if len(info) == 0 {
		info = c.clientInfoMeta
	}
	meta["io.modelcontextprotocol/clientInfo"] = info
	if o.LogLevel != "" {
		meta["io.modelcontextprotocol/logLevel"] = protocol.AppendString(nil, o.LogLevel)
	}
}

// mentionsMeta is a cheap test for a _meta member: params without the
// text "_meta" certainly have none.
func mentionsMeta(params json.RawMessage) bool {
	for i := 0; i+7 <= len(params); i++ {
		if params[i] == '"' && string(params[i:i+7]) == `"_meta"` {
			return true
		}
	}
	return false
}

// appendObject writes members as a JSON object, names sorted so that the
// same members always give the same bytes.
func appendObject(b []byte, members map[string]json.RawMessage) json.RawMessage {
	names := make([]string, 0, len(members))
	for k := range members {
		names = append(names, k)
	}
	slices.Sort(names)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = protocol.AppendString(b, k)
		b = append(b, ':')
		b = append(b, members[k]...)
	}
	return append(b, '}')
}

// List fetches every page of tools/list, resources/list,
// resources/templates/list or prompts/list (following nextCursor; a repeated
// cursor is an error) and returns the items of all pages in order, each as
// sent. A list of more than maxListPages pages or maxListItems items is cut
// there (docs/upstreams.md §8): List returns the items so far and a
// *ListCutError.
func (c *Conn) List(ctx context.Context, method string) ([]json.RawMessage, error) {
	key, ok := listKeys[method]
	if !ok {
		return nil, fmt.Errorf("list %s: not a list method", method)
	}
	var items []json.RawMessage
	seen := map[string]bool{}
	var params json.RawMessage
	for page := 1; ; page++ {
		if page > maxListPages {
			return items, &ListCutError{fmt.Sprintf("%s has more than %d pages", method, maxListPages)}
		}
		res, err := c.Call(ctx, method, params, CallOptions{})
		if err != nil {
			return nil, err
		}
		m, ok := protocol.Members(res)
		if !ok {
			return nil, fmt.Errorf("upstream %q: %s result is not an object", c.o.Name, method)
		}
		var list []json.RawMessage
		if raw, ok := m[key]; ok {
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf("upstream %q: %s result: %s is not a list", c.o.Name, method, key)
			}
		}
		items = append(items, list...)
		if len(items) > maxListItems {
			return items[:maxListItems], &ListCutError{fmt.Sprintf("%s has more than %d items", method, maxListItems)}
		}
		var cursor string
		if raw, ok := m["nextCursor"]; ok && string(raw) != "null" {
			if cursor, ok = protocol.String(raw); !ok {
				return nil, fmt.Errorf("upstream %q: %s result: nextCursor is not a string", c.o.Name, method)
			}
		}
		if cursor == "" {
			return items, nil
		}
		if seen[cursor] {
			return nil, fmt.Errorf("upstream %q: %s repeated the cursor %q; its pages would never end", c.o.Name, method, cursor)
		}
		seen[cursor] = true
		params = appendObject(nil, map[string]json.RawMessage{"cursor": protocol.AppendString(nil, cursor)})
	}
}

// The bounds of one list of an upstream's catalog (docs/upstreams.md §8): a
// server that pages forever, or lists more than a client could use.
const (
	maxListPages = 100
	maxListItems = 10_000
)

// ListCutError is List's error for a list cut at its bounds; the items
// before the cut are returned with it. Reason says which bound
// ("tools/list has more than 10000 items"), for status.
type ListCutError struct{ Reason string }

func (e *ListCutError) Error() string { return "the list was cut: " + e.Reason }

var listKeys = map[string]string{
	"tools/list":               "tools",
	"resources/list":           "resources",
	"resources/templates/list": "resourceTemplates",
	"prompts/list":             "prompts",
}

// Notify sends a notification to the server. params is marshalled with
// encoding/json (nil for none). It fails with ErrClosed once the Conn is
// stopping.
func (c *Conn) Notify(method string, params any) error {
	b := []byte(`{"jsonrpc":"2.0","method":`)
	b = protocol.AppendString(b, method)
	if params != nil {
		p, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("notify %s: %w", method, err)
		}
		b = append(b, `,"params":`...)
		b = append(b, p...)
	}
	b = append(b, '}')
	if !c.s.Send(&Outgoing{Data: b, Method: method}) {
		return ErrClosed
	}
	return nil
}

// Ping sends ping; any answer, even an error response, is alive. It fails
// only when ctx ends or the Conn ends.
func (c *Conn) Ping(ctx context.Context) error {
	_, err := c.Call(ctx, "ping", nil, CallOptions{})
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return nil
	}
	return err
}
