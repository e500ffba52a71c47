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
	n = max(n, 0)
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
