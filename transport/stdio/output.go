package stdio

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/internal/framing"
)

// output is a connection's write path, shared by the coordinator and the
// executor's workers: the second shortcut of docs/architecture.md (§4.2),
// where the worker that finished a request hands its final frame straight
// to the writer instead of waking the coordinator to write it. Its rules:
//
//   - One writer at a time owns the device (writing): frames are written
//     whole, in the order they were committed, never interleaved.
//   - While the coordinator is awake (it handles lines and messages, and
//     looks at pending before it waits again), a worker only appends its
//     frame: the coordinator writes what became ready together in one
//     write. A worker writes itself only while the coordinator waits, so
//     that a lone request costs no hop back to the coordinator.
//   - A worker never waits on the device. It writes only with one
//     non-blocking write(2); what the device does not take at once is left
//     first in pending for the coordinator, which writes it with the write
//     timeout (blocked stays set until pending is empty again, so workers
//     only append meanwhile).
//   - Nothing is ever written for a request that was cancelled or ended:
//     a request's frames are committed under mu, after checking its state,
//     and cancellation changes the state under the same mu (end).
//   - A request's progress and notifications are committed by the
//     coordinator before it answers the handler, so they precede the final
//     frame the worker commits after the handler returns.
//
// After a write failure (failed) nothing is written again; once closed
// (the coordinator returned) nothing is written at all, and close waits for
// a worker's write in progress, so a restarted instance never shares the
// device with a write of the old one.
type output struct {
	w *framing.Writer
	// direct: workers may write (the device takes non-blocking writes).
	direct bool
	// counters, when set, are kept current by whoever ends a request.
	counters *Counters

	mu      sync.Mutex
	idle    sync.Cond // signalled when writing ends
	pending []byte    // committed frames not yet written
	spare   []byte    // a written buffer, for pending's next turn
	writing bool      // a goroutine is writing frames committed before pending
	blocked bool      // the device would block: the coordinator drains pending
	awake   bool      // the coordinator will look at pending before it waits
	failed  error     // the terminal failure (docs/transport.md §11.4)
	closed  bool
	// finished are the requests whose final frame a worker committed, for
	// the coordinator to take out of its in-flight set; eager makes a
	// worker wake the coordinator for each (it waits for them to end).
	finished    []*work
	hasFinished atomic.Bool // finished is not empty, for a look without mu
	eager       bool
	nudged      atomic.Bool // a wake for the coordinator is on its way
}

// The states of a request (work.state). A request leaves live once, under
// output.mu: to done when its final frame is committed, to dropped when it
// is cancelled or ended with nothing (more) to write for it.
const (
	live uint32 = iota
	done
	dropped
)

func newOutput(w *framing.Writer, counters *Counters) *output {
	o := &output{w: w, direct: w.Direct(), counters: counters, awake: true}
	o.idle.L = &o.mu
	return o
}

// endLocked moves w out of live, and reports whether it was live.
func (o *output) endLocked(w *work, state uint32) bool {
	if w.state.Load() != live {
		return false
	}
	w.state.Store(state)
	o.counters.addInFlight(-1)
	return true
}

// end moves w out of live (the coordinator's cancellation or end of a
// request), and reports whether it was live.
func (o *output) end(w *work, state uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.endLocked(w, state)
}

// commit appends a frame that belongs to no request, or to a request
// whose frames the coordinator checked itself; false after a failure.
func (o *output) commit(frame []byte) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed != nil || o.closed {
		return false
	}
	o.roomLocked()
	o.pending = append(o.pending, frame...)
	return true
}

// commitFor appends one of w's frames while w is live; final makes it the
// last (w is then done). It reports whether the frame was committed.
func (o *output) commitFor(w *work, frame []byte, final bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failed != nil || o.closed || w.state.Load() != live {
		return false
	}
	if final {
		o.endLocked(w, done)
	}
	o.roomLocked()
	o.pending = append(o.pending, frame...)
	return true
}

// finish is a worker handing over w's final frame. It leaves the frame in
// pending while someone else will write it, and otherwise writes it, with
// what is committed meanwhile; it never waits on the device. wake reports
// that the coordinator must be woken: a write that would block or failed,
// or a coordinator that waits for requests to end. kept reports that the
// output keeps frame (the rest of a large frame the device did not take);
// otherwise the caller may reuse it.
func (o *output) finish(w *work, frame []byte) (wake, kept bool) {
	o.mu.Lock()
	if o.failed != nil || o.closed || !o.endLocked(w, done) {
		o.mu.Unlock()
		return false, false
	}
	o.finished = append(o.finished, w)
	o.hasFinished.Store(true)
	wake = o.eager || !o.direct // without direct writes the coordinator writes it
	if o.writing || o.blocked || o.awake || !o.direct {
		o.roomLocked()
		o.pending = append(o.pending, frame...)
		o.mu.Unlock()
		return wake, false
	}
	o.writing = true
	if len(frame) >= directBatch && len(o.pending) == 0 {
		// Large: written as it is, without a copy.
		o.mu.Unlock()
		more := o.writeDirect(frame, false)
		return more || wake, more
	}
	o.roomLocked()
	o.pending = append(o.pending, frame...)
	if len(frame) < directBatch {
		o.mu.Unlock()
		// Other workers finishing now leave their frames to this write:
		// one yield gathers them, as the coordinator's gather does.
		runtime.Gosched()
		o.mu.Lock()
	}
	buf := o.takeLocked()
	o.mu.Unlock()
	return o.writeDirect(buf, true) || wake, false
}

// directBatch is the size from which a worker writes its frame at once,
// without yielding first for others to join it.
const directBatch = 16 << 10

// outBuffers hold the output buffers of connections that have nothing in
// flight: such a connection gives its buffers back (release), so that an
// idle one holds none, and takes one again when it next commits, rather
// than growing a new one each time it drains.
var outBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

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

// giveBack returns an emptied buffer to outBuffers.
func giveBack(buf []byte) {
	if buf != nil && cap(buf) <= maxBatch {
		buf = buf[:0]
		outBuffers.Put(&buf)
	}
}

// takeLocked takes the pending frames for a write, leaving the spare
// buffer to commit to meanwhile. o.mu is held.
func (o *output) takeLocked() []byte {
	buf := o.pending
	o.pending, o.spare = o.spare[:0], nil
	return buf
}

// keepLocked keeps a buffer that was written whole as the spare, so that
// a busy connection alternates two buffers. o.mu is held.
func (o *output) keepLocked(buf []byte) {
	if cap(buf) <= maxBatch && cap(buf) > cap(o.spare) && !o.closed {
		o.spare = buf[:0]
	}
}

// writeDirect writes buf and whatever is committed meanwhile with
// non-blocking writes; o.writing is set by the caller. It reports whether
// the coordinator must take over (the device would block, or failed), and
// then keeps the rest of buf. own says that buf is the output's, to keep
// as its spare once written; otherwise it is the caller's.
func (o *output) writeDirect(buf []byte, own bool) (wake bool) {
	for {
		n, err := o.w.Try(buf)
		o.mu.Lock()
		switch {
		case err != nil:
			o.failLocked(err)
			wake = true
		case n < len(buf):
			// The rest goes first; the coordinator writes it and what
			// follows, with the write timeout.
			o.pending = append(buf[n:], o.pending...)
			o.blocked = true
			wake = true
		default:
			if own {
				o.keepLocked(buf)
			}
			if len(o.pending) > 0 && !o.closed {
				buf, own = o.takeLocked(), true
				o.mu.Unlock()
				continue
			}
		}
		o.writing = false
		o.idle.Broadcast()
		o.mu.Unlock()
		return wake
	}
}

// flush is the coordinator writing what is pending, with the write
// timeout, after any worker's write in progress. It reports false when
// the write path has failed, now or before.
func (o *output) flush() bool {
	o.mu.Lock()
	for o.writing {
		o.idle.Wait() // a worker's non-blocking write: brief
	}
	if o.failed != nil {
		o.mu.Unlock()
		return false
	}
	if len(o.pending) == 0 || o.closed {
		o.blocked = false
		o.mu.Unlock()
		return true
	}
	buf := o.takeLocked()
	o.writing = true
	o.mu.Unlock()
	err := o.w.Write(buf)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writing = false
	o.idle.Broadcast()
	if err != nil {
		o.failLocked(err)
		return false
	}
	o.keepLocked(buf)
	if len(o.pending) == 0 {
		o.blocked = false
	}
	return true
}

func (o *output) failLocked(err error) {
	if o.failed == nil {
		oe, ok := errors.AsType[*OutputError](err)
		if !ok {
			oe = &OutputError{Err: err}
		}
		o.failed = oe
	}
	o.pending, o.spare = nil, nil // an abandoned write may still be reading one
}

// err is the terminal failure, or nil.
func (o *output) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

// waiting reports how much is committed and not yet written, and whether
// the coordinator must write it (the device would block).
func (o *output) waiting() (n int, blocked bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending), o.blocked
}

// release gives back the buffers of a connection with nothing in flight.
func (o *output) release() {
	o.mu.Lock()
	if len(o.pending) == 0 && !o.writing && o.failed == nil {
		giveBack(o.pending)
		giveBack(o.spare)
		o.pending, o.spare = nil, nil
	}
	o.mu.Unlock()
}

// takeFinished returns the requests workers finished since the last call.
func (o *output) takeFinished(spare []*work) []*work {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.finished
	o.finished = spare[:0]
	o.hasFinished.Store(false)
	return got
}

// sleep is the coordinator about to wait: it reports false, staying
// awake, when frames wait to be written (it must write them first).
func (o *output) sleep() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.pending) > 0 {
		return false
	}
	o.awake = false
	return true
}

// wake is the coordinator back from a wait.
func (o *output) wake() {
	o.mu.Lock()
	o.awake = true
	o.mu.Unlock()
}

// setEager makes workers wake the coordinator for every request they end.
func (o *output) setEager() {
	o.mu.Lock()
	o.eager = true
	o.mu.Unlock()
}

// close ends the write path for good, once any worker's write in
// progress has returned.
func (o *output) close() {
	o.mu.Lock()
	o.closed = true
	for o.writing {
		o.idle.Wait()
	}
	o.pending, o.spare = nil, nil
	o.mu.Unlock()
}
