package server

import "context"

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
