package stdio

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/limits"
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
//   - What is committed and not yet written (held) is bounded
//     (docs/transport.md §11.5): a worker whose final frame is larger than
//     smallFrame first reserves room for it (reserve), waiting while the
//     connection holds max bytes or more, and, past the first
//     outputAllowance bytes, while the daemon's Budget is full; it waits in
//     the handler's turn, having given its executor slot back and holding
//     its connection (executor.HoldConn): no more of the connection's work
//     starts while one of its workers waits. The coordinator never
//     waits for room: past max it writes what is pending before it commits
//     more (room), and it is the writer, so that is its own wait on the
//     device, bounded by the write timeout.
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

	// max bounds held (session.max_pending_output_bytes); budget, when
	// set, is the daemon's, which held draws on past outputAllowance.
	max    int
	budget *Budget

	mu      sync.Mutex
	idle    sync.Cond // signalled when writing ends
	room    sync.Cond // signalled when held shrinks or a request ends, while waiters > 0
	waiters int       // workers waiting in reserve
	// held counts the bytes committed and not yet written (pending, and
	// the buffer being written) and the room reserved for final frames
	// (work.reserved); charged is what of it the budget was charged.
	held, charged int
	pending       []byte // committed frames not yet written
	// parts are the rest of a spliced final frame (finishParts) the
	// device did not take at once, written before pending; partsLen is
	// their length. Only while blocked or writing.
	parts    [][]byte
	partsLen int
	spare    []byte // a written buffer, for pending's next turn
	writing  bool   // a goroutine is writing frames committed before pending
	blocked  bool   // the device would block: the coordinator drains pending
	awake    bool   // the coordinator will look at pending before it waits
	failed   error  // the terminal failure (docs/transport.md §11.4)
	closed   bool
	// finished are the requests whose final frame a worker committed, for
	// the coordinator to take out of its in-flight set; eager makes a
	// worker wake the coordinator for each (it waits for them to end).
	finished    []*work
	hasFinished atomic.Bool // finished is not empty, for a look without mu
	eager       bool
	nudged      atomic.Bool // a wake for the coordinator is on its way

	// stall, made by stalled while the device does not block, is closed
	// when it does (blockLocked).
	stall chan struct{}
}

// The states of a request (work.state). A request leaves live once, under
// output.mu: to done when its final frame is committed, to dropped when it
// is cancelled or ended with nothing (more) to write for it.
const (
	live uint32 = iota
	done
	dropped
)

// newOutput returns the write path of w, holding at most max bytes
// (limits.Limits.MaxPendingOutputBytes; 0 or less means the default) and
// drawing on budget (nil: none).
func newOutput(w *framing.Writer, counters *Counters, max int, budget *Budget) *output {
	if max <= 0 {
		max = limits.DefaultMaxPendingOutputBytes
	}
	o := &output{w: w, direct: w.Direct(), counters: counters, awake: true, max: max, budget: budget}
	o.idle.L = &o.mu
	o.room.L = &o.mu
	return o
}

// endLocked moves w out of live, and reports whether it was live. The room
// reserved for w's final frame is given back unless the frame is being
// committed (finish took it).
func (o *output) endLocked(w *work, state uint32) bool {
	if w.state.Load() != live {
		return false
	}
	w.state.Store(state)
	o.counters.addInFlight(-1)
	if w.reserved > 0 {
		if o.failed == nil && !o.closed { // else dropHeldLocked forgot it
			o.shrinkLocked(w.reserved)
		}
		w.reserved = 0
	}
	if o.waiters > 0 {
		o.room.Broadcast() // a waiter may be waiting for its own request
	}
	return true
}

// end moves w out of live (the coordinator's cancellation or end of a
// request), and reports whether it was live.
func (o *output) end(w *work, state uint32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.endLocked(w, state)
}

// The results of commit and commitFor.
const (
	committed = iota
	refused   // the write path failed or closed, or the request ended
	crowded   // past max: write what is pending, then commit again
)

// commit appends a frame that belongs to no request, or to a request
// whose frames the coordinator checked itself. It reports crowded,
// committing nothing, when the connection would pass max with it while
// something is pending: the coordinator, which never waits for room,
// makes it by writing first (docs/transport.md §11.5).
func (o *output) commit(frame []byte) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.failed != nil || o.closed:
		return refused
	case o.crowdedLocked(len(frame)):
		return crowded
	}
	o.appendLocked(frame)
	return committed
}

// commitFor appends one of w's frames while w is live; final makes it the
// last (w is then done). It reports as commit does.
func (o *output) commitFor(w *work, frame []byte, final bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case o.failed != nil || o.closed || w.state.Load() != live:
		return refused
	case o.crowdedLocked(len(frame)):
		return crowded
	}
	if final {
		o.endLocked(w, done)
	}
	o.appendLocked(frame)
	return committed
}

// crowdedLocked reports whether committing n more bytes would pass max
// while something is pending (alone, any frame may go). o.mu is held.
func (o *output) crowdedLocked(n int) bool {
	return (len(o.pending) > 0 || o.partsLen > 0) && o.held+n > o.max
}

// finish is a worker handing over w's final frame. It leaves the frame in
// pending while someone else will write it, and otherwise writes it, with
// what is committed meanwhile; it never waits on the device. wake reports
// that the coordinator must be woken: a write that would block or failed,
// or a coordinator that waits for requests to end. kept reports that the
// output keeps frame (the rest of a large frame the device did not take);
// otherwise the caller may reuse it.
//
// The frame is counted in held from here on: in the room reserve made for
// it, or added now (a small frame, or an error the executor made, which
// never waits).
func (o *output) finish(w *work, frame []byte) (wake, kept bool) {
	o.mu.Lock()
	if o.failed != nil || o.closed || w.state.Load() != live {
		o.mu.Unlock()
		return false, false
	}
	reserved := w.reserved
	w.reserved = 0 // the frame takes the room (endLocked gives back the rest)
	o.endLocked(w, done)
	o.finished = append(o.finished, w)
	o.hasFinished.Store(true)
	if reserved != len(frame) {
		if reserved > 0 {
			o.shrinkLocked(reserved)
		}
		o.growLocked(len(frame))
	}
	wake = o.eager || !o.direct // without direct writes the coordinator writes it
	if o.writing || o.blocked || o.awake || !o.direct {
		kept = o.pendLocked(frame)
		o.mu.Unlock()
		return wake, kept
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

// finishParts is finish for a spliced final frame (protocol.Splices) of
// size bytes in parts, whose texts alias their strings: while the worker
// may write, it writes them from their own memory, and what the device
// does not take at once stays in parts (kept) for the coordinator, before
// pending; otherwise they are copied into pending, as finish copies a
// frame.
func (o *output) finishParts(w *work, parts [][]byte, size int) (wake, kept bool) {
	o.mu.Lock()
	if o.failed != nil || o.closed || w.state.Load() != live {
		o.mu.Unlock()
		return false, false
	}
	reserved := w.reserved
	w.reserved = 0
	o.endLocked(w, done)
	o.finished = append(o.finished, w)
	o.hasFinished.Store(true)
	if reserved != size {
		if reserved > 0 {
			o.shrinkLocked(reserved)
		}
		o.growLocked(size)
	}
	wake = o.eager || !o.direct
	if o.writing || o.blocked || o.awake || !o.direct || len(o.pending) > 0 {
		o.roomLocked()
		for _, p := range parts {
			o.pending = append(o.pending, p...)
		}
		o.mu.Unlock()
		return wake, false
	}
	o.writing = true
	o.mu.Unlock()
	more, kept := o.writeParts(parts)
	return more || wake, kept
}

// writeParts writes parts with non-blocking writes; o.writing is set by
// the caller. When the device does not take them all, the rest stays in
// o.parts for the coordinator (kept: parts' memory is the output's now)
// and wake is set; else it goes on with what was committed meanwhile, as
// writeDirect does.
func (o *output) writeParts(parts [][]byte) (wake, kept bool) {
	written := 0
	for i, p := range parts {
		n, err := o.w.Try(p)
		written += n
		if err == nil && n == len(p) {
			continue
		}
		o.mu.Lock()
		o.shrinkLocked(written)
		if err != nil {
			o.failLocked(err)
		} else {
			parts[i] = p[n:]
			o.parts = parts[i:]
			for _, rest := range o.parts {
				o.partsLen += len(rest)
			}
			o.blockLocked()
			kept = true
		}
		o.writing = false
		o.idle.Broadcast()
		o.mu.Unlock()
		return true, kept
	}
	o.mu.Lock()
	o.shrinkLocked(written)
	if len(o.pending) > 0 && !o.closed {
		buf := o.takeLocked()
		o.mu.Unlock()
		return o.writeDirect(buf, true), false
	}
	o.writing = false
	o.idle.Broadcast()
	o.mu.Unlock()
	return false, false
}

// directBatch is the size from which a worker writes its frame at once,
// without yielding first for others to join it.
const directBatch = 16 << 10

// outBuffers hold the output buffers of connections that have nothing in
// flight: such a connection gives its buffers back (release), so that an
// idle one holds none, and takes one again when it next commits, rather
// than growing a new one each time it drains.
var outBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// smallFrame is the largest final frame a worker commits without
// reserving room first. Smaller frames never wait: what they add is
// bounded by the requests a connection has in flight, and a connection
// whose device would block stops reading (its coordinator is writing), so
// it admits no more.
const smallFrame = 4 << 10

// outputAllowance is what a connection holds before its output draws on
// the daemon's Budget: one write batch, so that the output of a
// connection whose client reads never touches the shared budget (its
// mutex), as its read buffer does not either.
const outputAllowance = maxBatch

// appendLocked commits frame, counting it in held. o.mu is held.
func (o *output) appendLocked(frame []byte) {
	o.growLocked(len(frame))
	o.roomLocked()
	o.pending = append(o.pending, frame...)
}

// pendLocked adds a final frame to pending, which held counts already:
// a large frame becomes pending as it is, without a copy, when nothing
// else is (kept: the output owns it now). o.mu is held.
func (o *output) pendLocked(frame []byte) (kept bool) {
	if len(frame) >= directBatch && len(o.pending) == 0 {
		if o.pending != nil {
			giveBack(o.pending)
		}
		o.pending = frame
		return true
	}
	o.roomLocked()
	o.pending = append(o.pending, frame...)
	return false
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
			o.shrinkLocked(n)
			o.pending = append(buf[n:], o.pending...)
			o.blockLocked()
			wake = true
		default:
			o.shrinkLocked(len(buf))
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
	if o.partsLen > 0 && !o.closed {
		// A spliced frame's rest goes first, from its own memory.
		parts, n := o.parts, o.partsLen
		o.parts, o.partsLen = nil, 0
		o.writing = true
		o.mu.Unlock()
		err := o.w.WriteParts(parts)
		o.mu.Lock()
		o.writing = false
		o.idle.Broadcast()
		if err != nil {
			o.failLocked(err)
			o.mu.Unlock()
			return false
		}
		o.shrinkLocked(n)
	}
	if len(o.pending) == 0 || o.closed {
		o.blocked = false
		o.mu.Unlock()
		return true
	}
	buf := o.takeLocked()
	o.writing = true
	o.mu.Unlock()
	err := o.drain(buf)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writing = false
	o.idle.Broadcast()
	if err != nil {
		o.failLocked(err)
		return false
	}
	o.shrinkLocked(len(buf))
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
	o.parts, o.partsLen = nil, 0
	o.dropHeldLocked()
}

// drain is flush's write of buf, with the write timeout. On a device that
// takes non-blocking writes it tries one first, so that it knows when the
// device would block (blockLocked) before it waits on it: with the write
// timeout, while a stalled client reads nothing. o.writing is set by the
// caller.
func (o *output) drain(buf []byte) error {
	if !o.direct {
		return o.w.Write(buf)
	}
	n, err := o.w.Try(buf)
	if err != nil || n == len(buf) {
		return err
	}
	o.mu.Lock()
	o.blockLocked()
	o.mu.Unlock()
	return o.w.Write(buf[n:])
}

// blockLocked records that the device would block: the coordinator
// drains pending, and the reports waiting on it stop waiting (stalled).
// o.mu is held.
func (o *output) blockLocked() {
	o.blocked = true
	if o.stall != nil {
		close(o.stall)
		o.stall = nil
	}
}

// stalled returns a channel closed once the device would block, already
// closed when it does now (docs/transport.md §10.2): a progress report
// waits for its acknowledgement only until then, not while the client
// does not read. On a device without non-blocking writes (not Direct)
// nobody knows, and the channel is never closed: a report waits at most
// progress.AckTimeout there.
func (o *output) stalled() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.blocked {
		return closedStall
	}
	if o.stall == nil {
		o.stall = make(chan struct{})
	}
	return o.stall
}

// closedStall is stalled's answer while the device would block.
var closedStall = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

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
	return len(o.pending) + o.partsLen, o.blocked
}

// release gives back the buffers of a connection with nothing in flight.
func (o *output) release() {
	o.mu.Lock()
	if len(o.pending) == 0 && o.partsLen == 0 && !o.writing && o.failed == nil {
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
	if len(o.pending) > 0 || o.partsLen > 0 {
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
	o.parts, o.partsLen = nil, 0
	o.dropHeldLocked()
	o.mu.Unlock()
}
