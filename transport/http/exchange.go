package http

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/internal/progress"
)

// exchange is one admitted request and the response that carries its
// answer. The goroutine serving the HTTP request owns the response and is
// its only writer (serve); the handler's goroutine hands it progress
// reports and request-scoped notifications through notes and waits for
// each to be written, so progress is never ahead of the wire and always
// before the result (docs/transport.md §10.3).
type exchange struct {
	id    protocol.ID
	req   server.Request
	split protocol.Split // req's: the decoder's (server.RequestFrom)
	token protocol.ID    // the progress token; set when progress streams
	// outcome receives the executor's one outcome; buffered, so the
	// executor's worker never waits on a response.
	outcome chan server.Outcome
	notes   chan *note
	// gone is closed when serve returned: the response is over, and
	// reports get ErrProgressClosed.
	gone chan struct{}
	// cancelled is closed when a legacy client cancels the request
	// (notifications/cancelled); nil for 2026 requests, whose
	// cancellation is closing the response.
	cancelled chan struct{}
	busy      atomic.Bool

	seq progress.Sequence // owned by serve
}

// note is one progress report, request-scoped notification, or frame
// already encoded (a request to the client, its cancellation).
type note struct {
	progress *server.Progress
	method   string
	params   any
	frame    []byte
	reply    chan error
}

func newExchange(msg *protocol.Message) *exchange {
	x := &exchange{
		id:      msg.ID,
		outcome: make(chan server.Outcome, 1),
		notes:   make(chan *note),
		gone:    make(chan struct{}),
	}
	x.req = server.RequestFrom(msg, &x.split)
	return x
}

// deliver is the executor's done callback: it never blocks.
func (x *exchange) deliver(o server.Outcome) {
	select {
	case x.outcome <- o:
	default:
	}
}

// Report implements server.ProgressReporter.
func (x *exchange) Report(p server.Progress) error {
	if err := progress.Check(p); err != nil {
		return err
	}
	return x.send(&note{progress: &p})
}

// Notify implements server.Notifier.
func (x *exchange) Notify(method string, params any) error {
	return x.send(&note{method: method, params: params})
}

// send hands n to serve and waits for it to be written or refused, at most
// progress.AckTimeout (then the slot stays held: later reports are busy).
func (x *exchange) send(n *note) error {
	if !x.busy.CompareAndSwap(false, true) {
		return server.ErrProgressBusy
	}
	timer := time.NewTimer(progress.AckTimeout)
	defer timer.Stop()
	n.reply = make(chan error, 1)
	select {
	case x.notes <- n:
	case <-x.gone:
		x.busy.Store(false)
		return server.ErrProgressClosed
	case <-timer.C:
		return server.ErrProgressTimeout
	}
	select {
	case err := <-n.reply:
		x.busy.Store(false)
		return err
	case <-timer.C:
		return server.ErrProgressTimeout
	}
}

// sendFrame hands an encoded frame to the response's writer and waits for
// it to be written. Unlike progress it is not one-at-a-time: a handler's
// several requests to the client may be on their way at once.
func (x *exchange) sendFrame(frame []byte) error {
	n := &note{frame: frame, reply: make(chan error, 1)}
	select {
	case x.notes <- n:
	case <-x.gone:
		return server.ErrProgressClosed
	}
	return <-n.reply
}

// write writes n on rsp as an SSE event; it is called by serve only.
func (x *exchange) write(rsp *responder, n *note) error {
	if n.frame != nil {
		if !rsp.event(n.frame) {
			return server.ErrProgressClosed
		}
		return nil
	}
	method, params := n.method, n.params
	if p := n.progress; p != nil {
		pp, err := x.seq.Next(x.token, *p)
		if err != nil {
			return err
		}
		method, params = "notifications/progress", pp
	}
	frame, err := protocol.AppendNotification(nil, method, params)
	if err != nil || !rsp.event(frame) {
		return server.ErrProgressClosed
	}
	if n.progress != nil {
		x.seq.Written(*n.progress)
	}
	return nil
}

// context returns the handler's context: it carries the exchange as the
// request's notifier, and as its progress reporter when the request has a
// valid progress token and the response may stream. Cancellation comes
// from the executor.
func (x *exchange) context(progressToken []byte, stream bool) context.Context {
	ctx := context.Background()
	if !stream {
		return ctx
	}
	ctx = server.WithNotifier(ctx, x)
	if progressToken != nil && x.req.Method != "subscriptions/listen" {
		if token, ok := protocol.ParseID(progressToken); ok {
			x.token = token
			ctx = server.WithProgress(ctx, x)
		}
	}
	return ctx
}
