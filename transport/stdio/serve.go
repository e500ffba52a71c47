package stdio

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// The coordinator is split by idea: this file holds its life (open, the
// loop, finish); admit.go the lines and what they admit; phase.go the end
// of input, shutdown and restart; mailbox.go the messages from handlers;
// clientrequest.go the requests to the client; frames.go the write path;
// progress.go and stream.go what handlers and sources send.

// Serve runs the connection until input has ended and every admitted request
// has finished (it returns nil), until ctx is cancelled and the shutdown of
// docs/transport.md §12.4 has completed (nil), or until the write path fails (an
// *OutputError, at once, without waiting for input to end). Invalid limits
// are refused before any byte is read.
func (t *Transport) Serve(ctx context.Context) error {
	if err := t.Validate(); err != nil {
		return err
	}
	// The setup is in open, and the teardown in run's finish, so that
	// neither is on the stack for the connection's life: an idle session's
	// coordinator then fits in a small stack.
	c, err := t.open(ctx)
	if err != nil {
		return err
	}
	return c.run(ctx)
}

// open prepares the coordinator. What it creates because the Transport did
// not supply it (an executor, a reader, a session) is released by release.
func (t *Transport) open(ctx context.Context) (*coordinator, error) {
	exec := t.Executor
	var ownExec *executor.Executor
	if exec == nil {
		var err error
		if exec, err = executor.New(executor.Limits{
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
		log:       log,
		disp:      t.Dispatcher,
		exec:      exec.Conn(),
		out:       newOutput(framing.NewWriter(t.Out, lim.WriteTimeout), t.Counters, lim.MaxPendingOutputBytes, reader.budget),
		reader:    reader,
		fault:     faults.From(ctx).C(),
		sess:      t.State,
		grace:     lim.ShutdownGrace,
		upgrade:   lim.UpgradeGrace,
		journal:   t.Journal,
		mail:      newMailbox(),
		inflight:  make(map[protocol.ID]*work),
		ownExec:   ownExec,
		ownReader: ownReader,
	}
	if c.journal != nil {
		// The journal hears of each answer from the coordinator, soon
		// after it is written: workers wake it for every request they end.
		c.out.setEager()
	}
	if c.sess == nil {
		c.sess = server.NewSessionState(lim.MaxSubscriptions)
		c.ownSess = c.sess
	}
	if v := c.sess.Negotiated(); v != "" {
		c.setVersion(v)
	}
	if t.Resume != nil {
		c.resume(t.Resume)
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

// coordinator is the one goroutine that owns a connection's state. Lines
// arrive from the reader; everything else arrives in the mailbox. It never
// waits on a handler. It commits every frame but the final ones workers
// commit themselves (output), and writes what may not be written without
// waiting (see commit for when frames share a write).
type coordinator struct {
	log   *slog.Logger
	disp  server.Dispatcher
	exec  *executor.Conn
	out   *output
	sess  *server.SessionState
	grace time.Duration

	reader *Reader
	fault  <-chan struct{} // a test's injected failure (internal/faults); nil otherwise
	mail   mailbox
	spare  []message // the mailbox's other slice (see take)
	// nextWork is a work a line did not need, for the next; dropped
	// whenever the coordinator waits, so that an idle session holds none.
	nextWork *work
	pumps    sync.WaitGroup

	inflight map[protocol.ID]*work // admitted requests and open listen streams
	// calls are the requests sent to the client and not yet answered,
	// by their "snodod:<n>" id; nil while there are none.
	calls map[protocol.ID]*clientCall
	// feedWake says when the legacy session may have a notification to
	// write (see pollSession); nil after EOF.
	feedWake <-chan struct{}
	// header is Mcp-Protocol-Version: the negotiated legacy version, nil
	// before initialize; shared by requests, read-only.
	header   http.Header
	phase    phase
	linger   *time.Timer // set while a shutdown lingers (see shutdownLinger)
	graceEnd *time.Timer // set once shutdown has begun
	yielded  bool        // gather yielded once since frames began to wait
	failed   error       // the terminal output failure
	scratch  []byte      // the frame being encoded (see commit)
	lazy     bool        // frames committed now may wait to be written
	swept    []*work     // the output's finished list, for reuse (see sweep)

	// What open created for this connection alone (release closes it).
	ownExec   *executor.Executor
	ownReader *Reader
	ownSess   *server.SessionState

	// A hand-over (handoff.go): its grace, and whether one has begun
	// (nothing is read or handled any more).
	upgrade time.Duration
	handoff bool
	// The Journal, if any (journal.go), and the ids answered by frames
	// committed but not yet written.
	journal     Journal
	unjournaled []protocol.ID
	// streams counts the open listen streams (they are in inflight too).
	streams int
}

// workMembers is how many members of a request's params, params._meta
// and params.arguments its work holds: the 6 of a 2026 tools/call with
// one argument, and one more within work's size class (1,024 bytes).
const workMembers = 7

// work is one admitted request, and later possibly its listen stream.
// Its request, context, sink and outcome live in it, one allocation for
// all; it is the executor's Task.
type work struct {
	id    protocol.ID
	split protocol.Split // the decoder's, for req.Split
	// members hold split's members, when they fit (protocol.DecodeInto).
	members [workMembers]protocol.Member
	req     server.Request
	ctx     executor.RequestContext
	job     executor.Job // the executor's record of it
	sink    requestSink
	// state is live until the request's final frame is committed (done)
	// or it is cancelled or ended (dropped); it changes under output.mu.
	state atomic.Uint32
	// outcome is set by the executor's worker before it posts msgOutcome.
	outcome server.Outcome
	// frame is the final frame Run encoded, in buf (from frameBuffers),
	// for Done; reserved is the room it holds in the output (output.mu),
	// splices included.
	frame    []byte
	buf      *[]byte
	reserved int
	// splices are frame's large texts, left out of buf (protocol.Splices).
	splices protocol.Splices

	stream server.Stream // set while a listen stream is open
	cancel context.CancelFunc
	next   chan struct{} // the previous event was written; ask for the next
}

func (c *coordinator) run(ctx context.Context) (err error) {
	// The loop keeps its frame small and leaves the work to methods: an
	// idle session's coordinator waits here, and a small stack is most of
	// what an idle session costs (TestIdleCoordinatorStack).
	defer c.finish(&err)
	ctxDone := ctx.Done()
	for c.failed == nil {
		if c.settle() {
			return nil
		}
		if len(c.reader.pending) > 0 && !c.handoff {
			c.nextLine()
			continue
		}
		var batches <-chan []framing.Event
		if c.phase.inputOpen() {
			batches = c.reader.batches
		}
		if n, _ := c.out.waiting(); n > 0 {
			c.gather(batches)
			continue
		}
		if !c.out.sleep() {
			continue // a worker committed a frame meanwhile
		}
		c.nextWork = nil
		if c.phase.shuttingDown() {
			closed := c.waitClosing(batches)
			c.out.wake()
			if closed {
				return c.failed
			}
			continue
		}
		// Awake again before handling anything, so that workers leave
		// their frames to this turn's write (output).
		select {
		case c.reader.pending = <-batches:
			c.out.wake()
		case <-c.feedWake:
			c.out.wake()
			c.pollSession()
		case <-c.fault:
			panic("injected fault")
		case <-c.mail.wake:
			c.out.wake()
			c.handleMail()
		case <-ctxDone:
			ctxDone = nil
			c.out.wake()
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
// under a quarter of 8 KiB for the runtime to halve it, and one select of
// every case costs more of it.
func (c *coordinator) waitClosing(batches <-chan []framing.Event) (done bool) {
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
	case <-c.mail.wake:
		c.handleMail()
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
	if *err == nil && !c.flushAll() {
		*err = c.failed
	}
	if *err == nil && c.handoff {
		*err = c.handedOff()
	}
}

// flushAll writes everything committed, or reports false when the write
// path has failed.
func (c *coordinator) flushAll() bool {
	for {
		if !c.flush() {
			return false
		}
		if n, _ := c.out.waiting(); n == 0 {
			return true
		}
	}
}

// gather is a turn of the loop while frames wait to be written: it takes
// what is already at hand, so that frames ready together go out in one
// write, and writes them when nothing is. The reader or a worker this
// goroutine just woke may not have run yet, so it yields once before
// writing, unless the device would block (the coordinator alone writes
// then).
func (c *coordinator) gather(batches <-chan []framing.Event) {
	if _, blocked := c.out.waiting(); blocked {
		c.yielded = false
		c.flush()
		return
	}
	select {
	case c.reader.pending = <-batches:
		return
	case <-c.mail.wake:
		c.handleMail()
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
