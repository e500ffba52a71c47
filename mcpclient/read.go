package mcpclient

import (
	"encoding/json"
	"math"
	"slices"
	"sync/atomic"

	"github.com/snodod/snodod/protocol"
)

// connStats are the Conn's counters (ConnStats).
type connStats struct {
	droppedLines, oversizeLines, lateAnswers, staleProgress, cancelled atomic.Int64
	refusedRequests, droppedRequests                                   atomic.Int64
}

// ConnStats counts what the Conn dropped or did on its own (for status).
type ConnStats struct {
	// DroppedLines are lines the server wrote that were not JSON-RPC
	// (banners, console.log), logged as its output.
	DroppedLines int64
	// OversizeLines are messages over MaxLineBytes.
	OversizeLines int64
	// LateAnswers are responses that came after their call ended (it was
	// cancelled or timed out) or that name no call.
	LateAnswers int64
	// StaleProgress are progress notifications dropped because progress
	// did not increase or their call was not in flight.
	StaleProgress int64
	// Cancelled are cancellations sent for abandoned calls.
	Cancelled int64
	// RefusedRequests are requests of the server's answered -32603 at
	// once: Options.MaxServerRequests were waiting for their answers.
	RefusedRequests int64
	// DroppedRequests are requests of the server's dropped unanswered:
	// Options.MaxServerRequests answers waited for it to read them.
	DroppedRequests int64
}

// Stats returns the Conn's counters so far.
func (c *Conn) Stats() ConnStats {
	return ConnStats{
		DroppedLines:    c.stats.droppedLines.Load(),
		OversizeLines:   c.stats.oversizeLines.Load(),
		LateAnswers:     c.stats.lateAnswers.Load(),
		StaleProgress:   c.stats.staleProgress.Load(),
		Cancelled:       c.stats.cancelled.Load(),
		RefusedRequests: c.stats.refusedRequests.Load(),
		DroppedRequests: c.stats.droppedRequests.Load(),
	}
}

// readLoop reads the stream until it ends.
func (c *Conn) readLoop() {
	defer close(c.readDone)
	for {
		line, err := c.s.Read()
		if err != nil {
			return
		}
		c.handle(line)
	}
}

// longLine is Link.TooLong: it fails the call a message over the limit
// answered; the stream logged one it could not attribute.
func (c *Conn) longLine(e TooLongError) {
	c.stats.oversizeLines.Add(1)
	if !e.HasID {
		return
	}
	if cl := c.take(protocol.IntID(e.ID)); cl != nil {
		c.log.Warn("upstream response exceeds the line limit; the call fails", "id", e.ID, "limit", c.o.MaxLineBytes)
		cl.deliver(nil, ErrResponseTooLong)
		return
	}
	c.log.Warn("upstream wrote a line over the line limit for no call in flight; dropped", "id", e.ID, "limit", c.o.MaxLineBytes)
}

// handle routes one message (docs/upstreams.md §4 stdout hygiene, §5),
// judged by the decoder in client mode.
func (c *Conn) handle(line []byte) {
	m := protocol.DecodeFromServer(line)
	switch m.Kind {
	case protocol.KindBlank:
	case protocol.KindResponse:
		c.response(m)
	case protocol.KindNotification:
		c.notification(m)
	case protocol.KindRequest:
		c.serveRequest(m)
	default:
		if answerable(m.Err) {
			// A JSON-RPC 2.0 request with a bad envelope (an id with a
			// lone surrogate, say): refused as a client's would be.
			if c.replyRoom() {
				c.reply(m.ID, nil, m.Err)
			}
			return
		}
		c.notJSONRPC(line)
	}
}

// answerable are the decoder's refusals of a line that says it is a
// JSON-RPC 2.0 request (docs/transport.md §5 rows 5 to 8). Anything else
// (not JSON, not an object, no "jsonrpc":"2.0": a banner, a JSON log
// line) is the server's output, not a message to answer.
func answerable(err *protocol.Error) bool {
	switch err {
	case protocol.ErrIDType, protocol.ErrIDBounds, protocol.ErrIDSurrogate, protocol.ErrMethodType, protocol.ErrParamsType:
		return true
	}
	return false
}

// notJSONRPC hands a line that is not a JSON-RPC message back to the
// stream, which logs it as the server's output, and drops it.
func (c *Conn) notJSONRPC(line []byte) {
	c.stats.droppedLines.Add(1)
	if n, ok := c.s.(noiseSink); ok {
		n.noise(line)
	}
}

func (c *Conn) response(m protocol.Message) {
	cl := c.take(m.ID)
	if cl == nil {
		c.stats.lateAnswers.Add(1)
		c.log.Debug("dropped an answer for no call in flight", "id", m.ID.String())
		return
	}
	if m.ErrorObject != nil {
		cl.deliver(nil, decodeError(m.ErrorObject))
		return
	}
	cl.deliver(m.Result, nil)
}

// decodeError reads a JSON-RPC error object as sent; a malformed one is
// reported as -32603 saying so.
func decodeError(raw json.RawMessage) *protocol.Error {
	var e struct {
		Code    *int64          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Code == nil {
		return &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: the upstream sent a malformed error: " + string(raw)}
	}
	pe := &protocol.Error{Code: *e.Code, Message: e.Message}
	if e.Data != nil {
		pe.Data = e.Data
	}
	return pe
}

func (c *Conn) notification(m protocol.Message) {
	switch m.Method {
	case "notifications/progress":
		c.progress(m.Members)
		return
	case "notifications/cancelled":
		c.cancelIncoming(m.Members)
		return
	}
	if c.o.Handler != nil {
		c.o.Handler.Notify(m.Method, m.Params)
	}
}

// progress routes a progress notification to its call (docs/upstreams.md
// §5): only while it is in flight, only when progress increases, the
// token removed.
func (c *Conn) progress(params protocol.Object) {
	var value float64
	token, tokenOK := protocol.ParseID(params.Value("progressToken"))
	ok := tokenOK && json.Unmarshal(params.Value("progress"), &value) == nil && !math.IsNaN(value)
	var cl *call
	if ok {
		c.mu.Lock()
		cl = c.calls[token]
		c.mu.Unlock()
	}
	if cl == nil || cl.progress == nil {
		c.stats.staleProgress.Add(1)
		return
	}
	out := make([]byte, 0, 64)
	out = append(out, '{')
	for _, mb := range params {
		if mb.Name == "progressToken" {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = protocol.AppendString(out, mb.Name)
		out = append(out, ':')
		out = append(out, mb.Value...)
	}
	out = append(out, '}')
	cl.pmu.Lock()
	defer cl.pmu.Unlock()
	if cl.finished || (cl.anyProgress && value <= cl.lastProgress) {
		c.stats.staleProgress.Add(1)
		return
	}
	cl.anyProgress, cl.lastProgress = true, value
	cl.progress(out)
}

// ownersLocked lists the distinct owners of the calls in flight, oldest
// first. c.mu is held.
func (c *Conn) ownersLocked() []any {
	ids := make([]int64, 0, len(c.calls))
	for _, cl := range c.calls {
		ids = append(ids, cl.id)
	}
	slices.Sort(ids)
	var owners []any
	for _, id := range ids {
		o := c.calls[protocol.IntID(id)].owner
		if o != nil && !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	return owners
}
