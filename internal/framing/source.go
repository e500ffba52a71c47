package framing

import "io"

// A connection whose input is a descriptor (syscall.Conn: a pipe, a socket
// or a terminal, as an *os.File or a net connection; see pooledSource)
// reads into buffers from a shared list, 4 KiB first and 32 KiB while reads
// keep filling them, and gives the buffer back before it waits in the
// runtime's poller: a connection waiting for input holds no read buffer,
// however busy it was before. (On a blocking descriptor the wait is in
// read(2), with the buffer.) Any other input is read into a buffer of its
// own, 512 bytes at first and 32 KiB once a read fills it. Lines longer
// than a read are joined in a separate buffer that never grows past the
// limit.
const (
	firstReadChunk = 512
	smallReadChunk = 4 << 10
	readChunk      = 32 << 10
)

// Source fills a Splitter's buffer.
type Source interface {
	// Read returns the next bytes, or an error (io.EOF at the end of
	// input) after the bytes read with it. The bytes returned before are
	// no longer used when Read is called.
	Read() ([]byte, error)
}

// NewSource reads in through a pooled buffer when it has a descriptor
// (syscall.Conn: *os.File, net connections), else into a buffer of its
// own; no read is larger than max (a line limit plus one).
func NewSource(in io.Reader, max int) Source { return newSource(in, max) }

// plainSource reads an io.Reader into a buffer of its own.
type plainSource struct {
	r      io.Reader
	max    int // the largest read: the line limit plus one
	buf    []byte
	filled bool // the last read filled buf
}

func (s *plainSource) Read() ([]byte, error) {
	switch {
	case s.buf == nil:
		s.buf = make([]byte, min(firstReadChunk, s.max))
	case s.filled && len(s.buf) < min(readChunk, s.max):
		s.buf = make([]byte, min(readChunk, s.max))
	}
	n, err := s.r.Read(s.buf)
	s.filled = n == len(s.buf)
	return s.buf[:n], err
}
