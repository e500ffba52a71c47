package stdio

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Serve runs the connection until input has ended and every admitted request
// has finished (it returns nil), until ctx is cancelled and the shutdown of
// transport.md §12.4 has completed (nil), or until the write path fails (an
// *OutputError, at once, without waiting for input to end). Invalid limits
// are refused before any byte is read.
func (t *Transport) Serve(ctx context.Context) error {
	if err := t.Validate(); err != nil {
		return err
	}
	// The setup is in open, and the teardown in run's finish, so that
	// neither is on the stack for the connection's life: an idle session's
	// coordinator then fits in a small stack.
	c, err := t.open()
	if err != nil {
		return err
	}
	return c.run(ctx)
}

// open prepares the coordinator. What it creates because the Transport did
// not supply it (an executor, a reader, a session) is released by release.
func (t *Transport) open() (*coordinator, error) {
	exec := t.Executor
	var ownExec *server.Executor
	if exec == nil {
		var err error
		if exec, err = server.NewExecutor(server.ExecutorLimits{
			MaxConcurrency: t.Limits.MaxConcurrency,
			MaxQueue:       t.Limits.MaxQueue,
			RequestTimeout: t.Limits.RequestTimeout,
		}); err != nil {
			return nil, err
		}
		ownExec = exec
	}
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	reader := t.Reader
	var ownReader *Reader
	if reader == nil {
		reader = NewReader(t.In, t.Limits.MaxLineBytes)
		ownReader = reader
	}
	lim := t.Limits.WithDefaults()
	c := &coordinator{
		log:    log,
		disp:   t.Dispatcher,
		exec:   exec.Conn(),
		w:      newFrameWriter(t.Out, lim.WriteTimeout),
		reader: reader,
		fault:  t.Fault,
		sess:   t.State,
		grace:  lim.ShutdownGrace,
		// A few outcomes may wait while the coordinator writes; more
		// would cost every idle connection memory and gain nothing, as
		// the coordinator takes them all before each write (gather).
		inbox:     make(chan message, 4),
		done:      make(chan struct{}),
		inflight:  make(map[protocol.ID]*work),
		stats:     counting{to: t.Counters},
		ownExec:   ownExec,
		ownReader: ownReader,
	}
	if c.sess == nil {
		c.sess = server.NewSessionState(lim.MaxSubscriptions)
		c.ownSess = c.sess
	}
	if v := c.sess.Negotiated(); v != "" {
		c.setVersion(v)
	}
	c.pollSession()
	return c, nil
}

// release closes what open created, after teardown.
func (c *coordinator) release() {
	if c.ownSess != nil {
		c.ownSess.Close()
	}
	if c.ownReader != nil {
		c.ownReader.Close()
	}
	if c.ownExec != nil {
		c.ownExec.Close()
	}
}

// coordinator is the coordinator: the one goroutine that owns a connection's state.
// Lines arrive from the reader; outcomes, progress reports and stream events
// arrive on inbox. It never waits on a handler, and it writes every frame
// itself (see commit for when frames share a write).
type coordinator struct {
	log   *slog.Logger
	disp  server.Dispatcher
	exec  *server.ExecConn
	w     *frameWriter
	sess  *server.SessionState
	grace time.Duration

	reader *Reader
	fault  <-chan struct{}
	inbox  chan message
	done   chan struct{} // closed when the coordinator has returned
	pumps  sync.WaitGroup

	inflight map[protocol.ID]*work // admitted requests and open listen streams
	// feedWake says when the legacy session may have a notification to
	// write (see pollSession); nil after EOF.
	feedWake <-chan struct{}
	// header is Mcp-Protocol-Version: the negotiated legacy version, nil
	// before initialize; shared by requests, read-only.
	header   http.Header
	eof      bool
	closing  bool        // shutdown has begun
	linger   *time.Timer // set while a shutdown lingers (see shutdownLinger)
	graceEnd *time.Timer // set once shutdown has begun
	yielded  bool        // gather yielded once since frames began to wait
	failed   error       // the terminal output failure
	out      []byte      // committed frames not yet written (see commit)
	lazy     bool        // frames committed now may wait in out
	stats    counting    // what Counters show

	// What open created for this connection alone (release closes it).
	ownExec   *server.Executor
	ownReader *Reader
	ownSess   *server.SessionState
}

// work is one admitted request, and later possibly its listen stream.
// Its request and sink live in it, one allocation for the three.
type work struct {
	id   protocol.ID
	req  server.Request
	sink requestSink

	stream server.Stream // set while a listen stream is open
	cancel context.CancelFunc
	next   chan struct{} // the previous event was written; ask for the next
}

type messageKind uint8

const (
	msgOutcome messageKind = iota
	msgProgress
	msgNotify
	msgEvent
)

// message is everything that reaches the coordinator besides lines. It is
// small, because every connection's inbox buffers several: what only the
// rarer kinds carry is behind note.
type message struct {
	kind    messageKind
	w       *work
	outcome server.Outcome
	note    *note
}

// note is a progress report, a request-scoped notification or a stream
// event.
type note struct {
	sink     *requestSink
	progress server.Progress
	method   string
	params   any
	reply    chan error
	event    server.Event
	err      error
}

// send hands m to the coordinator, or drops it once the coordinator has
// returned (its request is gone with the connection).
func (c *coordinator) send(m message) {
	select {
	case c.inbox <- m:
	case <-c.done:
	}
}

func (c *coordinator) run(ctx context.Context) (err error) {
	// The loop keeps its frame small and leaves the work to methods: an
	// idle session's coordinator waits here, and a small stack is most of
	// what an idle session costs.
	defer c.finish(&err)
	ctxDone := ctx.Done()
	for c.failed == nil {
		if c.settle() {
			return nil
		}
		if len(c.reader.pending) > 0 {
			c.nextLine()
			continue
		}
		var batches <-chan []lineEvent
		if !c.eof {
			batches = c.reader.batches
		}
		if len(c.out) > 0 {
			c.gather(batches)
			continue
		}
		if c.closing {
			if c.waitClosing(batches) {
				return c.failed
			}
			continue
		}
		select {
		case c.reader.pending = <-batches:
		case <-c.feedWake:
			c.pollSession()
		case <-c.fault:
			panic("injected fault")
		case m := <-c.inbox:
			c.handleMessage(m)
		case <-ctxDone:
			ctxDone = nil
			c.shutdown(ctx)
		}
	}
	return c.failed
}

// waitClosing is run's wait once shutdown has begun, with the two timers of
// the shutdown besides: the linger ending (see shutdownLinger) and the
// grace period's end (then what is admitted is cancelled). It reports
// whether the connection is done. It repeats run's other cases rather than
// sharing one select with them: an idle coordinator's stack must stay
// under a quarter of 8 KiB for the runtime to halve it, and one
// select of every case was measured 8 bytes from that line.
func (c *coordinator) waitClosing(batches <-chan []lineEvent) (done bool) {
	var linger <-chan time.Time
	if c.linger != nil {
		linger = c.linger.C
	}
	select {
	case <-linger:
		return true
	case <-c.graceEnd.C:
		c.expire()
		return true
	case c.reader.pending = <-batches:
	case <-c.feedWake:
		c.pollSession()
	case <-c.fault:
		panic("injected fault")
	case m := <-c.inbox:
		c.handleMessage(m)
	}
	return false
}

// finish ends run: a panic is recovered and the instance abandoned, and
// otherwise the frames still waiting are written. Then the connection is
// torn down and what open created is released.
func (c *coordinator) finish(err *error) {
	defer c.release()
	defer c.teardown()
	if c.linger != nil {
		c.linger.Stop()
	}
	if c.graceEnd != nil {
		c.graceEnd.Stop()
	}
	if v := recover(); v != nil {
		c.log.Error("session coordinator failed; handing the device on", "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		*err = c.abandon(v)
		return
	}
	if *err == nil && !c.flush() {
		*err = c.failed
	}
}

// settle publishes the load and reports whether the connection is done:
// input ended and nothing is admitted. Shutting down with nothing admitted,
// it lingers instead, to answer the lines the client already sent
// ("Session closed by server") before handing the device back, rather than
// leaving them unread.
func (c *coordinator) settle() (done bool) {
	c.publish()
	if !(c.eof || c.closing) || len(c.inflight) > 0 {
		return false
	}
	if c.eof {
		return true
	}
	if c.linger == nil {
		c.linger = time.NewTimer(shutdownLinger)
	}
	return false
}

// gather is a turn of the loop while frames wait in c.out: it takes what
// is already at hand, so that frames ready together go out in one write,
// and writes them when nothing is. The reader or a worker this goroutine
// just woke may not have run yet, so it yields once before writing.
func (c *coordinator) gather(batches <-chan []lineEvent) {
	select {
	case c.reader.pending = <-batches:
		return
	case m := <-c.inbox:
		c.handleMessage(m)
		return
	default:
	}
	if !c.yielded {
		c.yielded = true
		runtime.Gosched()
		return
	}
	c.yielded = false
	c.flush()
}

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
	}
	// Blank lines and client responses are dropped silently (§3.3, §7.1).
}

func (c *coordinator) request(msg *protocol.Message) {
	c.stats.request()
	if _, ok := c.inflight[msg.ID]; ok {
		c.writeError(msg.ID, protocol.ErrDuplicateID)
		return
	}
	if c.closing {
		c.writeError(msg.ID, protocol.ErrSessionClosed)
		return
	}
	if msg.Method == "initialize" && !msg.Modern {
		c.initialize(msg)
		return
	}
	w := &work{id: msg.ID, req: server.Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, State: c.sess}}
	req := &w.req
	if !msg.Modern {
		req.Header = c.header
	}
	w.sink.c, w.sink.w = c, w
	ctx := server.WithNotifier(context.Background(), &w.sink)
	if msg.ProgressToken != nil && msg.Method != "subscriptions/listen" {
		if token, ok := protocol.ParseID(msg.ProgressToken); ok {
			w.sink.token = token
			ctx = server.WithProgress(ctx, &w.sink)
		}
	}
	run := func(ctx context.Context) server.Outcome { return c.disp.Dispatch(ctx, req) }
	done := func(o server.Outcome) { c.send(message{kind: msgOutcome, w: w, outcome: o}) }
	if err := c.exec.Submit(ctx, msg.ID, run, done); err != nil {
		c.writeError(msg.ID, err)
		return
	}
	c.inflight[msg.ID] = w
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

// shutdownLinger is how long a shutting-down connection with nothing in
// flight keeps reading, so requests already on their way are answered
// "Session closed by server" (transport.md §12.4 step 2) instead of
// finding the connection gone. Each line read restarts it; the grace
// period still bounds the whole shutdown.
const shutdownLinger = 25 * time.Millisecond

// ErrKilled, as the cause of Serve's context (context.WithCancelCause),
// ends the connection as a shutdown does but without the grace period:
// what is admitted is cancelled and answered "Session closed by server" at
// once. Serve then returns nil, as after a shutdown.
var ErrKilled = errors.New("session killed")

// ErrSessionFailed is returned by Serve when the coordinator itself failed
// (a panic, or an injected fault): the device is still good, and a new
// Transport with the same Reader and State continues on it.
var ErrSessionFailed = errors.New("session coordinator failed")

// abandon ends a failed instance before the device is handed on
// (transport.md §12.4): listen streams get notifications/cancelled, admitted
// requests get "Session closed by server".
func (c *coordinator) abandon(cause any) error {
	c.lazy = false
	c.flush()
	for id, w := range c.inflight {
		if c.failed != nil {
			break
		}
		delete(c.inflight, id)
		if w.stream != nil {
			c.writeNotification("notifications/cancelled", cancelledParams{RequestID: id, Reason: "Subscription closed by server"})
			c.closeStream(w, server.ClosedByServer, "")
			continue
		}
		c.exec.Cancel(id)
		c.writeError(id, protocol.ErrSessionClosed)
	}
	if c.failed != nil {
		return c.failed
	}
	return fmt.Errorf("%w: %v", ErrSessionFailed, cause)
}

func (c *coordinator) notification(msg *protocol.Message) {
	if msg.Method == "notifications/cancelled" {
		c.cancel(msg.Params)
		return
	}
	// Nothing else is ever answered (§8); the runtime may note it
	// (notifications/initialized).
	c.disp.Notify(c.sess, msg.Method, msg.Params)
}

// cancel applies a notifications/cancelled that is valid by §9; anything else
// has no effect.
func (c *coordinator) cancel(params json.RawMessage) {
	p, ok := protocol.Members(params)
	if !ok {
		return
	}
	id, ok := protocol.ParseID(p["requestId"])
	if !ok {
		return
	}
	var reason string
	if raw, present := p["reason"]; present {
		if reason, ok = protocol.String(raw); !ok {
			return
		}
	}
	if raw, present := p["_meta"]; present {
		if _, ok := protocol.Members(raw); !ok {
			return
		}
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
	c.exec.Cancel(id)
}

func (c *coordinator) handleMessage(m message) {
	switch m.kind {
	case msgOutcome:
		c.lazy = true
		c.complete(m.w, m.outcome)
		c.lazy = false
	case msgProgress:
		m.note.reply <- c.progress(m.note.sink, m.note.progress)
	case msgNotify:
		m.note.reply <- c.notify(m.note.sink, m.note.method, m.note.params)
	case msgEvent:
		c.streamEvent(m.w, m.note.event, m.note.err)
	}
}

// complete writes a request's outcome, unless the request is no longer in
// flight (cancelled, timed out, ended by shutdown): then nothing is written.
func (c *coordinator) complete(w *work, o server.Outcome) {
	if c.inflight[w.id] != w {
		return
	}
	delete(c.inflight, w.id)
	switch {
	case o.Err != nil:
		c.writeError(w.id, o.Err)
	case o.Stream != nil:
		c.openStream(w, o.Stream)
	default:
		c.writeResult(w.id, o.Result)
	}
}

// endInput handles EOF (§12.1): reading stops, listen streams close silently,
// admitted requests continue.
func (c *coordinator) endInput() {
	c.eof = true
	c.feedWake = nil
	for _, w := range c.inflight {
		if w.stream != nil {
			c.closeStream(w, server.Disconnected, "")
		}
	}
}

// shutdown begins the daemon shutdown of §12.4: listen streams are ended
// with notifications/cancelled, new requests are refused, admitted ones may
// finish within the grace period, which is none when ctx was cancelled
// with ErrKilled.
func (c *coordinator) shutdown(ctx context.Context) {
	c.closing = true
	grace := c.grace
	if errors.Is(context.Cause(ctx), ErrKilled) {
		grace = 0
	}
	c.graceEnd = time.NewTimer(grace)
	for _, w := range c.inflight {
		if w.stream == nil || c.failed != nil {
			continue
		}
		c.writeNotification("notifications/cancelled", cancelledParams{RequestID: w.id, Reason: "Subscription closed by server"})
		c.closeStream(w, server.ClosedByServer, "")
	}
}

// expire ends the grace period: what is still admitted is cancelled and
// answered "Session closed by server".
func (c *coordinator) expire() {
	for id, w := range c.inflight {
		delete(c.inflight, id)
		if w.stream != nil {
			c.closeStream(w, server.ClosedByServer, "")
			continue
		}
		c.exec.Cancel(id)
		c.writeError(id, protocol.ErrSessionClosed)
	}
}

type cancelledParams struct {
	RequestID protocol.ID `json:"requestId"`
	Reason    string      `json:"reason"`
}

// teardown runs when the coordinator returns, on every path.
func (c *coordinator) teardown() {
	close(c.done)
	c.exec.CancelAll()
	for _, w := range c.inflight {
		if w.stream != nil {
			c.closeStream(w, server.Disconnected, "")
		}
	}
	clear(c.inflight)
	c.w.close()
	c.pumps.Wait()
	c.publishEnd()
}
