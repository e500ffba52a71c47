package executor

import (
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/protocol"
)

// This file holds the executor's queues: each connection's queue in
// admission order, the turn order over connections with queued work, and
// the hand-over of a freed slot (docs/transport.md §13.2). Everything here runs
// under Executor.mu.
//
// Counting places: a connection's first ConnQueue waiting items are in its
// own places, the rest in the shared ones. Which items those are does not
// matter, only how many, so an item leaving the queue (started or
// cancelled) frees a shared place while the connection has any there.

type jobState uint8

const (
	jobQueued   jobState = iota // tracked, waiting for a slot
	jobRunning                  // tracked, handler started or about to
	jobReleased                 // key released: outcome delivered, or cancelled, or timed out
)

// job is one submission. conn, id, task and ctx's parent are fixed by
// Submit; state, deadline and the links are guarded by e.mu.
type job struct {
	conn     *Conn
	id       protocol.ID
	task     Task
	ctx      jobContext // the handler's
	state    jobState
	deadline time.Time // while running
	slot     slotState // guarded by e.mu (detach.go)
	// timedOut is set by expireDue before it cancels ctx, for an Observer
	// that tells a timeout from a cancellation (TimedOut).
	timedOut atomic.Bool
	// links in conn's queue, and in the executor's running list
	queue, run link[job]
}

// releaseLocked stops tracking j (queued or running) without delivering an
// outcome. A running job keeps its slot until its handler returns.
func (c *Conn) releaseLocked(j *job) {
	delete(c.jobs, j.id)
	switch j.state {
	case jobQueued:
		c.unlinkLocked(j)
	case jobRunning:
		c.running--
		c.e.unrunLocked(j)
	}
	j.state = jobReleased
}

// pushLocked appends j to c's queue, in c's own places or the shared ones,
// and puts c in the ready list when it had nothing queued, unless c is held
// (HoldConn: its release puts it there).
func (c *Conn) pushLocked(j *job) {
	c.queue.pushBack(&j.queue, j)
	c.queued++
	c.e.queued++
	if c.queued > c.places {
		c.e.shared++
	}
	if c.holds == 0 && !c.e.ready.contains(&c.ready) {
		c.e.ready.pushBack(&c.ready, c)
	}
}

// unlinkLocked removes j from c's queue, and c from the ready list when its
// queue is now empty.
func (c *Conn) unlinkLocked(j *job) {
	c.queue.remove(&j.queue)
	if c.queued > c.places {
		c.e.shared-- // the last item leaves the shared places first
	}
	c.queued--
	c.e.queued--
	if c.queued == 0 && c.e.ready.contains(&c.ready) {
		c.e.ready.remove(&c.ready)
	}
}

// nextLocked hands the slot of a returning handler to the oldest queued
// item of the connection whose turn it is, and moves that connection to the
// back of the turn order. With nothing queued the slot is freed and nil is
// returned. A held connection (HoldConn) is not in the ready list: its
// queued work is passed over until its last hold is released.
func (e *Executor) nextLocked() *job {
	c := e.ready.front()
	if c == nil {
		e.running--
		return nil
	}
	j := c.queue.front()
	c.unlinkLocked(j) // drops c from the ready list when its queue empties
	if c.queued > 0 && c.ready.next != nil {
		e.ready.remove(&c.ready)
		e.ready.pushBack(&c.ready, c)
	}
	e.startLocked(j)
	c.running++
	return j
}
