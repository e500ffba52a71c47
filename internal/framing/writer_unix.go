//go:build unix

package framing

import (
	"io"
	"os"
	"syscall"
)

// rawConn is out's descriptor, when it has one (syscall.Conn).
func rawConn(out io.Writer) syscall.RawConn {
	if sc, ok := out.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			return raw
		}
	}
	return nil
}

// nowWriter is WriteNow's write for one descriptor, bound once, so that a
// Writer's non-blocking writes make no closure (an allocation) each.
type nowWriter struct {
	raw syscall.RawConn
	fn  func(fd uintptr) bool
	b   []byte
	n   int
	err error
}

func (w *nowWriter) write(fd uintptr) bool {
	for {
		w.n, w.err = syscall.Write(int(fd), w.b)
		if w.err != syscall.EINTR {
			break
		}
	}
	return true // never wait in the poller
}

// try is WriteNow through w.
func (w *nowWriter) try(b []byte) (n int, err error) {
	if w.fn == nil {
		w.fn = w.write
	}
	w.b, w.n, w.err = b, 0, nil
	rerr := w.raw.Write(w.fn)
	n, err = max(w.n, 0), w.err
	w.b, w.err = nil, nil
	return result(n, rerr, err)
}

// result is what WriteNow reports for a write of n bytes that ended with
// the poller's rerr and the system call's err.
func result(n int, rerr, err error) (int, error) {
	switch {
	case rerr != nil:
		return n, rerr
	case err == syscall.EAGAIN:
		return n, nil
	case err != nil:
		return n, os.NewSyscallError("write", err)
	}
	return n, nil
}

// WriteNow writes what a descriptor in the runtime's poller takes of b at
// once, with one non-blocking write(2), and never waits: n < len(b) with a
// nil error means the descriptor would block. The caller makes sure no
// other write to it runs meanwhile.
func WriteNow(raw syscall.RawConn, b []byte) (n int, err error) {
	rerr := raw.Write(func(fd uintptr) bool {
		for {
			n, err = syscall.Write(int(fd), b)
			if err != syscall.EINTR {
				break
			}
		}
		return true // never wait in the poller
	})
	return result(max(n, 0), rerr, err)
}
