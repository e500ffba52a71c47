package stdio

import (
	"context"
	"net/http"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// This file holds what the coordinator does with a line: classify it
// (transport.md §5), admit a request to the executor (§13), answer
// initialize inline (§14), apply notifications and cancellations (§8, §9),
// hand a client's response to the request that waits for it (§7.1), and
// write an outcome (§13.3).

// nextLine handles the next line the reader delivered. The rest stay in
// the Reader, for this instance or, if it fails, the next.
func (c *coordinator) nextLine() {
	ev := c.reader.pending[0]
	c.reader.pending[0] = lineEvent{} // the batch may outlive the line
	c.reader.pending = c.reader.pending[1:]
	c.line(ev)
}

// line handles a line from the reader; a lingering shutdown (see
// shutdownLinger) starts its wait afresh.
func (c *coordinator) line(ev lineEvent) {
	if c.linger != nil {
		c.linger.Stop()
		c.linger = nil
	}
	c.lazy = true
	c.handleLine(ev)
	c.lazy = false
}

func (c *coordinator) handleLine(ev lineEvent) {
	switch ev.kind {
	case lineData:
		c.handleData(ev.data)
	case lineOversize:
		c.writeError(protocol.ID{}, protocol.LineLimitError(c.reader.limit))
	case lineEOF:
		c.endInput()
	case lineError:
		c.log.Warn("stdio read failed; treating as end of input", "err", ev.err)
		c.writeError(protocol.ID{}, protocol.ErrReadFailed)
		c.endInput()
	case linePanic:
		c.writeError(protocol.ID{}, protocol.ErrReaderPanicked)
		c.endInput()
	}
}

func (c *coordinator) handleData(line []byte) {
	msg := protocol.Decode(line)
	switch msg.Kind {
	case protocol.KindInvalid:
		c.writeError(msg.ID, msg.Err)
	case protocol.KindNotification:
		c.notification(&msg)
	case protocol.KindRequest:
		c.request(&msg)
	case protocol.KindResponse:
		c.clientResponse(&msg)
	}
	// Blank lines are dropped silently (§3.3).
}

func (c *coordinator) request(msg *protocol.Message) {
	c.stats.request()
	if _, ok := c.inflight[msg.ID]; ok {
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
	w := &work{id: msg.ID, split: msg.Split, req: server.Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, State: c.sess}}
	req := &w.req
	req.Split = &w.split // the decoder's split: the runtime splits nothing again
	w.sink.c, w.sink.w = c, w
	ctx := server.WithNotifier(context.Background(), &w.sink)
	if !msg.Modern {
		req.Header = c.header
		ctx = server.WithClientRequester(ctx, &w.sink) // protocol.md §3.1
	}
	if msg.ProgressToken != nil && msg.Method != "subscriptions/listen" {
		if token, ok := protocol.ParseID(msg.ProgressToken); ok {
			w.sink.token = token
			ctx = server.WithProgress(ctx, &w.sink)
		}
	}
	run := func(ctx context.Context) server.Outcome { return c.disp.Dispatch(ctx, req) }
	// Delivering never blocks the worker (see mailbox).
	done := func(o server.Outcome) {
		w.outcome = o
		c.mail.post(message{kind: msgOutcome, w: w})
	}
	if err := c.exec.Submit(ctx, msg.ID, run, done); err != nil {
		c.writeError(msg.ID, err)
		return
	}
	c.inflight[msg.ID] = w
	c.journalAdmit(msg.ID)
}

// initialize answers a legacy initialize inline, so a client may pipeline the
// requests that follow it (transport.md §14).
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
// requests carry (transport.md §14).
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
	id, ok := protocol.ParseID(p.Members.Value("requestId"))
	if !ok {
		return
	}
	var reason string
	if raw, present := p.Members.Get("reason"); present {
		if reason, ok = protocol.String(raw); !ok {
			return
		}
	}
	if p.Members.Has("_meta") && !p.MetaObject {
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
	c.journalDone(id, false)
	c.exec.Cancel(id)
	c.cancelClientRequestsOf(w)
}

// complete writes a request's outcome, unless the request is no longer in
// flight (cancelled, timed out, ended by shutdown): then nothing is written.
func (c *coordinator) complete(w *work, o server.Outcome) {
	if c.inflight[w.id] != w {
		return
	}
	delete(c.inflight, w.id)
	c.journalDone(w.id, true)
	c.cancelClientRequestsOf(w)
	switch {
	case o.Err != nil:
		c.writeError(w.id, o.Err)
	case o.Stream != nil:
		c.openStream(w, o.Stream)
	default:
		c.writeResult(w.id, o.Result)
	}
}
