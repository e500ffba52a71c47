//go:build unix

package framing

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
)

// readBuffers are the read buffers of connections with a pooledSource: a
// small one for the first read after a wait, a large one while reads keep
// filling it.
var readBuffers = [2]bufferList{
	{size: smallReadChunk, keep: 1024}, // what one request usually takes
	{size: readChunk, keep: 64},
}

// bufferList keeps up to keep free buffers of one size; beyond that a
// returned buffer is left to the collector. It is a plain list rather than
// a sync.Pool: a reader that waited may resume on another P, where a
// sync.Pool would often not find the buffer it gave back.
type bufferList struct {
	size, keep int

	mu   sync.Mutex
	free []*[]byte
}

func (l *bufferList) get() *[]byte {
	l.mu.Lock()
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free = l.free[:n-1]
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	b := make([]byte, l.size)
	return &b
}

func (l *bufferList) put(b *[]byte) {
	l.mu.Lock()
	if len(l.free) < l.keep {
		l.free = append(l.free, b)
	}
	l.mu.Unlock()
}

// newSource reads in through a pooledSource when it has a descriptor
// (syscall.Conn: *os.File, net connections), else into a buffer of its own.
func newSource(in io.Reader, max int) Source {
	if sc, ok := in.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			return &pooledSource{rc: rc, max: max}
		}
	}
	return &plainSource{r: in, max: max}
}

// pooledSource reads a descriptor into a buffer from readBuffers, which it
// gives back before the runtime's poller waits for more input: while it
// waits, nothing is held. On a descriptor the poller cannot wait on (a
// regular file, a blocking one) the read blocks with the buffer, as a plain
// read would. Read deadlines (Reader.Close) apply as they do to Read.
type pooledSource struct {
	rc   syscall.RawConn
	max  int     // the largest read: the line limit plus one
	held *[]byte // the buffer of the last read, until the next wait
	big  int     // the size class of held (index into readBuffers)
	full bool    // the last read filled held
	// read is readFD, bound once: a closure made for each Read would be
	// an allocation per read. n and err are its results.
	read func(fd uintptr) bool
	n    int
	err  error
}

func (s *pooledSource) Read() ([]byte, error) {
	if s.held != nil && s.full && s.big == 0 {
		// The last read filled the small buffer: more is coming.
		readBuffers[0].put(s.held)
		s.held, s.big = nil, 1
	}
	if s.read == nil {
		s.read = s.readFD
	}
	s.n, s.err = 0, nil
	rerr := s.rc.Read(s.read)
	n, err := max(s.n, 0), s.err
	s.err = nil
	var buf []byte
	if s.held != nil {
		buf = (*s.held)[:n]
		s.full = n == min(len(*s.held), s.max)
	}
	switch {
	case rerr != nil:
		return buf, rerr
	case errors.Is(err, syscall.EIO):
		// A terminal whose other side is gone fails reads with EIO: that
		// is the end of its input (docs/transport.md §3.4, §12.1).
		return buf, io.EOF
	case err != nil:
		return buf, os.NewSyscallError("read", err)
	case n == 0:
		return nil, io.EOF
	}
	return buf, nil
}

// readFD is one read(2) of fd into held, for rc.Read: it reports false,
// giving the buffer back, when the poller must wait for input.
func (s *pooledSource) readFD(fd uintptr) bool {
	if s.held == nil {
		s.held = readBuffers[s.big].get()
	}
	for {
		s.n, s.err = syscall.Read(int(fd), (*s.held)[:min(len(*s.held), s.max)])
		if s.err != syscall.EINTR {
			break
		}
	}
	if s.err == syscall.EAGAIN {
		readBuffers[s.big].put(s.held)
		s.held, s.big = nil, 0
		return false // wait until the descriptor is readable
	}
	return true
}
