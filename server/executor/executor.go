// Package executor is the bounded executor every connection of a process
// shares (docs/transport.md §13): it admits, queues, runs, times out and
// cancels the handlers of requests, taking turns between connections and
// giving each connection queue places of its own when asked to.
//
// It is for transports, which submit each admitted request through a
// connection's Conn with the RequestContext that carries the request's
// sinks, and for the daemon, which builds one Executor for all of them.
// Handlers use only Detach, HoldConn and ExtendDeadline, on the context
// they were given. What a handler returns is a server.Outcome; the
// executor never writes anything.
package executor

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Executor defaults (docs/transport.md §15), those of package limits.
const (
	DefaultMaxConcurrency = limits.DefaultMaxConcurrency
	DefaultMaxQueue       = limits.DefaultMaxQueue
	DefaultRequestTimeout = limits.DefaultRequestTimeout
)

// Limits configures an Executor. Zero means the default; negative
// values are invalid (there is no "no deadline" and no "no queue" setting).
type Limits struct {
	// MaxConcurrency is the number of handlers that may run at once
	// (default 32).
	MaxConcurrency int
	// MaxQueue is the number of admitted handlers that may wait for a slot
	// in the places every connection shares (default 256).
	MaxQueue int
	// ConnQueue is the number of queue places each connection has of its
	// own, besides the MaxQueue shared ones (default 0: none). A
	// connection with fewer than ConnQueue items waiting is never refused
	// for capacity, however full the shared places are, so no connection
	// can be crowded out by others; the executor then holds at most
	// MaxQueue + ConnQueue × connections waiting items. The daemon gives
	// each session 4 (docs/transport.md §13.2); a RequestConn has none.
	ConnQueue int
	// RequestTimeout bounds each handler from the moment it starts; time in
	// the queue does not count (default 30 s).
	RequestTimeout time.Duration
}

// Validate reports every negative field, one error each, joined with
// errors.Join, in the wording of docs/transport.md §15. Zero fields are valid.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxConcurrency < 0 {
		errs = append(errs, errors.New("max_concurrency must be a positive integer"))
	}
	if l.MaxQueue < 0 {
		errs = append(errs, errors.New("max_queue must be a positive integer"))
	}
	if l.ConnQueue < 0 {
		errs = append(errs, errors.New("the per-connection queue must not be negative"))
	}
	if l.RequestTimeout < 0 {
		errs = append(errs, errors.New("request_timeout must be a positive duration"))
	}
	return errors.Join(errs...)
}

func (l Limits) withDefaults() Limits {
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

// The executor is split by idea: this file holds its API and admission;
// queue.go the queues and the turn order; worker.go the
// workers, deadlines and outcomes.

// Executor runs request handlers for every connection of the process
// (docs/transport.md §13). It is bounded (MaxConcurrency running; MaxQueue
// waiting in shared places, plus ConnQueue per connection), applies RequestTimeout to each running handler, and reports each
// outcome to the submitter through a callback; it never writes anything.
//
// Work is submitted through an Conn, one per connection, under the key
// (connection, request id).
//
// Order and fairness. Each connection's queued work starts strictly in its
// admission order. Across connections the executor takes turns: when a slot
// frees, it starts the oldest queued item of the next connection in a round
// robin over the connections that have queued work, so a busy connection
// cannot starve another's queued work.
//
// Queue places. Each connection has ConnQueue places of its own; its items
// beyond those wait in the MaxQueue places all connections share. The
// shared places keep a reserve: when MaxQueue >= 4, the last MaxQueue/4 of
// them are kept for connections that have nothing in the shared places
// yet, so a connection already using them is refused
// (protocol.ErrCapacity) once they hold MaxQueue - MaxQueue/4 items. With
// MaxQueue < 4 there is no reserve.
//
// Waiting. A handler that only waits on something outside the process,
// which bounds how many may wait (a hosted upstream, an exec tool's
// child), gives its slot back with Detach and stays in flight; the slots
// bound the handlers that may use CPU, not the requests in flight.
// A handler that waits on its own connection (room in its output) gives
// its slot back with HoldConn, which also holds the connection: none of
// its queued work starts until the wait ends, so that its client cannot
// run more work by not reading.
//
// Goroutines. A goroutine runs per busy slot and per detached handler, and
// only while there is work; a goroutine whose handler returns starts the
// next queued item itself. An idle executor has no goroutines and needs no
// stopping: Close only refuses new work.
//
// All methods of Executor and Conn may be called concurrently. One mutex
// guards all state; handlers and callbacks never run under it.
type Executor struct {
	limits Limits
	// crowded is the number of items in the shared places at which a
	// connection that already has some there is refused; MaxQueue when
	// there is no reserve.
	crowded int

	mu      sync.Mutex
	closed  bool
	running int // busy slots, including cancelled handlers not yet returned
	queued  int // every waiting item
	shared  int // the waiting items in the shared places (beyond ConnQueue)
	// ready lists the connections with queued work, in turn order.
	ready linkedList[Conn]
	// idle holds the workers waiting for work, longest waiting first.
	idle []idleWorker
	// run lists the running jobs in deadline order (worker.go);
	// the two timers are set for deadlineAt and reaperAt (zero: not set).
	run                  linkedList[job]
	deadlines, reaper    *time.Timer
	deadlineAt, reaperAt time.Time

	// detached counts the handlers running without a slot (Detach).
	detached int
}

// New validates l, applies its defaults and returns an idle executor.
// The error is l.Validate()'s.
func New(l Limits) (*Executor, error) {
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
func (e *Executor) Limits() Limits { return e.limits }

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
		worker.handoff <- nil // exit now rather than after workerIdle
	}
}

// Stats is a snapshot of an executor's or a connection's load, for
// status displays and tests.
type Stats struct {
	// Running counts busy slots for an Executor, including handlers whose
	// context was cancelled but that have not returned yet. For an Conn
	// it counts the connection's running work that is still tracked (not
	// cancelled or timed out).
	Running int
	// Queued counts admitted work waiting for a slot.
	Queued int
	// Detached counts, for an Executor, handlers that gave their slot back
	// with Detach and have not returned yet; an Conn counts its
	// detached work in Running.
	Detached int
}

// Stats returns the executor's current load.
func (e *Executor) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{Running: e.running, Queued: e.queued, Detached: e.detached}
}

// Conn returns a new connection handle on e. Work is keyed by (connection,
// request id), so equal ids on different connections never collide. A
// connection holds no resources of its own: when it ends, CancelAll releases
// its work and the handle may be dropped.
func (e *Executor) Conn() *Conn {
	return &Conn{e: e, jobs: make(map[protocol.ID]*job), places: e.limits.ConnQueue}
}

// RequestConn returns a connection handle for the one request of a
// stateless exchange (a 2026-07-28 HTTP POST). It is a Conn without queue
// places of its own: were each POST given ConnQueue places, every request
// could wait beside a busy executor and the number waiting would be bounded
// only by the open HTTP connections. Its request waits, if it must, in the
// shared places, and is refused with ErrCapacity when they are full.
func (e *Executor) RequestConn() *Conn {
	return &Conn{e: e, jobs: make(map[protocol.ID]*job)}
}

// Conn is one connection's handle on an Executor. Its methods may be
// called concurrently with each other and with other connections' methods.
// Its queue and its links in the executor's turn order are in
// queue.go.
type Conn struct {
	e      *Executor
	places int // queue places of its own: Limits.ConnQueue, or 0
	// The fields below are guarded by e.mu.
	jobs            map[protocol.ID]*job // tracked work: queued or running
	running, queued int
	queue           linkedList[job] // this connection's queue, in admission order
	ready           link[Conn]      // c's place in e's ready list
	// holds counts the handlers of c waiting on c itself (HoldConn):
	// while it is not zero c is out of the ready list and none of its
	// queued work starts (detach.go).
	holds int
}

// Submit admits run under id on this connection. The checks are, in order
// (docs/transport.md §13.2):
//
//  1. id is already admitted on this connection, running or queued:
//     protocol.ErrDuplicateID;
//  2. every slot is busy (or the connection is held, see HoldConn), this
//     connection's own queue places are taken and the shared ones are
//     full: protocol.ErrCapacity;
//  3. the executor is closed: protocol.ErrExecutorClosed;
//  4. every slot is busy (or the connection is held), this connection's
//     own places are taken, it already has items in the shared places and
//     only their reserve is left (see Executor): protocol.ErrCapacity.
//
// A refused submission leaves no trace and run and done are never called.
// On admission Submit returns nil; run starts at once if a slot is free and
// the connection is not held, and is queued otherwise. Later done is
// called exactly once with the outcome, unless the work is cancelled first
// (Cancel, CancelAll), in which case neither done nor, for queued work, run
// is ever called:
//
//   - run returned normally: its server.Outcome;
//   - run panicked: server.Outcome{Err: protocol.ErrWorkerFailed}, with the panic
//     value and stack logged to slog.Default() at level Error;
//   - RequestTimeout passed since run started: server.Outcome{Err:
//     protocol.ErrTimedOut}, delivered at once while run's context is
//     cancelled; whatever run returns later is discarded.
//
// run gets a context that carries ctx's values but not its cancellation or
// deadline; it ends when the work is cancelled or times out. run must watch
// it: a handler that ignores it keeps its slot until it returns (or until
// it calls Detach).
//
// done is called from an executor goroutine, never from Submit's caller and
// never under the executor's lock. It must not block: the worker calling it
// has already been handed the next queued job, which may be another
// connection's, and a done that waits on its connection (a stuck writer)
// would hold that job too (docs/architecture.md §3.4). Hand the outcome over
// without waiting (a queue the connection drains). Because the key is
// released before done runs, an outcome may still be on its way when Cancel
// finds nothing to cancel, or after the same id was submitted again: give
// each submission its own done (for example one that captures the request's
// own in-flight entry) to tell the outcomes apart.
//
// ctx, run and done must not be nil.
func (c *Conn) Submit(ctx context.Context, id protocol.ID, run func(context.Context) server.Outcome, done func(server.Outcome)) *protocol.Error {
	if run == nil || done == nil {
		panic("executor: Submit with a nil run or done")
	}
	return c.SubmitTask(ctx, id, funcTask{run, done})
}

// Task is work submitted with SubmitTask: Run is the handler, Done
// receives the outcome, under the rules Submit states for run and done.
// A transport's per-request state may implement it, so that submitting
// needs no closures.
type Task interface {
	Run(ctx context.Context) server.Outcome
	Done(server.Outcome)
}

type funcTask struct {
	run  func(context.Context) server.Outcome
	done func(server.Outcome)
}

func (f funcTask) Run(ctx context.Context) server.Outcome { return f.run(ctx) }
func (f funcTask) Done(o server.Outcome)                  { f.done(o) }

// SubmitTask is Submit with the handler and the outcome's receiver in one
// Task, which must not be nil.
func (c *Conn) SubmitTask(ctx context.Context, id protocol.ID, task Task) *protocol.Error {
	return c.SubmitJob(ctx, id, new(Job), task)
}

// Job is room for the executor's record of one submission, for a submitter
// that keeps it in its own per-request state (SubmitJob) rather than have
// the executor allocate one. A Job serves one submission and must not be
// copied.
type Job struct{ j job }

// SubmitJob is SubmitTask keeping the executor's record of the submission
// in slot, which must be zero and is the executor's from then on.
func (c *Conn) SubmitJob(ctx context.Context, id protocol.ID, slot *Job, task Task) *protocol.Error {
	e := c.e
	j := &slot.j
	j.conn, j.id, j.task = c, id, task
	j.ctx.job, j.ctx.parent = j, ctx
	if ctx.Done() != nil {
		j.ctx.parent = context.WithoutCancel(ctx) // keep the values, drop the cancellation
	}

	e.mu.Lock()
	if _, dup := c.jobs[id]; dup {
		e.mu.Unlock()
		j.ctx.cancel()
		return protocol.ErrDuplicateID
	}
	// A held connection's work waits as it would for a slot (HoldConn).
	busy := e.running >= e.limits.MaxConcurrency || c.holds > 0
	if refusal := e.refusalLocked(c, busy); refusal != nil {
		e.mu.Unlock()
		j.ctx.cancel()
		return refusal
	}
	c.jobs[id] = j
	if busy {
		j.state = jobQueued
		c.pushLocked(j)
		e.mu.Unlock()
		return nil
	}
	e.startLocked(j)
	e.running++
	c.running++
	worker := e.warmestLocked()
	e.mu.Unlock()
	e.launch(worker, j)
	return nil
}

// refusalLocked applies checks 2 to 4 of Submit to a new item of c.
func (e *Executor) refusalLocked(c *Conn, busy bool) *protocol.Error {
	// Where the item would wait: in one of c's own places, or in the
	// shared ones.
	inShared := busy && c.queued >= c.places
	switch {
	case inShared && e.shared >= e.limits.MaxQueue:
		return protocol.ErrCapacity
	case e.closed:
		return protocol.ErrExecutorClosed
	case inShared && c.queued > c.places && e.shared >= e.crowded:
		return protocol.ErrCapacity
	}
	return nil
}

// Cancel withdraws the work admitted under id: queued work is removed and
// never runs; running work has its context cancelled and keeps its slot
// until run returns. Either way the key is released at once, so id may be
// submitted again immediately, and done is never called for the withdrawn
// work. An id that is not admitted (unknown, or whose outcome was already
// released for delivery) is ignored.
func (c *Conn) Cancel(id protocol.ID) {
	e := c.e
	e.mu.Lock()
	j := c.jobs[id]
	if j == nil {
		e.mu.Unlock()
		return
	}
	c.releaseLocked(j)
	e.mu.Unlock()
	j.ctx.cancel()
}

// CancelAll cancels every queued and running item of the connection, as
// Cancel does for each; it is called when the connection ends. No outcomes
// are delivered for them. The connection stays usable.
func (c *Conn) CancelAll() {
	e := c.e
	e.mu.Lock()
	cancels := make([]*job, 0, len(c.jobs))
	for _, j := range c.jobs {
		c.releaseLocked(j)
		cancels = append(cancels, j)
	}
	e.mu.Unlock()
	for _, j := range cancels {
		j.ctx.cancel()
	}
}

// Stats returns this connection's share of the load: its tracked running
// work and its queued work.
func (c *Conn) Stats() Stats {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return Stats{Running: c.running, Queued: c.queued}
}
