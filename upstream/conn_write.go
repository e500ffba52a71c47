package upstream

import (
	"log/slog"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/snodod/snodod/internal/framing"
)

// maxWriteBatch bounds what one write(2) to the child's stdin carries:
// frames queued together go out together, up to this much plus one frame.
const maxWriteBatch = 64 << 10

// writer is the one writer of the child's stdin. Frames are queued by any
// goroutine and written in order by loop. A request's frame that was not
// written yet when its caller gave up is skipped (so nothing reaches the
// upstream for it), which is why the queue knows each frame's call.
//
// When nothing is queued and nobody writes, send writes the frame itself,
// with the frames queued during one yield, with one non-blocking write(2)
// (try) instead of waking loop for it: a goroutine hop per call was most
// of what the Conn added to a call (issue 13). What the pipe does not take
// at once is queued first, for loop, which alone waits on the pipe. One
// goroutine at a time writes (busy), so frames never interleave.
type writer struct {
	f      *os.File
	raw    syscall.RawConn // f's descriptor, nil when it has none
	log    *slog.Logger
	onFail func() // a write failed while the writer was open

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []outFrame
	busy    bool   // a goroutine is writing (send or loop)
	direct  []byte // send's buffer, while not busy
	closed  bool   // no more frames are accepted
	closeMu sync.Once
	done    chan struct{} // loop returned and stdin is closed
}

type outFrame struct {
	data []byte
	call *call // the request this frame sends, nil for a notification or response
}

func (w *writer) init(f *os.File, log *slog.Logger, onFail func()) {
	w.f, w.log, w.onFail = f, log, onFail
	if raw, err := f.SyscallConn(); err == nil {
		w.raw = raw
	}
	w.wake = sync.NewCond(&w.mu)
	w.done = make(chan struct{})
}

// send writes a frame, or queues it for loop; it reports false once the
// writer is closed. It never waits on the pipe.
func (w *writer) send(data []byte, cl *call) bool {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	w.queue = append(w.queue, outFrame{data: data, call: cl})
	if w.raw == nil || w.busy || len(w.queue) > 1 {
		w.wake.Signal()
		w.mu.Unlock()
		return true
	}
	// Nobody writes: this goroutine does, after one yield, so that the
	// frames of callers sending with it share the write.
	w.busy = true
	w.mu.Unlock()
	runtime.Gosched()
	w.mu.Lock()
	buf := w.takeLocked(w.direct[:0])
	w.mu.Unlock()
	n, err := w.try(buf)
	w.mu.Lock()
	w.busy = false
	if err == nil && n < len(buf) {
		// The rest first, then what was queued meanwhile: loop writes it.
		w.queue = append([]outFrame{{data: append([]byte(nil), buf[n:]...)}}, w.queue...)
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

// takeLocked appends the queued frames to buf, up to maxWriteBatch and one
// frame, marking their calls sent and skipping the frames of calls given
// up, and takes them off the queue. w.mu is held.
func (w *writer) takeLocked(buf []byte) []byte {
	n := 0
	for n < len(w.queue) && len(buf) < maxWriteBatch {
		f := w.queue[n]
		n++
		if f.call != nil {
			if f.call.abandoned {
				continue
			}
			f.call.sent = true
		}
		buf = append(buf, f.data...)
	}
	clear(w.queue[:n])
	w.queue = w.queue[n:]
	return buf
}

// try writes what the pipe takes of b at once, without waiting.
func (w *writer) try(b []byte) (int, error) { return framing.WriteNow(w.raw, b) }

// failed ends the writer after a failed write: either close interrupted it
// (a stop), or the child no longer reads its stdin, which leaves it
// unusable: onFail ends it, and the calls whose frames went out get its
// exit.
func (w *writer) failed(err error, stopping bool) {
	if !stopping {
		w.log.Warn("upstream stopped reading its stdin; ending it", "err", err)
		w.onFail()
	}
	w.close(ErrClosed)
}

// unsend takes cl's frame out of the queue if it was not written yet, and
// reports whether it did.
func (w *writer) unsend(cl *call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cl.sent {
		return false
	}
	cl.abandoned = true
	return true
}

// close stops accepting frames, fails the calls whose frames were not
// written yet with err, and closes stdin: the child reads its end of input
// (the first step of a graceful stop), and a write blocked on a child that
// does not read returns.
func (w *writer) close(err error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	queue := w.queue
	w.queue = nil
	for _, f := range queue {
		if f.call != nil && !f.call.abandoned {
			f.call.abandoned = true
		}
	}
	w.wake.Signal()
	w.mu.Unlock()
	for _, f := range queue {
		if f.call != nil {
			f.call.fail(err)
		}
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
		_, err := w.f.Write(buf)
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
