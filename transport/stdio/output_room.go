package stdio

import (
	"context"

	"github.com/snodod/snodod/server/executor"
)

// The bound on what a connection holds committed and unwritten
// (docs/transport.md §11.5): held and the daemon's Budget grown and shrunk,
// and the room a worker with a large final frame reserves, waiting for it
// without its executor slot.

// growLocked counts n more bytes in held, charging the budget for what
// passes the allowance without waiting (the frames that never wait).
// o.mu is held.
func (o *output) growLocked(n int) {
	o.held += n
	o.counters.setPending(o.held)
	if o.budget == nil {
		return
	}
	if want := o.held - outputAllowance; want > o.charged {
		o.budget.forceOutput(int64(want - o.charged))
		o.charged = want
	}
}

// shrinkLocked counts n bytes out of held (written, or room given back),
// giving the budget back what is no longer past the allowance and waking
// the workers waiting for room. o.mu is held.
func (o *output) shrinkLocked(n int) {
	o.held -= n
	o.counters.setPending(o.held)
	if o.budget != nil {
		if want := max(0, o.held-outputAllowance); want < o.charged {
			o.budget.releaseOutput(int64(o.charged - want))
			o.charged = want
		}
	}
	if o.waiters > 0 {
		o.room.Broadcast()
	}
}

// dropHeldLocked forgets everything held: the output failed or closed,
// nothing will be written. o.mu is held.
func (o *output) dropHeldLocked() {
	if o.budget != nil && o.charged > 0 {
		o.budget.releaseOutput(int64(o.charged))
	}
	o.held, o.charged = 0, 0
	o.counters.setPending(0)
	o.room.Broadcast()
}

// reserve is a worker making room for w's final frame of n bytes before
// it commits it (finish), in the handler's turn: it waits while the
// connection holds max bytes or more than max with it (a frame larger
// than max alone waits until nothing is held), and then, for what passes
// the allowance, for the daemon's budget. It reports false, having
// reserved nothing, when w ended (cancelled, timed out), the write path
// failed or closed, or ctx ended meanwhile; the frame is then not
// written. The room is w's (w.reserved) until finish takes it or w ends.
//
// ctx is the handler's. A worker that must wait first gives its executor
// slot back and holds its connection (executor.HoldConn): other sessions'
// work takes the slot, none of this connection's starts until its waiters
// have their room, and so its waiters are at most the handlers it had
// running (docs/transport.md §11.5). The hold ends when reserve returns,
// with room or without; the frame is committed without a slot.
func (o *output) reserve(ctx context.Context, w *work, n int) bool {
	var release func()
	ok := o.reserveHolding(ctx, w, n, &release)
	if release != nil {
		release()
	}
	return ok
}

// reserveHolding is reserve's wait, setting *release (executor.HoldConn's)
// before it first waits. o.mu is not held when it is called or returns.
func (o *output) reserveHolding(ctx context.Context, w *work, n int, release *func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	// hold holds the connection before the first wait, without o.mu (the
	// executor's lock is never taken under it); the caller then looks
	// again, as after any wait.
	hold := func() bool {
		if *release != nil {
			return false
		}
		o.mu.Unlock()
		*release = executor.HoldConn(ctx)
		o.mu.Lock()
		return true
	}
	for {
		if o.failed != nil || o.closed || w.state.Load() != live || ctx.Err() != nil {
			return false
		}
		if o.held > 0 && o.held+n > o.max {
			if hold() {
				continue
			}
			o.waiters++
			o.room.Wait()
			o.waiters--
			continue
		}
		if o.budget != nil {
			if need := max(0, o.held+n-outputAllowance) - o.charged; need > 0 {
				if !o.budget.tryOutput(int64(need)) {
					if hold() {
						continue
					}
					// The daemon's turn order, without the connection's lock:
					// its writer goes on meanwhile.
					o.mu.Unlock()
					ok := o.budget.awaitOutput(ctx, int64(need))
					o.mu.Lock()
					if !ok {
						return false
					}
					if o.failed != nil || o.closed {
						o.budget.releaseOutput(int64(need)) // dropHeldLocked ran without it
						return false
					}
					o.charged += need
					continue // held may have changed meanwhile
				}
				o.charged += need
			}
		}
		o.held += n
		o.counters.setPending(o.held)
		w.reserved = n
		return true
	}
}

// roomLocked gives pending a buffer when it has none. o.mu is held.
func (o *output) roomLocked() {
	switch {
	case o.pending != nil:
	case o.spare != nil:
		o.pending, o.spare = o.spare, nil
	default:
		o.pending = (*outBuffers.Get().(*[]byte))[:0]
	}
}
