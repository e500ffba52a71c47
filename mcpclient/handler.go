package mcpclient

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/snodod/snodod/protocol"
)

// Handler receives what a server sends on its own. Its methods are called
// on the Conn's reading goroutine, in arrival order, and must not block:
// the next message of the server waits for them.
type Handler interface {
	// Notify gets every notification except notifications/progress and
	// notifications/cancelled (the Conn routes those).
	Notify(method string, params json.RawMessage)
	// Request gets a request of the server's (sampling/createMessage,
	// elicitation/create, roots/list …; ping is answered by the Conn
	// itself). It answers with r.Reply, at once or later from any
	// goroutine, but never waits for the answer itself: a request waiting
	// for a client holds no goroutine of the Conn's (docs/upstreams.md §5).
	// Until it is answered it holds one of Options.MaxServerRequests.
	Request(r *Request)
}

// Request is one request of the server's, handed to Handler.Request.
type Request struct {
	// Method and Params are as the server sent them (Params nil when
	// absent); the Handler may keep them.
	Method string
	Params json.RawMessage
	// Owners are the CallOptions.Owner values of the calls in flight on
	// the Conn when it arrived (distinct, oldest first): who it may be
	// asked for.
	Owners []any

	c      *Conn
	id     protocol.ID
	ctx    context.Context
	cancel context.CancelFunc
}

// Context ends when the server cancels the request (notifications/cancelled)
// or the Conn ends: its answer is then not sent.
func (r *Request) Context() context.Context { return r.ctx }

// Reply answers the request with result (nil means {}) or, when perr is
// not nil, with that error. Only the first Reply counts, and none after
// the request's Context has ended.
func (r *Request) Reply(result json.RawMessage, perr *protocol.Error) {
	c := r.c
	c.mu.Lock()
	live := c.incoming[r.id] == r
	if live {
		delete(c.incoming, r.id)
	}
	c.mu.Unlock()
	r.cancel()
	if live {
		c.reply(r.id, result, perr)
	}
}

// serveRequest takes a request of the server's: ping is answered at once,
// the rest handed to the Handler, each within Options.MaxServerRequests.
func (c *Conn) serveRequest(m protocol.Message) {
	if !c.replyRoom() {
		return
	}
	if m.Method == "ping" {
		c.reply(m.ID, json.RawMessage(`{}`), nil)
		return
	}
	if c.o.Handler == nil {
		c.reply(m.ID, nil, &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: " + m.Method})
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	if _, dup := c.incoming[m.ID]; dup {
		c.mu.Unlock()
		c.reply(m.ID, nil, protocol.ErrDuplicateID)
		return
	}
	if len(c.incoming) >= c.o.MaxServerRequests {
		c.mu.Unlock()
		c.stats.refusedRequests.Add(1)
		c.reply(m.ID, nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: %d requests of this server already wait for their answers; try again once they are answered", c.o.MaxServerRequests)})
		return
	}
	r := &Request{Method: m.Method, Params: m.Params, Owners: c.ownersLocked(), c: c, id: m.ID}
	r.ctx, r.cancel = context.WithCancel(c.requests)
	c.incoming[m.ID] = r
	c.mu.Unlock()
	c.o.Handler.Request(r)
}

// replyRoom reports whether the server reads its answers well enough for
// one more: a transport that queues them (a child's stdin) holds at most
// Options.MaxServerRequests unwritten. Beyond that a request is dropped,
// unanswered and counted: even a refusal would have to wait in the queue.
func (c *Conn) replyRoom() bool {
	q, ok := c.s.(replyBacklog)
	if !ok || q.queuedReplies() < c.o.MaxServerRequests {
		return true
	}
	if c.stats.droppedRequests.Add(1) == 1 {
		c.log.Warn("upstream sends requests faster than it reads their answers; dropping them unanswered", "limit", c.o.MaxServerRequests)
	}
	return false
}

// cancelIncoming ends a request the server cancelled: its Context ends,
// its answer will not be sent, and its place is free.
func (c *Conn) cancelIncoming(params protocol.Object) {
	id, ok := protocol.ParseID(params.Value("requestId"))
	if !ok {
		return
	}
	c.mu.Lock()
	r := c.incoming[id]
	if r != nil {
		delete(c.incoming, id)
	}
	c.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// reply sends the answer to a request of the server's.
func (c *Conn) reply(id protocol.ID, result json.RawMessage, perr *protocol.Error) {
	var b []byte
	if perr != nil {
		b = protocol.AppendError(nil, id, perr)
		if n := len(b); n > 0 && b[n-1] == '\n' {
			b = b[:n-1]
		}
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
	c.s.Send(&Outgoing{Data: b, Reply: true})
}
