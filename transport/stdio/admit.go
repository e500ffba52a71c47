package stdio

import (
	"context"
	"net/http"
	"sync"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/internal/cancelled"
)

// This file holds what the coordinator does with a line: classify it
// (docs/transport.md §5), admit a request to the executor (§13), answer
// initialize inline (§14), apply notifications and cancellations (§8, §9),
// hand a client's response to the request that waits for it (§7.1), and
// write an outcome (§13.3).

// nextLine handles the next line the reader delivered. The rest stay in
// the Reader, for this instance or, if it fails, the next.
func (c *coordinator) nextLine() {
	ev := c.reader.pending[0]
	c.reader.pending[0] = framing.Event{} // the batch may outlive the line
	c.reader.pending = c.reader.pending[1:]
	if len(c.reader.pending) == 0 {
		// An empty rest still holds the batch's array: an idle session
		// would keep its last batch.
		c.reader.pending = nil
	}
	c.line(ev)
}

// line handles a line from the reader; a lingering shutdown (see
// shutdownLinger) starts its wait afresh.
func (c *coordinator) line(ev framing.Event) {
	if c.linger != nil {
		c.linger.Stop()
		c.linger = nil
	}
	c.lazy = true
	c.handleLine(ev)
	c.lazy = false
}

func (c *coordinator) handleLine(ev framing.Event) {
	switch ev.Kind {
	case framing.KindLine:
		c.handleData(ev.Data)
	case framing.KindOversize:
		c.writeError(protocol.ID{}, protocol.LineLimitError(c.reader.limit))
	case framing.KindOverBudget:
		c.writeError(protocol.ID{}, BudgetError(c.reader.budget.Max()))
	case framing.KindEOF:
		c.endInput()
	case framing.KindError:
		c.log.Warn("stdio read failed; treating as end of input", "err", ev.Err)
		c.writeError(protocol.ID{}, protocol.ErrReadFailed)
		c.endInput()
	case framing.KindPanic:
		c.writeError(protocol.ID{}, protocol.ErrReaderPanicked)
		c.endInput()
	}
}

func (c *coordinator) handleData(line []byte) {
	// The request's work is allocated before its line is decoded, so that
	// the decoder's split lands in it (protocol.DecodeInto): one
	// allocation for both. A line that needs none leaves it for the next.
	w := c.nextWork
	if w == nil {
		w = new(work)
	}
	c.nextWork = nil
	msg := protocol.DecodeInto(line, w.members[:0])
	switch msg.Kind {
	case protocol.KindInvalid:
		c.writeError(msg.ID, msg.Err)
	case protocol.KindNotification:
		c.notification(&msg)
	case protocol.KindRequest:
		c.request(&msg, w)
		return
	case protocol.KindResponse:
		c.clientResponse(&msg)
	}
	// Blank lines are dropped silently (§3.3).
	if msg.Members == nil && msg.Meta == nil && msg.Arguments == nil {
		c.nextWork = w // untouched
	}
}

// request admits msg, whose work w is new (zero but for the members its
// split holds).
func (c *coordinator) request(msg *protocol.Message, w *work) {
	c.out.counters.request()
	if w, ok := c.inflight[msg.ID]; ok && w.inFlight() {
		c.writeError(msg.ID, protocol.ErrDuplicateID)
		return
	}
	if c.phase.shuttingDown() {
		c.writeError(msg.ID, protocol.ErrSessionClosed)
		return
	}
	if msg.Method == "initialize" && !msg.Modern {
		c.initialize(msg)
		return
	}
	w.id = msg.ID
	w.req = server.RequestFrom(msg, &w.split) // the decoder's split, decoded into w's members
	req := &w.req
	req.State = c.sess
	w.sink.c, w.sink.w = c, w
	w.ctx = executor.RequestContext{Context: context.Background(), Notifier: &w.sink}
	if !msg.Modern {
		req.Header = c.header
		w.ctx.Requester = &w.sink // docs/protocol.md §3.1
	}
	if msg.ProgressToken != nil && msg.Method != "subscriptions/listen" {
		if token, ok := protocol.ParseID(msg.ProgressToken); ok {
			w.sink.token = token
			w.ctx.Progress = &w.sink
		}
	}
	// The runtime's own methods that never block are answered here
	// (docs/architecture.md §4.1): no hop to a worker and back.
	if o, ok := c.disp.DispatchInline(&w.ctx, req); ok {
		c.answerInline(msg.ID, o)
		return
	}
	// Counted before it is submitted: a worker may run and end it (and
	// uncount it) before the executor's SubmitJob returns.
	c.out.counters.addInFlight(1)
	if err := c.exec.SubmitJob(&w.ctx, msg.ID, &w.job, w); err != nil {
		c.out.counters.addInFlight(-1)
		c.writeError(msg.ID, err)
		return
	}
	c.inflight[msg.ID] = w
	c.journalAdmit(msg.ID)
}

// answerInline writes the outcome of a request served on the coordinator.
func (c *coordinator) answerInline(id protocol.ID, o server.Outcome) {
	switch {
	case o.Err != nil:
		c.writeError(id, o.Err)
	case o.Stream != nil:
		// Never for the methods served inline; refused rather than lost.
		o.Stream.Close(server.Refused, "")
		c.writeError(id, protocol.ErrInvalidResult)
	default:
		c.writeResult(id, o.Result)
	}
}

// Run implements executor.Task: the request's handler, on a worker. Unless
// its outcome goes to the coordinator (see Done), the worker then encodes
// the final frame and, for a large one, makes room for it in the output
// (output.reserve): a connection whose client does not read makes its
// workers wait here rather than pile up frames. A worker that must wait
// gives its executor slot back first and holds its connection
// (executor.HoldConn), so that other sessions' work takes the slot while none
// of this connection's starts: its waiters stay at most the handlers it
// had running (docs/transport.md §11.5).
func (w *work) Run(ctx context.Context) server.Outcome {
	o := w.sink.c.disp.Dispatch(ctx, &w.req)
	if o.Stream != nil || w.sink.asked.Load() {
		return o
	}
	w.prepare(ctx, o)
	return server.Outcome{Result: preparedFrame{}}
}

// preparedFrame is the outcome Run hands the executor once w.frame holds
// the final frame (or nil: there is nothing to write); an outcome the
// executor makes itself (a deadline, a failed handler) is anything else.
type preparedFrame struct{}

// prepare encodes o as w's final frame into a pooled buffer and reserves
// room for it when it is large; when that fails (the request ended, the
// output failed) it leaves no frame.
func (w *work) prepare(ctx context.Context, o server.Outcome) {
	c := w.sink.c
	buf := frameBuffers.Get().(*[]byte)
	frame := encodeFinal((*buf)[:0], w.id, o, c, &w.splices)
	if size := len(frame) + w.splices.Len(); size > smallFrame && !c.out.reserve(ctx, w, size) {
		putFrameBuffer(buf, frame)
		w.splices = nil
		return
	}
	w.buf, w.frame = buf, frame
}

// encodeFinal appends the final frame of outcome o to dst, leaving its
// large texts to sp when sp is not nil (protocol.Splices: written from
// their own memory, never copied into the frame).
func encodeFinal(dst []byte, id protocol.ID, o server.Outcome, c *coordinator, sp *protocol.Splices) []byte {
	if o.Err != nil {
		return protocol.AppendError(dst, id, o.Err)
	}
	frame, ok := encodeResult(dst, id, o.Result, c, sp)
	if !ok {
		frame = protocol.AppendError(dst, id, protocol.ErrInvalidResult)
	}
	return frame
}

// Done implements executor.Task: the worker that finished the request
// commits its final frame itself (docs/architecture.md §4.2, see
// output), and wakes the coordinator only when it must. A listen stream,
// and a legacy request that sent requests to the client (their
// cancellations precede its response), go to the coordinator. Delivering
// never blocks the worker (see mailbox). An outcome the executor made
// (ErrTimedOut from its deadline timer, ErrWorkerFailed) is committed
// without waiting for room: it is one small frame, and the timer must not
// wait on a connection.
func (w *work) Done(o server.Outcome) {
	c := w.sink.c
	var buf *[]byte
	var frame []byte
	switch _, prepared := o.Result.(preparedFrame); {
	case prepared:
		buf, frame = w.buf, w.frame
		w.buf, w.frame = nil, nil
		if buf == nil {
			return // ended while Run made room: nothing to write
		}
		if sp := w.splices; len(sp) > 0 {
			w.splices = nil
			wake, kept := c.out.finishParts(w, sp.Parts(nil, frame), len(frame)+sp.Len())
			if !kept {
				putFrameBuffer(buf, frame)
			}
			if wake {
				c.nudge()
			}
			return
		}
	case o.Stream != nil || w.sink.asked.Load():
		w.outcome = o
		c.mail.post(message{kind: msgOutcome, w: w})
		return
	default:
		buf = frameBuffers.Get().(*[]byte)
		frame = encodeFinal((*buf)[:0], w.id, o, c, nil)
	}
	wake, kept := c.out.finish(w, frame)
	if !kept {
		putFrameBuffer(buf, frame)
	}
	if wake {
		c.nudge()
	}
}

// putFrameBuffer gives buf, holding frame, back to frameBuffers unless it
// grew large: a pool must not keep a large answer's memory.
func putFrameBuffer(buf *[]byte, frame []byte) {
	if cap(frame) <= maxBatch {
		*buf = frame[:0]
		frameBuffers.Put(buf)
	}
}

// frameBuffers hold the buffers workers encode final frames into: most
// are copied into the output at once, so one buffer serves many.
var frameBuffers = sync.Pool{New: func() any { return new([]byte) }}

// inFlight reports whether w still holds its id: a request without its
// final frame, or an open listen stream (docs/transport.md §7).
func (w *work) inFlight() bool {
	return w.state.Load() == live || w.stream != nil
}

// initialize answers a legacy initialize inline, so a client may pipeline the
// requests that follow it (docs/transport.md §14).
func (c *coordinator) initialize(msg *protocol.Message) {
	result, version, perr := c.disp.Initialize(c.sess, msg.Params)
	if perr != nil {
		c.writeError(msg.ID, perr)
		return
	}
	if !c.writeResult(msg.ID, result) {
		return
	}
	c.sess.SetNegotiated(version)
	c.setVersion(version)
}

// setVersion records the negotiated version whose header later legacy
// requests carry (docs/transport.md §14).
func (c *coordinator) setVersion(version string) {
	if c.header.Get(server.HeaderProtocolVersion) == version {
		return
	}
	if h, ok := versionHeaders[version]; ok {
		c.header = h
		return
	}
	c.header = http.Header{server.HeaderProtocolVersion: {version}}
}

// versionHeaders are the headers of the legacy versions, shared by every
// connection (they are read-only) so an idle connection holds none.
var versionHeaders = map[string]http.Header{
	protocol.Version20251125: {server.HeaderProtocolVersion: {protocol.Version20251125}},
	protocol.Version20250618: {server.HeaderProtocolVersion: {protocol.Version20250618}},
}

func (c *coordinator) notification(msg *protocol.Message) {
	if msg.Method == "notifications/cancelled" {
		c.cancel(&msg.Split)
		return
	}
	// Nothing else is ever answered (§8); the runtime may note it
	// (notifications/initialized).
	c.disp.Notify(c.sess, msg.Method, msg.Params)
}

// cancel applies a notifications/cancelled that is valid by §9 (its
// params split by the decoder); anything else has no effect.
func (c *coordinator) cancel(p *protocol.Split) {
	id, reason, ok := cancelled.Parse(p)
	if !ok {
		return
	}
	w, ok := c.inflight[id]
	if !ok {
		return
	}
	if w.stream != nil {
		c.closeStream(w, server.Cancelled, reason)
		return
	}
	delete(c.inflight, id)
	if !c.out.end(w, dropped) {
		return // its final frame was committed first (§9, effect 3)
	}
	c.journalDone(id, false)
	c.exec.Cancel(id)
	c.cancelClientRequestsOf(w)
}

// complete writes a request's outcome that came to the coordinator,
// unless the request is no longer in flight (cancelled, timed out, ended
// by shutdown): then nothing is written.
func (c *coordinator) complete(w *work, o server.Outcome) {
	if c.inflight[w.id] != w || w.state.Load() != live {
		return
	}
	c.journalDone(w.id, true)
	c.cancelClientRequestsOf(w)
	switch {
	case o.Err != nil:
		c.writeErrorFor(w, w.id, o.Err)
	case o.Stream != nil:
		c.out.end(w, done) // the request has its outcome; the stream holds the id
		c.openStream(w, o.Stream)
	default:
		c.writeResultFor(w, w.id, o.Result)
	}
	if w.stream == nil {
		delete(c.inflight, w.id)
	}
}
