package executor

import (
	"context"
	"sync"
)

// This file holds Detach: a handler that only waits on something outside
// the process (a hosted upstream's answer, an exec tool's child) gives its
// executor slot to the next queued item while it stays in flight
// (docs/transport.md §13.7).

// slotState says whether a running job holds one of MaxConcurrency slots.
type slotState uint8

const (
	slotHeld     slotState = iota // running on a slot (the zero value: Submit and nextLocked need not set it)
	slotDetached                  // running without one: Detach gave it back
	slotReturned                  // its handler returned: finish gave it back, if it still had it
)

// Detach gives the executor slot of the request ctx belongs to back, for
// the next queued item (docs/transport.md §13.7), while the request stays in
// flight: its key stays admitted, its context, deadline (ExtendDeadline
// included), cancellation, progress and outcome are unchanged, and its
// handler goes on running on its goroutine. A handler calls it when what
// is left is waiting on something outside the process that bounds how many
// may wait: a relayed request once its upstream instance has admitted it
// (docs/upstreams.md §8: max_in_flight and max_queued), an exec tool once its
// child runs (tools.NAME.max_concurrency). Work that may still use CPU for
// long must not detach: the slots are what bounds the process's CPU.
//
// Detach reports whether it gave a slot back: false outside an executor's
// handler, when called again, or once the handler has returned (a context
// kept past its handler, as a call that goes on in the background, must
// not give anyone's slot back twice). It may be called from any goroutine.
func Detach(ctx context.Context) bool {
	j, _ := ctx.Value(jobKey{}).(*job)
	if j == nil {
		return false
	}
	e := j.conn.e
	e.mu.Lock()
	if j.slot != slotHeld || j.state == jobQueued {
		e.mu.Unlock()
		return false
	}
	j.slot = slotDetached
	e.detached++
	next := e.nextLocked()
	var worker chan *job
	if next != nil {
		worker = e.warmestLocked()
	}
	e.mu.Unlock()
	if next != nil {
		e.launch(worker, next)
	}
	return true
}

// returnSlotLocked is finish's part: the slot of a job whose handler
// returned goes to the next queued item (nextLocked), unless the job gave
// it back already.
func (e *Executor) returnSlotLocked(j *job) *job {
	held := j.slot == slotHeld
	if j.slot == slotDetached {
		e.detached--
	}
	j.slot = slotReturned
	if !held {
		return nil
	}
	return e.nextLocked()
}

// HoldConn is Detach for a handler whose work is done and that now waits
// on its own connection: for room in the connection's pending output,
// which only its client reading makes (docs/transport.md §11.5). It gives
// the slot of the request ctx belongs to back to the next queued item of
// another connection, as Detach does (a handler that detached already
// waits without one anyway), and holds the request's connection until the
// returned release is called:
//
//   - none of the connection's queued work starts, and work it submits
//     meanwhile is queued even when a slot is free (in its places, refused
//     for capacity as Submit says when they are full);
//   - other connections take turns for the slots as usual.
//
// So a client that does not read cannot make the slots of every other
// session wait on it, nor, by the waiters giving their slots back, start
// more of its work: the waiters of one connection are at most the
// handlers it had running when the first began to wait (MaxConcurrency,
// and the detached ones the bounds of Detach bound). Holds count: the
// connection is released when the last one is, and its queued work then
// takes the free slots, in its order.
//
// The request stays in flight while it waits, as with Detach: its key,
// deadline, cancellation and outcome are unchanged, so a request cancelled
// or timed out while waiting is answered or dropped as one that held its
// slot. The handler's goroutine runs on without a slot until it returns.
//
// release must be called once the wait ends, whatever ended it; later calls
// do nothing. Outside an executor's handler, or once the handler has
// returned, HoldConn holds nothing and release does nothing. It may be
// called from any goroutine, and e's lock is not held when it returns.
func HoldConn(ctx context.Context) (release func()) {
	j, _ := ctx.Value(jobKey{}).(*job)
	if j == nil {
		return func() {}
	}
	c, e := j.conn, j.conn.e
	e.mu.Lock()
	if j.slot == slotReturned || j.state == jobQueued {
		e.mu.Unlock()
		return func() {}
	}
	c.holds++
	if e.ready.contains(&c.ready) {
		e.ready.remove(&c.ready)
	}
	var next *job
	var worker chan *job
	if j.slot == slotHeld {
		j.slot = slotDetached
		e.detached++
		if next = e.nextLocked(); next != nil {
			worker = e.warmestLocked()
		}
	}
	e.mu.Unlock()
	if next != nil {
		e.launch(worker, next)
	}
	var once sync.Once
	return func() { once.Do(c.unhold) }
}

// unhold releases one of c's holds; with the last, c's queued work goes
// back in the turn order and takes the slots that are free.
func (c *Conn) unhold() {
	e := c.e
	e.mu.Lock()
	c.holds--
	if c.holds > 0 || c.queued == 0 {
		e.mu.Unlock()
		return
	}
	if !e.ready.contains(&c.ready) {
		e.ready.pushBack(&c.ready, c)
	}
	var starts []*job
	var workers []chan *job
	for e.running < e.limits.MaxConcurrency && e.ready.front() != nil {
		e.running++ // nextLocked hands over a slot; this one was free
		starts = append(starts, e.nextLocked())
		workers = append(workers, e.warmestLocked())
	}
	e.mu.Unlock()
	for i, j := range starts {
		e.launch(workers[i], j)
	}
}
