package http

import (
	"context"
	nethttp "net/http"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// modern serves a 2026-07-28 POST (docs/protocol.md §13.3): every exchange is
// one POST and nothing is kept between them. Each request is its own
// connection of the executor, so equal ids from different clients (or
// the same one) never collide, and closing the response cancels it.
func (h *Handler) modern(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message, v View) {
	disp := v.Dispatcher
	timeout := h.o.WriteTimeout
	// §5.2 steps 2 to 8 run here, once, before the executor, so that
	// their errors get 400 before anything is committed: the runtime's
	// admission, with the headers (step 6) checked between its steps 5
	// and 7, on the params as the decoder split them (msg.Split). A
	// request routed here by its header (§13.2 steps 4 and 5) may lack
	// an object _meta: step 2 says which. The runtime then takes the
	// admission from the request instead of checking again.
	admitted, aerr := server.AdmitModern(&msg.Split, h.versions, func(version string) *protocol.Error {
		return checkModernHeaders(r.Header, msg, version, disp)
	})
	if aerr != nil {
		refuse(w, admitStatus(aerr), msg.ID, aerr.Err, timeout)
		return
	}
	listen := msg.Method == "subscriptions/listen"
	sse := accepts(r, "text/event-stream")
	if listen && !sse {
		refuse(w, nethttp.StatusNotAcceptable, msg.ID, errListenAccept, timeout)
		return
	}
	stream := sse && (listen || msg.ProgressToken != nil)
	x := newExchange(msg)
	x.req.Admission = admitted
	if v.Caller != nil {
		// The state the runtime would make for a request without one,
		// carrying who asks.
		x.req.State = server.NewSessionState(0)
		x.req.State.SetCaller(v.Caller)
		if p := h.peer(r); p.known() {
			x.req.State.SetPeer(server.Peer{Known: true, UID: p.UID}) // the audit log's
		}
	}
	conn := h.o.Executor.RequestConn()
	run := func(ctx context.Context) server.Outcome { return disp.Dispatch(ctx, &x.req) }
	if err := conn.Submit(x.context(msg.ProgressToken, stream), msg.ID, run, x.deliver); err != nil {
		refuse(w, nethttp.StatusOK, msg.ID, err, timeout)
		return
	}
	h.served[0].Add(1)
	rsp := newResponder(w, timeout)
	if stream {
		h.streams.Add(1)
		defer h.streams.Add(-1)
	}
	o, end := h.await(r.Context(), x, rsp, stream, nil)
	switch end {
	case endClient:
		conn.Cancel(msg.ID) // closing the response is the cancellation
		return
	case endGrace:
		conn.Cancel(msg.ID)
		rsp.json(nethttp.StatusOK, protocol.AppendError(nil, msg.ID, errClosed))
		return
	}
	if o.Stream != nil {
		h.listen(r.Context(), rsp, msg.ID, o.Stream)
		return
	}
	h.final(rsp, msg.ID, o, modernStatus)
}

// admitStatus is the status of a 2026 request the runtime's admission
// refused (§5.2 steps 2 to 8): every such refusal is the request's fault,
// found before anything is committed.
func admitStatus(*server.AdmitError) int { return nethttp.StatusBadRequest }

// modernStatus is the status of a 2026 error answered by the runtime
// (§13.3's table); the errors found before dispatch got 400 already
// (admitStatus).
func modernStatus(e *protocol.Error) int {
	switch e.Code {
	case protocol.CodeMethodNotFound:
		return nethttp.StatusNotFound
	case protocol.CodeHeaderMismatch, protocol.CodeMissingCapability, protocol.CodeUnsupportedVersion, protocol.CodeParseError:
		return nethttp.StatusBadRequest
	}
	return nethttp.StatusOK
}

// legacyStatus: a legacy session's JSON-RPC errors, -32601 included, come
// with 200 (§13.4).
func legacyStatus(*protocol.Error) int { return nethttp.StatusOK }

// endReason says why await returned.
type endReason uint8

const (
	endOutcome   endReason = iota // the outcome arrived
	endClient                     // the client went away, or a write failed
	endGrace                      // Shutdown's grace period ended
	endSession                    // the legacy session ended (DELETE, idle)
	endCancelled                  // the client cancelled the legacy request
)

// await writes x's progress and notifications as SSE events (when stream)
// until its outcome arrives or the response must end. It is the response's
// writer loop; x's reports are refused once it returns.
func (h *Handler) await(ctx context.Context, x *exchange, rsp *responder, stream bool, sessionEnded <-chan struct{}) (server.Outcome, endReason) {
	defer close(x.gone)
	var keep <-chan time.Time
	var timer *time.Timer
	if stream {
		timer = time.NewTimer(h.o.KeepAlive)
		defer timer.Stop()
		keep = timer.C
	}
	for {
		select {
		case o := <-x.outcome:
			return o, endOutcome
		case n := <-x.notes:
			n.reply <- x.write(rsp, n)
			if rsp.failed {
				return server.Outcome{}, endClient
			}
			if timer != nil {
				timer.Reset(h.o.KeepAlive)
			}
		case <-keep:
			if !rsp.comment() {
				return server.Outcome{}, endClient
			}
			timer.Reset(h.o.KeepAlive)
		case <-ctx.Done():
			return server.Outcome{}, endClient
		case <-h.graceEnd:
			return server.Outcome{}, endGrace
		case <-sessionEnded:
			return server.Outcome{}, endSession
		case <-x.cancelled:
			return server.Outcome{}, endCancelled
		}
	}
}

// final writes a request's outcome: an error with the era's status, or its
// result (a result that cannot be encoded is "Server produced an invalid
// result", docs/transport.md §11.1). On a committed stream it is the last event.
func (h *Handler) final(rsp *responder, id protocol.ID, o server.Outcome, status func(*protocol.Error) int) {
	if o.Err != nil {
		rsp.json(status(o.Err), protocol.AppendError(nil, id, o.Err))
		return
	}
	var frame []byte
	var err error
	if o.Result != nil {
		frame, err = protocol.AppendResult(nil, id, o.Result)
	}
	if o.Result == nil || err != nil {
		h.o.Logger.Error("result cannot be encoded", "id", id, "err", err)
		frame = protocol.AppendError(nil, id, protocol.ErrInvalidResult)
	}
	rsp.json(nethttp.StatusOK, frame)
}
