package mcpclient

import (
	"log/slog"
	"os"
	"runtime"
	"sync"

	"github.com/snodod/snodod/internal/framing"
)

// maxWriteBatch bounds what one write(2) to the child's stdin carries:
// messages queued together go out together, up to this much plus one.
const maxWriteBatch = 64 << 10

// writer is the one writer of the child's stdin. Messages are queued by
// any goroutine and written in order, each with its newline. A request
// not written yet when its caller gave up is skipped (withdraw), so that
// nothing reaches the server for it.
//
// When nothing is queued and nobody writes, send writes the message
// itself, with those queued during one yield, with one non-blocking
// write(2) (framing.Writer.Try) instead of waking loop for it: a goroutine
// hop per call was most of what the Conn added to a call
// (docs/architecture.md §4.5). What
// the pipe does not take at once is queued first, for loop, which alone
// waits on the pipe. One goroutine at a time writes (busy), so messages
// never interleave.
type writer struct {
	f      *os.File
	fw     *framing.Writer // f's writer: Try when Direct, else Write
	log    *slog.Logger
	onFail func() // a write failed while the writer was open

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []*Outgoing
	replies int    // answers in queue, for queuedReplies
	busy    bool   // a goroutine is writing (send or loop)
	direct  []byte // send's buffer, while not busy
	closed  bool   // no more messages are accepted
	closeMu sync.Once
	done    chan struct{} // loop returned and stdin is closed
}

func (w *writer) init(f *os.File, log *slog.Logger, onFail func()) {
	// No write timeout: a child that does not read is ended by its stop,
	// which closes stdin under the blocked write.
	w.f, w.fw, w.log, w.onFail = f, framing.NewWriter(f, 0), log, onFail
	w.wake = sync.NewCond(&w.mu)
	w.done = make(chan struct{})
}

// send writes m, or queues it for loop; it reports false once the writer
// is closed. It never waits on the pipe.
func (w *writer) send(m *Outgoing) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, m)
	if m.Reply {
		w.replies++
	}
	if !w.fw.Direct() || w.busy || len(w.queue) > 1 {
		w.wake.Signal()
		w.mu.Unlock()
		return true
	}
	// Nobody writes: this goroutine does, after one yield, so that the
	// messages of callers sending with it share the write.
	w.busy = true
	w.mu.Unlock()
	runtime.Gosched()
	w.mu.Lock()
	buf := w.takeLocked(w.direct[:0])
	w.mu.Unlock()
	n, err := w.fw.Try(buf)
	w.mu.Lock()
	w.busy = false
	if err == nil && n < len(buf) {
		// The rest first, then what was queued meanwhile: loop writes it.
		w.queue = append([]*Outgoing{{Data: append([]byte(nil), buf[n:]...), sent: true}}, w.queue...)
	}
	if cap(buf) <= maxWriteBatch {
		w.direct = buf[:0]
	}
	if len(w.queue) > 0 {
		w.wake.Signal()
	}
	stopping := w.closed
	w.mu.Unlock()
	if err != nil {
		w.failed(err, stopping)
	}
	return true
}

// takeLocked appends the queued messages to buf, each with its newline,
// up to maxWriteBatch and one message, marking them sent and skipping
// those withdrawn, and takes them off the queue. A rest queued by send is
// already framed. w.mu is held.
func (w *writer) takeLocked(buf []byte) []byte {
	n := 0
	for n < len(w.queue) && len(buf) < maxWriteBatch {
		m := w.queue[n]
		n++
		if m.Reply {
			w.replies--
		}
		if m.withdrawn {
			continue
		}
		framed := m.sent // a rest: its bytes are the wire's already
		m.sent = true
		buf = append(buf, m.Data...)
		if !framed {
			buf = append(buf, '\n')
		}
	}
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	return buf
}

// queuedReplies is how many answers wait in the queue.
// busyOrQueued reports a write under way or messages queued.
func (w *writer) busyOrQueued() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.busy || len(w.queue) > 0 || w.closed
}

func (w *writer) queuedReplies() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.replies
}

// failed ends the writer after a failed write: either close interrupted it
// (a stop), or the child no longer reads its stdin, which leaves it
// unusable: onFail ends it, and the calls whose requests went out get its
// exit.
func (w *writer) failed(err error, stopping bool) {
	if !stopping {
		w.log.Warn("upstream stopped reading its stdin; ending it", "err", err)
		w.onFail()
	}
	w.close()
}

// withdraw takes m out of the queue if it was not written yet, and
// reports whether it did.
func (w *writer) withdraw(m *Outgoing) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if m.sent {
		return false
	}
	m.withdrawn = true
	return true
}

// close stops accepting messages, drops those not written yet (their
// requests fail with ErrClosed), and closes stdin: the child reads its end
// of input (the first step of a graceful stop), and a write blocked on a
// child that does not read returns.
func (w *writer) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	var dropped []*Outgoing
	for _, m := range w.queue {
		if !m.withdrawn && !m.sent {
			m.withdrawn = true
			dropped = append(dropped, m)
		}
	}
	w.queue, w.replies = nil, 0
	w.wake.Signal()
	w.mu.Unlock()
	for _, m := range dropped {
		m.Dropped()
	}
	w.closeFile()
}

func (w *writer) closeFile() { w.closeMu.Do(func() { _ = w.f.Close() }) }

func (w *writer) loop() {
	defer close(w.done)
	defer w.closeFile()
	var buf []byte
	for {
		w.mu.Lock()
		for (len(w.queue) == 0 || w.busy) && !w.closed {
			w.wake.Wait()
		}
		if w.closed && (len(w.queue) == 0 || w.busy) {
			w.mu.Unlock()
			return
		}
		buf = w.takeLocked(buf[:0])
		w.busy = len(buf) > 0
		w.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		err := w.fw.Write(buf)
		w.mu.Lock()
		w.busy = false
		stopping := w.closed
		w.mu.Unlock()
		if err != nil {
			w.failed(err, stopping)
			return
		}
		if cap(buf) > 4*maxWriteBatch {
			buf = nil
		}
	}
}
