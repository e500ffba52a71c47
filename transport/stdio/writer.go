package stdio

import (
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

// ErrWriteTimeout is the cause of an output failure when a frame was not
// accepted by the device within WriteTimeout.
var ErrWriteTimeout = errors.New("timeout")

// OutputError is the terminal failure of the write path (docs/transport.md §11.4).
// Serve returns it; errors.Is matches its cause (ErrWriteTimeout, or the
// device's error such as syscall.EPIPE or syscall.ENOSPC).
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "output failed: " + e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// frameWriter writes committed frames to the device, each write within the
// write timeout. It is used by the coordinator only; it never retries and
// never closes the device.
type frameWriter struct {
	out     io.Writer
	timeout time.Duration

	// deadlines is set when the device takes write deadlines; otherwise
	// frames go through a helper goroutine that the coordinator waits for
	// boundedly, and a blocked write is abandoned.
	deadlines bool
	// raw is the device's descriptor when it is in the runtime's poller
	// (it takes deadlines, and is a syscall.Conn): a write is first tried
	// without waiting, by the coordinator and by workers (try).
	raw     syscall.RawConn
	frames  chan []byte
	results chan error
	timer   *time.Timer
}

func newFrameWriter(out io.Writer, timeout time.Duration) *frameWriter {
	w := &frameWriter{out: out, timeout: timeout}
	if d, ok := out.(writeDeadliner); ok && d.SetWriteDeadline(time.Time{}) == nil {
		w.deadlines = true
		w.raw = rawConn(out)
	}
	return w
}

// write writes frames whole or returns an *OutputError. After an error the
// writer must not be used again.
func (w *frameWriter) write(frames []byte) error {
	var err error
	if w.deadlines {
		err = w.writeWithDeadline(frames)
	} else {
		err = w.writeWithWait(frames)
	}
	if err != nil {
		return &OutputError{Err: err}
	}
	return nil
}

func (w *frameWriter) writeWithDeadline(frame []byte) error {
	if w.raw != nil {
		// Most writes are taken at once: they need no deadline.
		n, err := w.try(frame)
		if err != nil || n == len(frame) {
			return err
		}
		frame = frame[n:]
	}
	d := w.out.(writeDeadliner)
	if err := d.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	_, err := w.out.Write(frame)
	if w.raw != nil && err == nil {
		// Cleared, or the next try would find it expired.
		err = d.SetWriteDeadline(time.Time{})
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrWriteTimeout
	}
	return err
}

func (w *frameWriter) writeWithWait(frame []byte) error {
	if w.frames == nil {
		w.frames = make(chan []byte)
		w.results = make(chan error, 1)
		go w.loop(w.frames, w.results)
	}
	w.frames <- frame
	if w.timer == nil {
		w.timer = time.NewTimer(w.timeout)
	} else {
		w.timer.Reset(w.timeout)
	}
	select {
	case err := <-w.results:
		w.timer.Stop()
		return err
	case <-w.timer.C:
		// The write is abandoned: the helper stays blocked until the device
		// gives up, then exits; its result is ignored.
		close(w.frames)
		w.frames = nil
		return ErrWriteTimeout
	}
}

// loop performs writes for a device without deadlines.
func (w *frameWriter) loop(frames <-chan []byte, results chan<- error) {
	for f := range frames {
		_, err := w.out.Write(f)
		results <- err
	}
}

// close stops the helper goroutine, if any, and clears the deadline so the
// device is left as it was found.
func (w *frameWriter) close() {
	if w.frames != nil {
		close(w.frames)
		w.frames = nil
	}
	if w.deadlines {
		_ = w.out.(writeDeadliner).SetWriteDeadline(time.Time{})
	}
}
