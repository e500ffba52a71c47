package stdio

import (
	"errors"
	"io"
)

// The client side of the framing: upstream/ reads a hosted server's stdout
// with the same bounded Reader, line by line, without a Transport.

// Errors of ReadLine.
var (
	// ErrLineTooLong stands for a line over the limit, which was dropped.
	ErrLineTooLong = errors.New("stdio: line exceeds the line limit")
	// ErrReaderClosed: Close was called.
	ErrReaderClosed = errors.New("stdio: reader closed")
	// ErrReaderPanicked: the reading goroutine panicked (and logged why).
	ErrReaderPanicked = errors.New("stdio: reader panicked")
)

// ReadLine returns the next line without its newline; the caller owns it.
// A line over the limit is not returned: ReadLine reports ErrLineTooLong for
// it once, as soon as the limit is passed, and the following call continues
// after that line. io.EOF (the end of input), a read error,
// ErrReaderPanicked and ErrReaderClosed are final: every later call returns
// one of them again.
//
// ReadLine is for one goroutine at a time, and never for a Reader that a
// Transport serves.
func (r *Reader) ReadLine() ([]byte, error) {
	for len(r.pending) == 0 {
		select {
		case r.pending = <-r.batches:
		case <-r.stop:
			return nil, ErrReaderClosed
		}
	}
	ev := r.pending[0]
	r.pending[0] = lineEvent{} // the batch may outlive the line
	r.pending = r.pending[1:]
	switch ev.kind {
	case lineData:
		return ev.data, nil
	case lineOversize, lineOverBudget:
		return nil, ErrLineTooLong
	case lineEOF:
		return nil, io.EOF
	case lineError:
		return nil, ev.err
	default:
		return nil, ErrReaderPanicked
	}
}
