package framing

import (
	"bytes"
	"errors"
	"io"
	"os"
	"syscall"
	"time"
)

// ErrWriteTimeout is Writer.Write's error when a frame was not accepted by
// the device within the Writer's timeout. Its text reads well after the
// writer's caller names what it wrote: "output failed: write timed out".
var ErrWriteTimeout = errors.New("write timed out")

type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// Writer writes frames whole to one device, for the one goroutine that
// owns the device's output at a time: the session transport's coordinator
// or a worker (transport/stdio), a hosted server's stdin writer
// (mcpclient). It never retries and never closes the device.
//
// A device with write deadlines that is in the runtime's poller (an
// *os.File on a pipe, a socket or a terminal) is Direct: Try writes what
// it takes at once with one non-blocking write(2), and Write tries first,
// so that most frames need no deadline at all. Any other device is written
// by a helper goroutine that Write waits for, within the timeout, and
// abandons when the timeout passes.
type Writer struct {
	out     io.Writer
	timeout time.Duration

	// deadlines is set when the device takes write deadlines.
	deadlines bool
	// raw is the device's descriptor when it is in the runtime's poller:
	// Try writes without waiting.
	raw     syscall.RawConn
	now     nowWriter // Try's writes to raw
	frames  chan []byte
	results chan error
	timer   *time.Timer
}

// NewWriter writes to out, each Write within timeout; 0 or less waits as
// long as the device does (a hosted server's stdin, which only closing
// ends).
func NewWriter(out io.Writer, timeout time.Duration) *Writer {
	w := &Writer{out: out, timeout: timeout}
	if d, ok := out.(writeDeadliner); ok && d.SetWriteDeadline(time.Time{}) == nil {
		w.deadlines = true
		w.raw = rawConn(out)
		w.now.raw = w.raw
	}
	return w
}

// Direct reports whether the device takes non-blocking writes (Try).
func (w *Writer) Direct() bool { return w.raw != nil }

// Try writes what the device takes of b at once, without waiting: n <
// len(b) with a nil error means it would block. Only for a Direct Writer;
// its caller owns the device's output.
func (w *Writer) Try(b []byte) (n int, err error) { return w.now.try(b) }

// Write writes frames whole, or returns ErrWriteTimeout or the device's
// error (syscall.EPIPE, syscall.ENOSPC, …). After an error the Writer must
// not be used again.
func (w *Writer) Write(frames []byte) error {
	if w.deadlines {
		return w.writeWithDeadline(frames)
	}
	if w.timeout <= 0 {
		_, err := w.out.Write(frames)
		return err
	}
	return w.writeWithWait(frames)
}

// WriteParts writes the parts of one frame (docs/transport.md §11.1), in
// order, as Write writes a frame: whole within the timeout, or an error,
// after which the Writer must not be used again. On a device with
// deadlines the parts are written from their own memory, under one
// deadline; any other device is given one buffer holding them all.
func (w *Writer) WriteParts(parts [][]byte) error {
	if !w.deadlines {
		return w.Write(bytes.Join(parts, nil))
	}
	if w.raw != nil {
		// As writeWithDeadline: what is taken at once needs no deadline.
		for len(parts) > 0 {
			n, err := w.Try(parts[0])
			if err != nil {
				return err
			}
			if n < len(parts[0]) {
				parts[0] = parts[0][n:]
				break
			}
			parts = parts[1:]
		}
		if len(parts) == 0 {
			return nil
		}
	}
	d := w.out.(writeDeadliner)
	if w.timeout > 0 {
		if err := d.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			return err
		}
	}
	var err error
	for _, p := range parts {
		if _, err = w.out.Write(p); err != nil {
			break
		}
	}
	if w.timeout > 0 && w.raw != nil && err == nil {
		err = d.SetWriteDeadline(time.Time{})
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrWriteTimeout
	}
	return err
}

func (w *Writer) writeWithDeadline(frame []byte) error {
	if w.raw != nil {
		// Most writes are taken at once: they need no deadline.
		n, err := w.Try(frame)
		if err != nil || n == len(frame) {
			return err
		}
		frame = frame[n:]
	}
	if w.timeout <= 0 {
		_, err := w.out.Write(frame)
		return err
	}
	d := w.out.(writeDeadliner)
	if err := d.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return err
	}
	_, err := w.out.Write(frame)
	if w.raw != nil && err == nil {
		// Cleared, or the next Try would find it expired.
		err = d.SetWriteDeadline(time.Time{})
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrWriteTimeout
	}
	return err
}

func (w *Writer) writeWithWait(frame []byte) error {
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
func (w *Writer) loop(frames <-chan []byte, results chan<- error) {
	for f := range frames {
		_, err := w.out.Write(f)
		results <- err
	}
}

// Close stops the helper goroutine, if any, and clears the deadline so the
// device is left as it was found.
func (w *Writer) Close() {
	if w.frames != nil {
		close(w.frames)
		w.frames = nil
	}
	if w.deadlines {
		_ = w.out.(writeDeadliner).SetWriteDeadline(time.Time{})
	}
}
