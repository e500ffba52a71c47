package executor

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// This file holds the executor's workers: a goroutine per busy slot that
// runs a job under its deadline, recovers its panic, delivers its outcome
// and carries on with the queue, then waits briefly for new work before it
// exits.

// workerIdle is how long a worker with nothing to do waits for new work
// before it exits. Reusing a worker keeps its grown stack: a fresh goroutine
// per request spent a fifth of a busy executor's CPU growing stacks. It is
// short, so an idle process has no executor goroutines.
const workerIdle = 100 * time.Millisecond

// The executor's two clocks are one timer each for the whole executor,
// armed lazily, rather than one per job and per waiting worker: a timer's
// allocation and its heap updates were a twentieth of a busy executor's
// CPU. The deadlines timer fires at the earliest deadline of the running
// jobs (the head of the running list, which is in deadline order: start
// order, since every job has the same RequestTimeout, but for deadlines
// ExtendDeadline moved, which are put in their place); the reaper at the moment the longest
// waiting worker has waited workerIdle. When the job or worker it was set
// for goes first, it fires anyway, finds the next one, and is set again
// for that one: at most one early firing per change of head.

// idleWorker is a worker waiting for a job, and since when.
type idleWorker struct {
	handoff chan *job
	since   time.Time
}

// work runs j and then, on the same goroutine, whatever queued work its slot
// is handed, until the queue is empty.
func (e *Executor) work(j *job) {
	var handoff chan *job
	for j != nil {
		for j != nil {
			j = e.finish(j, e.call(j))
		}
		if handoff == nil {
			handoff = make(chan *job, 1)
		}
		j = e.park(handoff)
	}
}

// park waits for Submit to hand this worker a job, and returns nil when
// the reaper (or Close) ends its wait instead.
func (e *Executor) park(handoff chan *job) *job {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	now := time.Now()
	e.idle = append(e.idle, idleWorker{handoff: handoff, since: now})
	e.armLocked(&e.reaper, &e.reaperAt, now.Add(workerIdle), reaperTimer)
	e.mu.Unlock()
	return <-handoff
}

// warmestLocked takes the worker that parked last, whose stack is the
// warmest, off the idle list; nil when none waits. e.mu is held.
func (e *Executor) warmestLocked() chan *job {
	n := len(e.idle)
	if n == 0 {
		return nil
	}
	worker := e.idle[n-1].handoff
	e.idle = e.idle[:n-1]
	return worker
}

// launch runs j, which holds a slot, on worker (from warmestLocked), or on
// a new goroutine when worker is nil. e.mu is not held.
func (e *Executor) launch(worker chan *job, j *job) {
	if worker != nil {
		worker <- j // buffered: never blocks
		return
	}
	go e.work(j)
}

// reap ends the waits of the workers that have waited workerIdle.
func (e *Executor) reap() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.reaperAt = time.Time{}
	now := time.Now()
	n := 0
	for n < len(e.idle) && now.Sub(e.idle[n].since) >= workerIdle {
		e.idle[n].handoff <- nil // buffered: never blocks
		n++
	}
	e.idle = append(e.idle[:0], e.idle[n:]...)
	if len(e.idle) > 0 {
		e.armLocked(&e.reaper, &e.reaperAt, e.idle[0].since.Add(workerIdle), reaperTimer)
	}
}

// The executor's timers, for armLocked.
const (
	deadlineTimer = iota
	reaperTimer
)

// armLocked makes *t fire at when, unless it is already set to fire no
// later; *at is when it is set for (zero: not set). which says what it
// runs, the timer being made at its first use. e.mu is held.
func (e *Executor) armLocked(t **time.Timer, at *time.Time, when time.Time, which int) {
	if !at.IsZero() && !at.After(when) {
		return
	}
	*at = when
	d := time.Until(when)
	if *t != nil {
		(*t).Reset(d)
		return
	}
	// A method value costs an allocation: made once, here.
	if which == deadlineTimer {
		*t = time.AfterFunc(d, e.expireDue)
	} else {
		*t = time.AfterFunc(d, e.reap)
	}
}

// startLocked makes j a running job subject to its deadline from now
// (docs/transport.md §13.4). e.mu is held.
func (e *Executor) startLocked(j *job) {
	j.state = jobRunning
	j.deadline = time.Now().Add(e.limits.RequestTimeout)
	e.run.pushBack(&j.run, j)
	e.armLocked(&e.deadlines, &e.deadlineAt, j.deadline, deadlineTimer)
}

// unrunLocked takes j off the running list (it finished, or was
// released). e.mu is held.
func (e *Executor) unrunLocked(j *job) {
	if e.run.contains(&j.run) {
		e.run.remove(&j.run)
	}
}

// call runs j's handler and recovers a panic into ErrWorkerFailed.
func (e *Executor) call(j *job) (out server.Outcome) {
	if j.ctx.Err() != nil {
		// Cancelled between taking the slot and starting: nothing to run,
		// and finish delivers nothing for released work.
		return server.Outcome{}
	}
	returned := false
	defer func() {
		if returned {
			return
		}
		out = server.Outcome{Err: protocol.ErrWorkerFailed}
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
	out = j.task.Run(&j.ctx)
	returned = true
	return out
}

// afterGoexit finishes j, whose handler called runtime.Goexit, and carries
// on with the queue.
func (e *Executor) afterGoexit(j *job) {
	e.work(e.finish(j, server.Outcome{Err: protocol.ErrWorkerFailed}))
}

// finish releases j's slot (to the next queued item, if any) unless j
// detached from it, delivers out when j is still tracked, and returns the
// job the slot was handed.
func (e *Executor) finish(j *job, out server.Outcome) *job {
	e.mu.Lock()
	deliver := j.state == jobRunning
	if deliver {
		j.conn.releaseLocked(j)
	}
	next := e.returnSlotLocked(j)
	e.mu.Unlock()
	j.ctx.cancel()
	if deliver {
		j.task.Done(out)
	}
	return next
}

// expireDue is the deadlines timer: each running job whose deadline has
// passed has its key released, its context cancelled and ErrTimedOut
// delivered. The slot stays busy until the handler returns.
func (e *Executor) expireDue() {
	e.mu.Lock()
	e.deadlineAt = time.Time{}
	now := time.Now()
	var due []*job
	for j := e.run.front(); j != nil && !j.deadline.After(now); j = e.run.front() {
		j.conn.releaseLocked(j) // takes it off the running list
		due = append(due, j)
	}
	if first := e.run.front(); first != nil {
		e.armLocked(&e.deadlines, &e.deadlineAt, first.deadline, deadlineTimer)
	}
	e.mu.Unlock()
	for _, j := range due {
		j.timedOut.Store(true)
		j.ctx.cancel()
		j.task.Done(server.Outcome{Err: protocol.ErrTimedOut})
	}
}
