package upstream

import (
	"log/slog"
	"os"
	"sync"
)

// maxWriteBatch bounds what one write(2) to the child's stdin carries:
// frames queued together go out together, up to this much plus one frame.
const maxWriteBatch = 64 << 10

// writer is the one writer of the child's stdin. Frames are queued by any
// goroutine and written in order by loop. A request's frame that was not
// written yet when its caller gave up is skipped (so nothing reaches the
// upstream for it), which is why the queue knows each frame's call.
type writer struct {
	f      *os.File
	log    *slog.Logger
	onFail func() // a write failed while the writer was open

	mu      sync.Mutex
	wake    *sync.Cond
	queue   []outFrame
	closed  bool // no more frames are accepted
	closeMu sync.Once
	done    chan struct{} // loop returned and stdin is closed
}

type outFrame struct {
	data []byte
	call *call // the request this frame sends, nil for a notification or response
}

func (w *writer) init(f *os.File, log *slog.Logger, onFail func()) {
	w.f, w.log, w.onFail = f, log, onFail
	w.wake = sync.NewCond(&w.mu)
	w.done = make(chan struct{})
}

// send queues a frame; it reports false once the writer is closed.
func (w *writer) send(data []byte, cl *call) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.queue = append(w.queue, outFrame{data: data, call: cl})
	if len(w.queue) == 1 {
		w.wake.Signal()
	}
	return true
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
		for len(w.queue) == 0 && !w.closed {
			w.wake.Wait()
		}
		if w.closed && len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		buf = buf[:0]
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
		w.mu.Unlock()
		if len(buf) == 0 {
			continue
		}
		if _, err := w.f.Write(buf); err != nil {
			// Either close interrupted the write (a stop), or the child no
			// longer reads its stdin, which leaves it unusable: onFail ends
			// it, and the calls whose frames went out get its exit.
			w.mu.Lock()
			stopping := w.closed
			w.mu.Unlock()
			if !stopping {
				w.log.Warn("upstream stopped reading its stdin; ending it", "err", err)
				w.onFail()
			}
			w.close(ErrClosed)
			return
		}
		if cap(buf) > 4*maxWriteBatch {
			buf = nil
		}
	}
}
