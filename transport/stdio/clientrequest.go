package stdio

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/internal/cancelled"
)

// This file holds requests from snodod to the client of a legacy request
// (docs/protocol.md §3.1, docs/transport.md §7.1). A legacy request's requestSink is
// its server.ClientRequester: the handler's goroutine takes one of the
// session's places (server.MaxClientRequests), encodes the request and
// posts it; the coordinator keeps the table of outstanding requests
// (c.calls), writes the frame, and completes a request when a response
// line with its id arrives. Any other response is dropped. A request is
// cancelled, with notifications/cancelled to the client, when its
// originating request ends, is cancelled or times out; the end of input,
// of the connection or of the instance (a restart) fails it at once.

// Errors a handler's request to the client ends with when the connection
// cannot complete it.
var (
	errClientInputEnded    = errors.New("the client's input ended before it answered")
	errClientRequestClosed = errors.New("the session ended before the client answered")
	errClientRequestEnded  = errors.New("the request that sent it has ended")
	errClientInvalidReply  = errors.New("the client answered with an invalid response")
)

// clientCall is one request to the client. The coordinator owns it once
// posted; reply (1-buffered) receives its one answer.
type clientCall struct {
	w      *work
	id     protocol.ID
	frame  []byte // the encoded request line
	reason string // why the handler stopped waiting (msgClientCancel)
	sent   bool   // the frame was written: cancelling it is announced
	reply  chan clientReply
}

type clientReply struct {
	result json.RawMessage
	err    error
}

// RequestClient implements server.ClientRequester for the sink's request.
func (s *requestSink) RequestClient(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c := s.c
	// Its end then goes through the coordinator, which cancels what the
	// client was asked before writing the response (work.Done).
	s.asked.Store(true)
	if err := c.sess.AcquireClientRequest(ctx); err != nil {
		return nil, err
	}
	defer c.sess.ReleaseClientRequest()
	id := c.sess.NextClientRequestID()
	frame, err := protocol.AppendRequest(nil, id, method, params)
	if err != nil {
		return nil, err
	}
	call := &clientCall{w: s.w, id: id, frame: frame, reply: make(chan clientReply, 1)}
	if !c.mail.post(message{kind: msgClientRequest, call: call}) {
		return nil, errClientRequestClosed
	}
	select {
	case r := <-call.reply:
		return r.result, r.err
	case <-ctx.Done():
		call.reason = "Request cancelled"
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			call.reason = "Request timed out"
		}
		c.mail.post(message{kind: msgClientCancel, call: call})
		return nil, ctx.Err()
	case <-c.mail.done:
		return nil, errClientRequestClosed
	}
}

// sendClientRequest writes a handler's request to the client, unless its
// request has ended or the client can no longer answer.
func (c *coordinator) sendClientRequest(call *clientCall) {
	switch {
	case c.inflight[call.w.id] != call.w:
		call.reply <- clientReply{err: errClientRequestEnded}
		return
	case !c.phase.inputOpen():
		call.reply <- clientReply{err: errClientInputEnded}
		return
	}
	if c.calls == nil {
		c.calls = make(map[protocol.ID]*clientCall)
	}
	c.calls[call.id] = call
	c.scratch = append(c.scratch[:0], call.frame...)
	call.frame = nil
	if !c.commit(nil, false) {
		delete(c.calls, call.id)
		call.reply <- clientReply{err: c.failed}
		return
	}
	call.sent = true
}

// clientResponse completes the request to the client that msg answers
// (docs/transport.md §7.1); a response to anything else is dropped silently.
func (c *coordinator) clientResponse(msg *protocol.Message) {
	call := c.calls[msg.ID]
	if call == nil {
		return
	}
	c.forgetCall(call)
	switch {
	case msg.ErrorObject != nil:
		e, ok := protocol.DecodeErrorObject(msg.ErrorObject)
		if !ok {
			call.reply <- clientReply{err: errClientInvalidReply}
			return
		}
		call.reply <- clientReply{err: e}
	default:
		call.reply <- clientReply{result: msg.Result}
	}
}

// cancelClientRequest handles a handler that stopped waiting (its context
// ended): the client is told with notifications/cancelled, unless the
// request was answered or never written.
func (c *coordinator) cancelClientRequest(call *clientCall) {
	if c.calls[call.id] != call {
		return
	}
	c.forgetCall(call)
	c.announceCancel(call, call.reason)
}

// cancelClientRequestsOf cancels the requests to the client that w's
// handler is waiting on, now that w has ended (answered, cancelled, timed
// out, closed by the server): the client is told, and the handler gets an
// error at once.
func (c *coordinator) cancelClientRequestsOf(w *work) {
	for _, call := range c.calls {
		if call.w != w {
			continue
		}
		c.forgetCall(call)
		c.announceCancel(call, "Request ended")
		call.reply <- clientReply{err: errClientRequestEnded}
	}
}

// failClientRequests fails every outstanding request to the client with
// err, writing nothing: the input or the connection has ended.
func (c *coordinator) failClientRequests(err error) {
	for _, call := range c.calls {
		c.forgetCall(call)
		call.reply <- clientReply{err: err}
	}
}

func (c *coordinator) forgetCall(call *clientCall) {
	delete(c.calls, call.id)
	if len(c.calls) == 0 {
		c.calls = nil // an idle connection holds no table
	}
}

// announceCancel writes notifications/cancelled for a request to the
// client that was written.
func (c *coordinator) announceCancel(call *clientCall, reason string) {
	if call.sent {
		c.writeNotification("notifications/cancelled", cancelled.Params{RequestID: call.id, Reason: reason})
	}
}

var _ server.ClientRequester = (*requestSink)(nil)
