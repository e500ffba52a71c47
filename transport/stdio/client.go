package stdio

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/snodod/snodod/limits"
)

// The client side of the framing: upstream/ reads a hosted server's stdout
// with the same bounded line reader, on its own goroutine, without a
// Transport (LineScanner).

// Errors of ReadLine.
var (
	// ErrLineTooLong stands for a line over the limit, which was dropped.
	ErrLineTooLong = errors.New("stdio: line exceeds the line limit")
	// ErrReaderPanicked: reading panicked (and logged why).
	ErrReaderPanicked = errors.New("stdio: reader panicked")
)

// LineScanner reads lines of at most its limit from an io.Reader on its
// caller's goroutine, with the Reader's bounds (it holds at most the limit
// of an incomplete line, whatever the peer sends) but without the Reader's
// goroutine and its hand-over of each read: a client that reads a server's
// answers on one goroutine of its own saves a goroutine hop per read.
// Reading stops when in's Read fails: to interrupt a blocked ReadLine, end
// in (close it, or give it a read deadline).
type LineScanner struct {
	lr      *lineReader
	pending []lineEvent
	count   atomic.Int64
	final   error // the error every later call returns
}

// NewLineScanner reads in; maxLineBytes of 0 or less means
// limits.DefaultMaxLineBytes.
func NewLineScanner(in io.Reader, maxLineBytes int) *LineScanner {
	if maxLineBytes <= 0 {
		maxLineBytes = limits.DefaultMaxLineBytes
	}
	s := &LineScanner{}
	s.lr = newLineReader(newSource(in, maxLineBytes+1), maxLineBytes, &s.count)
	return s
}

// ReadLine returns the next line, its newline taken off; the caller owns it.
// A line over the limit is not returned: ReadLine reports ErrLineTooLong
// for it once, as soon as the limit is passed, and the following call
// continues after that line. io.EOF (the end of input), a read error (a
// read deadline's os.ErrDeadlineExceeded among them) and
// ErrReaderPanicked are final: every later call returns the same again.
// It is for one goroutine at a time.
func (s *LineScanner) ReadLine() (line []byte, err error) {
	if s.final != nil {
		return nil, s.final
	}
	if len(s.pending) == 0 {
		if s.pending, err = s.next(); err != nil {
			s.final = err
			return nil, err
		}
	}
	ev := s.pending[0]
	s.pending[0] = lineEvent{} // the batch may outlive the line
	s.pending = s.pending[1:]
	switch ev.kind {
	case lineData:
		return ev.data, nil
	case lineOversize, lineOverBudget:
		return nil, ErrLineTooLong
	case lineEOF:
		s.final = io.EOF
	case lineInterrupted: // a read deadline passed: the scanner stops
		s.final = os.ErrDeadlineExceeded
	default:
		s.final = ev.err
	}
	return nil, s.final
}

// next reads the next batch, recovering a panic as the Reader does.
func (s *LineScanner) next() (evs []lineEvent, err error) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("stdio line scanner panicked", "panic", v)
			evs, err = nil, ErrReaderPanicked
		}
	}()
	return s.lr.batch(), nil
}
