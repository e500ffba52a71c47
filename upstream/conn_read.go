package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/protocol"
)

// connStats are the Conn's counters (ConnStats).
type connStats struct {
	droppedLines, oversizeLines, lateAnswers, staleProgress, cancelled atomic.Int64
}

// ConnStats counts what the Conn dropped or did on its own (for status).
type ConnStats struct {
	// DroppedLines are stdout lines that were not JSON-RPC (banners,
	// console.log), logged as stderr.
	DroppedLines int64
	// OversizeLines are stdout lines over MaxLineBytes.
	OversizeLines int64
	// LateAnswers are responses that came after their call ended (it was
	// cancelled or timed out) or that name no call.
	LateAnswers int64
	// StaleProgress are progress notifications dropped because progress
	// did not increase or their call was not in flight.
	StaleProgress int64
	// Cancelled are notifications/cancelled sent for abandoned calls.
	Cancelled int64
}

// Stats returns the Conn's counters so far.
func (c *Conn) Stats() ConnStats {
	return ConnStats{
		DroppedLines:  c.stats.droppedLines.Load(),
		OversizeLines: c.stats.oversizeLines.Load(),
		LateAnswers:   c.stats.lateAnswers.Load(),
		StaleProgress: c.stats.staleProgress.Load(),
		Cancelled:     c.stats.cancelled.Load(),
	}
}

// readLoop reads the child's stdout until it ends.
func (c *Conn) readLoop() {
	defer close(c.readDone)
	for {
		line, err := c.reader.ReadLine()
		switch {
		case err == nil:
			c.handleLine(line)
		case errors.Is(err, framing.ErrLineTooLong):
			c.stats.oversizeLines.Add(1) // longLine fails its call once the line has ended
		case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded): // stopReading
			return
		default:
			c.readErr = err
			return
		}
	}
}

// longLine is lineWatch's report of a line over the limit.
func (c *Conn) longLine(head, tail []byte) {
	if n, ok := longLineID(head, tail); ok {
		if cl := c.take(n); cl != nil {
			c.log.Warn("upstream response exceeds the line limit; the call fails", "id", n, "limit", c.cfg.MaxLineBytes)
			cl.deliver(nil, ErrResponseTooLong)
			return
		}
	}
	c.log.Warn("upstream wrote a line over the line limit; dropped", "limit", c.cfg.MaxLineBytes, "start", string(head[:min(len(head), 80)]))
}

// handleLine routes one stdout line (docs/upstreams.md §4 stdout hygiene, §5).
func (c *Conn) handleLine(line []byte) {
	line = bytes.TrimRight(line, " \t\r")
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	var m map[string]json.RawMessage
	ok := json.Valid(line)
	if ok {
		m, ok = protocol.Members(line)
	}
	if !ok {
		c.notJSONRPC(line)
		return
	}
	method, hasMethod := protocol.String(m["method"])
	rawID, hasID := m["id"]
	switch {
	case hasMethod && hasID:
		c.serveRequest(rawID, method, m["params"])
	case hasMethod:
		c.notification(method, m["params"])
	case hasID && (m["result"] != nil || m["error"] != nil):
		c.response(rawID, m["result"], m["error"])
	default:
		c.notJSONRPC(line)
	}
}

// notJSONRPC logs a line that is not a JSON-RPC message as the upstream's
// stderr, and drops it.
func (c *Conn) notJSONRPC(line []byte) {
	c.stats.droppedLines.Add(1)
	_, _ = c.cfg.Stderr.Write(append(line[:len(line):len(line)], '\n'))
	c.tail.Write(append(line[:len(line):len(line)], '\n'))
	c.logText(streamStdout, line)
}

func (c *Conn) response(rawID, result, rawErr json.RawMessage) {
	n, isInt := parseIntID(rawID)
	var cl *call
	if isInt {
		cl = c.take(n)
	}
	if cl == nil {
		c.stats.lateAnswers.Add(1)
		c.log.Debug("dropped an answer for no call in flight", "id", string(rawID))
		return
	}
	if rawErr != nil {
		cl.deliver(nil, decodeError(rawErr))
		return
	}
	cl.deliver(result, nil)
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

func (c *Conn) notification(method string, params json.RawMessage) {
	switch method {
	case "notifications/progress":
		c.progress(params)
		return
	case "notifications/cancelled":
		c.cancelIncoming(params)
		return
	}
	if c.cfg.Handler != nil {
		c.cfg.Handler.Notify(method, params)
	}
}

// progress routes a progress notification to its call (docs/upstreams.md §5):
// only while it is in flight, only when progress increases, the token
// removed.
func (c *Conn) progress(params json.RawMessage) {
	m, _ := protocol.Members(params)
	var value float64
	n, isInt := parseIntID(m["progressToken"])
	ok := isInt && json.Unmarshal(m["progress"], &value) == nil && !math.IsNaN(value)
	var cl *call
	if ok {
		c.mu.Lock()
		cl = c.calls[n]
		c.mu.Unlock()
	}
	if cl == nil || cl.progress == nil {
		c.stats.staleProgress.Add(1)
		return
	}
	delete(m, "progressToken")
	out := appendObject(nil, m)
	cl.pmu.Lock()
	defer cl.pmu.Unlock()
	if cl.finished || (cl.anyProgress && value <= cl.lastProgress) {
		c.stats.staleProgress.Add(1)
		return
	}
	cl.anyProgress, cl.lastProgress = true, value
	cl.progress(out)
}

// cancelIncoming ends the Handler.Request serving an upstream request the
// upstream cancelled.
func (c *Conn) cancelIncoming(params json.RawMessage) {
	m, _ := protocol.Members(params)
	id, ok := protocol.ParseID(m["requestId"])
	if !ok {
		return
	}
	c.mu.Lock()
	cancel := c.incoming[id]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// serveRequest answers a request from the upstream: ping itself, the rest
// through the Handler, on a goroutine of its own.
func (c *Conn) serveRequest(rawID json.RawMessage, method string, params json.RawMessage) {
	id, ok := protocol.ParseID(rawID)
	if !ok {
		c.notJSONRPC(rawID)
		return
	}
	if method == "ping" {
		c.answer(id, json.RawMessage(`{}`), nil)
		return
	}
	if c.cfg.Handler == nil {
		c.answer(id, nil, &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: " + method})
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if _, dup := c.incoming[id]; dup {
		c.mu.Unlock()
		c.answer(id, nil, protocol.ErrDuplicateID)
		return
	}
	owners := c.ownersLocked()
	ctx, cancel := context.WithCancel(c.handlerCtx)
	c.incoming[id] = cancel
	c.handlers.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.handlers.Done()
		defer cancel()
		result, perr := c.cfg.Handler.Request(ctx, method, params, owners)
		c.mu.Lock()
		delete(c.incoming, id)
		c.mu.Unlock()
		if ctx.Err() != nil && c.handlerCtx.Err() == nil {
			return // cancelled by the upstream: it expects no answer
		}
		c.answer(id, result, perr)
	}()
}

// ownersLocked lists the distinct owners of the calls in flight, oldest
// first. c.mu is held.
func (c *Conn) ownersLocked() []any {
	ids := make([]int64, 0, len(c.calls))
	for id := range c.calls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var owners []any
	for _, id := range ids {
		o := c.calls[id].owner
		if o != nil && !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	return owners
}

// answer sends the response to an upstream's request.
func (c *Conn) answer(id protocol.ID, result json.RawMessage, perr *protocol.Error) {
	var b []byte
	if perr != nil {
		b = protocol.AppendError(nil, id, perr)
	} else {
		if result == nil {
			result = json.RawMessage(`{}`)
		}
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = id.AppendJSON(b)
		b = append(b, `,"result":`...)
		b = append(b, result...)
		b = append(b, '}')
	}
	if n := len(b); n == 0 || b[n-1] != '\n' {
		b = append(b, '\n')
	}
	c.w.send(b, nil)
}

// parseIntID reads an id or token this Conn minted: a JSON integer.
func parseIntID(raw json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}
