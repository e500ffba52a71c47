package server

import (
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/snodod/snodod/protocol"
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

// finish releases j's slot (to the next queued item, if any) unless j
// detached from it, delivers out when j is still tracked, and returns the
// job the slot was handed.
func (e *Executor) finish(j *job, out Outcome) *job {
	if j.timer != nil {
		j.timer.Stop()
	}
	e.mu.Lock()
	deliver := j.state == jobRunning
	if deliver {
		j.conn.releaseLocked(j)
	}
	next := e.returnSlotLocked(j)
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
