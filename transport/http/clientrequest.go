package http

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/internal/cancelled"
)

// Requests from snodod to a legacy session's client (docs/protocol.md §3.1,
// §13.4): elicitation/create, sampling/createMessage, roots/list and ping,
// sent by a handler through server.RequestClient. Each travels as an event
// on the SSE stream of the POST whose handler sent it; the client answers
// with a separate POST carrying a JSON-RPC response and the session id
// (202), which may arrive on any connection. The session keeps the
// outstanding requests by id ("snodod:<n>", never reused in the session).

// clientReply is a client's answer to one request.
type clientReply struct {
	result json.RawMessage
	err    error
}

var (
	errClientGone    = errors.New("the session ended before its client answered")
	errStreamGone    = errors.New("the request's response stream has ended: its client can no longer be asked (send Accept: text/event-stream and keep the response open)")
	errInvalidAnswer = errors.New("the client answered with neither a result nor a valid error object")
)

// clientRequester is the server.ClientRequester of one legacy request.
type clientRequester struct {
	s *session
	x *exchange
}

// RequestClient implements server.ClientRequester.
func (c *clientRequester) RequestClient(ctx context.Context, method string, params any) (json.RawMessage, error) {
	st := c.s.state
	if err := st.AcquireClientRequest(ctx); err != nil {
		return nil, err
	}
	defer st.ReleaseClientRequest()
	id := st.NextClientRequestID()
	frame, err := protocol.AppendRequest(nil, id, method, params)
	if err != nil {
		return nil, err
	}
	reply := make(chan clientReply, 1)
	if !c.s.addPending(id, reply) {
		return nil, errClientGone
	}
	defer c.s.removePending(id)
	if err := c.x.sendFrame(frame); err != nil {
		return nil, errStreamGone
	}
	select {
	case r := <-reply:
		return r.result, r.err
	case <-ctx.Done():
		// The originating request was cancelled, timed out or ended: so is
		// this one. The cancellation goes on the same stream, if it is
		// still open.
		if cancel, err := protocol.AppendNotification(nil, "notifications/cancelled",
			cancelled.Params{RequestID: id, Reason: "The originating request ended"}); err == nil {
			_ = c.x.sendFrame(cancel)
		}
		return nil, ctx.Err()
	case <-c.s.ended:
		return nil, errClientGone
	}
}

// addPending registers an outstanding request; false once the session
// ended.
func (s *session) addPending(id protocol.ID, reply chan clientReply) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.pending == nil {
		s.pending = map[protocol.ID]chan clientReply{}
	}
	s.pending[id] = reply
	return true
}

func (s *session) removePending(id protocol.ID) {
	s.mu.Lock()
	delete(s.pending, id)
	s.mu.Unlock()
}

// clientResponse completes the outstanding request a response POST
// answers; any other response is dropped silently (docs/transport.md §7.1).
func (s *session) clientResponse(msg *protocol.Message) {
	s.mu.Lock()
	reply := s.pending[msg.ID]
	delete(s.pending, msg.ID)
	s.armIdleLocked()
	s.mu.Unlock()
	if reply == nil {
		return
	}
	var r clientReply
	switch {
	case msg.ErrorObject != nil:
		if e, ok := protocol.DecodeErrorObject(msg.ErrorObject); ok {
			r.err = e
		} else {
			r.err = errInvalidAnswer
		}
	case msg.Result != nil:
		r.result = msg.Result
	default:
		r.err = errInvalidAnswer
	}
	reply <- r // buffered: one answer per request
}

var _ server.ClientRequester = (*clientRequester)(nil)
