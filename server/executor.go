package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
)

// Executor defaults (transport.md §15).
const (
	DefaultMaxConcurrency = 32
	DefaultMaxQueue       = 256
	DefaultRequestTimeout = 30 * time.Second
)

// ExecutorLimits configures an Executor. Zero means the default; negative
// values are invalid (there is no "no deadline" and no "no queue" setting).
type ExecutorLimits struct {
	// MaxConcurrency is the number of handlers that may run at once
	// (default 32).
	MaxConcurrency int
	// MaxQueue is the number of admitted handlers that may wait for a slot
	// (default 256).
	MaxQueue int
	// RequestTimeout bounds each handler from the moment it starts; time in
	// the queue does not count (default 30 s).
	RequestTimeout time.Duration
}

// Validate reports every negative field, one error each, joined with
// errors.Join, in the wording of transport.md §15. Zero fields are valid.
func (l ExecutorLimits) Validate() error {
	var errs []error
	if l.MaxConcurrency < 0 {
		errs = append(errs, errors.New("max_concurrency must be a positive integer"))
	}
	if l.MaxQueue < 0 {
		errs = append(errs, errors.New("max_queue must be a positive integer"))
	}
	if l.RequestTimeout < 0 {
		errs = append(errs, errors.New("request_timeout must be a positive duration"))
	}
	return errors.Join(errs...)
}

func (l ExecutorLimits) withDefaults() ExecutorLimits {
	if l.MaxConcurrency == 0 {
		l.MaxConcurrency = DefaultMaxConcurrency
	}
	if l.MaxQueue == 0 {
		l.MaxQueue = DefaultMaxQueue
	}
	if l.RequestTimeout == 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	return l
}

// Executor runs request handlers for every connection of the process
// (transport.md §13). It is bounded (MaxConcurrency running, MaxQueue
// waiting), applies RequestTimeout to each running handler, and reports each
// outcome to the submitter through a callback; it never writes anything.
//
// Work is submitted through an ExecConn, one per connection, under the key
// (connection, request id).
//
// Order and fairness. Each connection's queued work starts strictly in its
// admission order. Across connections the executor takes turns: when a slot
// frees, it starts the oldest queued item of the next connection in a round
// robin over the connections that have queued work, so a busy connection
// cannot starve another's queued work. Admission keeps a reserve as well:
// when MaxQueue >= 4, the last MaxQueue/4 queue places are kept for
// connections that have nothing queued, so a connection that already has
// queued work is refused (protocol.ErrCapacity) once the executor's queue
// holds MaxQueue - MaxQueue/4 items. With MaxQueue < 4 there is no reserve.
//
// Goroutines. A goroutine runs per busy slot and only while there is work;
// a goroutine whose handler returns starts the next queued item itself. An
// idle executor has no goroutines and needs no stopping: Close only refuses
// new work.
//
// All methods of Executor and ExecConn may be called concurrently. One mutex
// guards all state; handlers and callbacks never run under it.
type Executor struct {
	limits ExecutorLimits
	// crowded is the queue length at which a connection that already has
	// queued work is refused; MaxQueue when there is no reserve.
	crowded int

	mu      sync.Mutex
	closed  bool
	running int // busy slots, including cancelled handlers not yet returned
	queued  int
	// ready lists the connections with queued work, in turn order.
	readyHead, readyTail *ExecConn
	// idle holds the hand-off channels of workers waiting for work.
	idle []chan *job
}

// workerIdle is how long a worker with nothing to do waits for new work
// before it exits. Reusing a worker keeps its grown stack: a fresh goroutine
// per request spent a fifth of a busy executor's CPU growing stacks. It is
// short, so an idle process has no executor goroutines.
const workerIdle = 100 * time.Millisecond

// NewExecutor validates l, applies its defaults and returns an idle executor.
// The error is l.Validate()'s.
func NewExecutor(l ExecutorLimits) (*Executor, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	l = l.withDefaults()
	e := &Executor{limits: l, crowded: l.MaxQueue}
	if l.MaxQueue >= 4 {
		e.crowded = l.MaxQueue - l.MaxQueue/4
	}
	return e, nil
}

// Limits returns the effective limits, defaults applied.
func (e *Executor) Limits() ExecutorLimits { return e.limits }

// Close makes Submit refuse new work with protocol.ErrExecutorClosed.
// Admitted work (running and queued) goes on and its outcomes are delivered.
// Close may be called more than once.
func (e *Executor) Close() {
	e.mu.Lock()
	e.closed = true
	idle := e.idle
	e.idle = nil
	e.mu.Unlock()
	for _, worker := range idle {
		worker <- nil // exit now rather than after workerIdle
	}
}

// ExecutorStats is a snapshot of an executor's or a connection's load, for
// status displays and tests.
type ExecutorStats struct {
	// Running counts busy slots for an Executor, including handlers whose
	// context was cancelled but that have not returned yet. For an ExecConn
	// it counts the connection's running work that is still tracked (not
	// cancelled or timed out).
	Running int
	// Queued counts admitted work waiting for a slot.
	Queued int
}

// Stats returns the executor's current load.
func (e *Executor) Stats() ExecutorStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return ExecutorStats{Running: e.running, Queued: e.queued}
}

// Conn returns a new connection handle on e. Work is keyed by (connection,
// request id), so equal ids on different connections never collide. A
// connection holds no resources of its own: when it ends, CancelAll releases
// its work and the handle may be dropped.
func (e *Executor) Conn() *ExecConn {
	return &ExecConn{e: e, jobs: make(map[protocol.ID]*job)}
}

// ExecConn is one connection's handle on an Executor. Its methods may be
// called concurrently with each other and with other connections' methods.
type ExecConn struct {
	e *Executor
	// The fields below are guarded by e.mu.
	jobs            map[protocol.ID]*job // tracked work: queued or running
	running, queued int
	qHead, qTail    *job      // this connection's queue, in admission order
	readyNext       *ExecConn // link in e's ready list
	readyPrev       *ExecConn
	inReady         bool
}

type jobState uint8

const (
	jobQueued   jobState = iota // tracked, waiting for a slot
	jobRunning                  // tracked, handler started or about to
	jobReleased                 // key released: outcome delivered, or cancelled, or timed out
)

// job is one submission. conn, id, run, done, ctx and cancel are fixed by
// Submit; state and the queue links are guarded by e.mu; timer belongs to
// the goroutine that runs the job.
type job struct {
	conn   *ExecConn
	id     protocol.ID
	run    func(context.Context) Outcome
	done   func(Outcome)
	ctx    context.Context
	cancel context.CancelFunc
	timer  *time.Timer
	state  jobState
	// link in conn's queue
	next, prev *job
}

// Submit admits run under id on this connection. The checks are, in order
// (transport.md §13.2):
//
//  1. id is already admitted on this connection, running or queued:
//     protocol.ErrDuplicateID;
//  2. every slot is busy and the queue is full: protocol.ErrCapacity;
//  3. the executor is closed: protocol.ErrExecutorClosed;
//  4. every slot is busy, this connection already has queued work and only
//     the reserved queue places are left (see Executor): protocol.ErrCapacity.
//
// A refused submission leaves no trace and run and done are never called.
// On admission Submit returns nil; run starts at once if a slot is free and
// is queued otherwise. Later done is called exactly once with the outcome,
// unless the work is cancelled first (Cancel, CancelAll), in which case
// neither done nor, for queued work, run is ever called:
//
//   - run returned normally: its Outcome;
//   - run panicked: Outcome{Err: protocol.ErrWorkerFailed}, with the panic
//     value and stack logged to slog.Default() at level Error;
//   - RequestTimeout passed since run started: Outcome{Err:
//     protocol.ErrTimedOut}, delivered at once while run's context is
//     cancelled; whatever run returns later is discarded.
//
// run gets a context that carries ctx's values but not its cancellation or
// deadline; it ends when the work is cancelled or times out. run must watch
// it: a handler that ignores it keeps its slot until it returns.
//
// done is called from an executor goroutine, never from Submit's caller and
// never under the executor's lock. It may block briefly (typically to hand
// the outcome to a coordinator), but while it blocks, its slot does not take
// new work. Because the key is released before done runs, an outcome may
// still be on its way when Cancel finds nothing to cancel, or after the same
// id was submitted again: give each submission its own done (for example one
// that captures the request's own in-flight entry) to tell the outcomes apart.
//
// ctx, run and done must not be nil.
func (c *ExecConn) Submit(ctx context.Context, id protocol.ID, run func(context.Context) Outcome, done func(Outcome)) *protocol.Error {
	if run == nil || done == nil {
		panic("server: Submit with a nil run or done")
	}
	e := c.e
	j := &job{conn: c, id: id, run: run, done: done}
	parent := ctx
	if ctx.Done() != nil {
		parent = context.WithoutCancel(ctx) // keep the values, drop the cancellation
	}
	// The job is in its own context, for ExtendDeadline (deadline.go).
	j.ctx, j.cancel = context.WithCancel(context.WithValue(parent, jobKey{}, j))

	e.mu.Lock()
	if _, dup := c.jobs[id]; dup {
		e.mu.Unlock()
		j.cancel()
		return protocol.ErrDuplicateID
	}
	busy := e.running >= e.limits.MaxConcurrency
	var refusal *protocol.Error
	switch {
	case busy && e.queued >= e.limits.MaxQueue:
		refusal = protocol.ErrCapacity
	case e.closed:
		refusal = protocol.ErrExecutorClosed
	case busy && c.queued > 0 && e.queued >= e.crowded:
		refusal = protocol.ErrCapacity
	}
	if refusal != nil {
		e.mu.Unlock()
		j.cancel()
		return refusal
	}
	c.jobs[id] = j
	if busy {
		j.state = jobQueued
		c.pushLocked(j)
		e.queued++
		e.mu.Unlock()
		return nil
	}
	j.state = jobRunning
	e.running++
	c.running++
	if n := len(e.idle); n > 0 {
		worker := e.idle[n-1]
		e.idle = e.idle[:n-1]
		e.mu.Unlock()
		worker <- j // buffered: never blocks
		return nil
	}
	e.mu.Unlock()
	go e.work(j)
	return nil
}

// Cancel withdraws the work admitted under id: queued work is removed and
// never runs; running work has its context cancelled and keeps its slot
// until run returns. Either way the key is released at once, so id may be
// submitted again immediately, and done is never called for the withdrawn
// work. An id that is not admitted (unknown, or whose outcome was already
// released for delivery) is ignored.
func (c *ExecConn) Cancel(id protocol.ID) {
	e := c.e
	e.mu.Lock()
	j := c.jobs[id]
	if j == nil {
		e.mu.Unlock()
		return
	}
	c.releaseLocked(j)
	e.mu.Unlock()
	j.cancel()
}

// CancelAll cancels every queued and running item of the connection, as
// Cancel does for each; it is called when the connection ends. No outcomes
// are delivered for them. The connection stays usable.
func (c *ExecConn) CancelAll() {
	e := c.e
	e.mu.Lock()
	cancels := make([]context.CancelFunc, 0, len(c.jobs))
	for _, j := range c.jobs {
		c.releaseLocked(j)
		cancels = append(cancels, j.cancel)
	}
	e.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// Stats returns this connection's share of the load: its tracked running
// work and its queued work.
func (c *ExecConn) Stats() ExecutorStats {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return ExecutorStats{Running: c.running, Queued: c.queued}
}

// releaseLocked stops tracking j (queued or running) without delivering an
// outcome. A running job keeps its slot until its handler returns.
func (c *ExecConn) releaseLocked(j *job) {
	delete(c.jobs, j.id)
	switch j.state {
	case jobQueued:
		c.unlinkLocked(j)
		c.e.queued--
	case jobRunning:
		c.running--
	}
	j.state = jobReleased
}

// pushLocked appends j to c's queue and puts c in the ready list when it
// had nothing queued.
func (c *ExecConn) pushLocked(j *job) {
	j.prev, j.next = c.qTail, nil
	if c.qTail == nil {
		c.qHead = j
	} else {
		c.qTail.next = j
	}
	c.qTail = j
	c.queued++
	if !c.inReady {
		c.e.readyAppendLocked(c)
	}
}

// unlinkLocked removes j from c's queue, and c from the ready list when its
// queue is now empty.
func (c *ExecConn) unlinkLocked(j *job) {
	if j.prev == nil {
		c.qHead = j.next
	} else {
		j.prev.next = j.next
	}
	if j.next == nil {
		c.qTail = j.prev
	} else {
		j.next.prev = j.prev
	}
	j.next, j.prev = nil, nil
	c.queued--
	if c.queued == 0 && c.inReady {
		c.e.readyRemoveLocked(c)
	}
}

func (e *Executor) readyAppendLocked(c *ExecConn) {
	c.readyPrev, c.readyNext = e.readyTail, nil
	if e.readyTail == nil {
		e.readyHead = c
	} else {
		e.readyTail.readyNext = c
	}
	e.readyTail = c
	c.inReady = true
}

func (e *Executor) readyRemoveLocked(c *ExecConn) {
	if c.readyPrev == nil {
		e.readyHead = c.readyNext
	} else {
		c.readyPrev.readyNext = c.readyNext
	}
	if c.readyNext == nil {
		e.readyTail = c.readyPrev
	} else {
		c.readyNext.readyPrev = c.readyPrev
	}
	c.readyNext, c.readyPrev = nil, nil
	c.inReady = false
}

// nextLocked hands the slot of a returning handler to the oldest queued
// item of the connection whose turn it is, and moves that connection to the
// back of the turn order. With nothing queued the slot is freed and nil is
// returned.
func (e *Executor) nextLocked() *job {
	c := e.readyHead
	if c == nil {
		e.running--
		return nil
	}
	j := c.qHead
	c.unlinkLocked(j) // drops c from the ready list when its queue empties
	if c.inReady && c.readyNext != nil {
		e.readyRemoveLocked(c)
		e.readyAppendLocked(c)
	}
	e.queued--
	j.state = jobRunning
	c.running++
	return j
}

// work runs j and then, on the same goroutine, whatever queued work its slot
// is handed, until the queue is empty.
func (e *Executor) work(j *job) {
	var handoff chan *job
	var timer *time.Timer
	for j != nil {
		for j != nil {
			j = e.finish(j, e.call(j))
		}
		if handoff == nil {
			handoff, timer = make(chan *job, 1), time.NewTimer(workerIdle)
		} else {
			timer.Reset(workerIdle)
		}
		j = e.park(handoff, timer)
	}
}

// park waits up to workerIdle for Submit to hand this worker a job, and
// returns nil when none came.
func (e *Executor) park(handoff chan *job, timer *time.Timer) *job {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.idle = append(e.idle, handoff)
	e.mu.Unlock()
	select {
	case j := <-handoff:
		timer.Stop()
		return j
	case <-timer.C:
	}
	e.mu.Lock()
	for i, w := range e.idle {
		if w == handoff {
			e.idle = append(e.idle[:i], e.idle[i+1:]...)
			e.mu.Unlock()
			return nil
		}
	}
	// Submit took this worker just as it timed out: the job is on its way.
	e.mu.Unlock()
	return <-handoff
}

// call runs j's handler under its deadline and recovers a panic into
// ErrWorkerFailed.
func (e *Executor) call(j *job) (out Outcome) {
	if j.ctx.Err() != nil {
		// Cancelled between taking the slot and starting: nothing to run,
		// and finish delivers nothing for released work.
		return Outcome{}
	}
	j.timer = time.AfterFunc(e.limits.RequestTimeout, func() { e.expire(j) })
	returned := false
	defer func() {
		if returned {
			return
		}
		out = Outcome{Err: protocol.ErrWorkerFailed}
		if v := recover(); v != nil {
			slog.Default().Error("request handler panicked",
				slog.String("id", j.id.String()),
				slog.String("panic", fmt.Sprint(v)),
				slog.String("stack", string(debug.Stack())))
			return
		}
		// run called runtime.Goexit: this goroutine is ending, so account
		// for j and carry on with the queue on a fresh one.
		slog.Default().Error("request handler exited its goroutine",
			slog.String("id", j.id.String()))
		go e.afterGoexit(j)
	}()
	out = j.run(j.ctx)
	returned = true
	return out
}

// afterGoexit finishes j, whose handler called runtime.Goexit, and carries
// on with the queue.
func (e *Executor) afterGoexit(j *job) {
	e.work(e.finish(j, Outcome{Err: protocol.ErrWorkerFailed}))
}

// finish releases j's slot (to the next queued item, if any), delivers out
// when j is still tracked, and returns the job the slot was handed.
func (e *Executor) finish(j *job, out Outcome) *job {
	if j.timer != nil {
		j.timer.Stop()
	}
	e.mu.Lock()
	deliver := j.state == jobRunning
	if deliver {
		j.conn.releaseLocked(j)
	}
	next := e.nextLocked()
	e.mu.Unlock()
	j.cancel()
	if deliver {
		j.done(out)
	}
	return next
}

// expire is j's deadline: it releases j's key, cancels its context and
// delivers ErrTimedOut, unless j finished or was cancelled first. The slot
// stays busy until the handler returns.
func (e *Executor) expire(j *job) {
	e.mu.Lock()
	if j.state != jobRunning {
		e.mu.Unlock()
		return
	}
	j.conn.releaseLocked(j)
	e.mu.Unlock()
	j.cancel()
	j.done(Outcome{Err: protocol.ErrTimedOut})
}
