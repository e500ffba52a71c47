package framing

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/snodod/snodod/limits"
)

// Errors of ReadLine.
var (
	// ErrLineTooLong stands for a line over the limit, which was dropped.
	ErrLineTooLong = errors.New("line exceeds the line limit")
	// ErrReaderPanicked: reading panicked (and logged why).
	ErrReaderPanicked = errors.New("line reader panicked")
)

// Scanner reads lines of at most its limit from an io.Reader on its
// caller's goroutine, with a Splitter's bounds (it holds at most the limit
// of an incomplete line, whatever the peer sends) but without a reader
// goroutine handing each read over: a client that reads a server's
// answers on one goroutine of its own (mcpclient) saves a goroutine hop
// per read. Reading stops when in's Read fails: to interrupt a blocked
// ReadLine, end in (close it, or give it a read deadline).
type Scanner struct {
	lr      *Splitter
	pending []Event
	count   atomic.Int64
	final   error // the error every later call returns
}

// NewScanner reads in; maxLineBytes of 0 or less means
// limits.DefaultMaxLineBytes.
func NewScanner(in io.Reader, maxLineBytes int) *Scanner {
	if maxLineBytes <= 0 {
		maxLineBytes = limits.DefaultMaxLineBytes
	}
	s := &Scanner{}
	s.lr = NewSplitter(NewSource(in, maxLineBytes+1), maxLineBytes, &s.count, nil)
	return s
}

// ReadLine returns the next line, its newline taken off; the caller owns it.
// A line over the limit is not returned: ReadLine reports ErrLineTooLong
// for it once, as soon as the limit is passed, and the following call
// continues after that line. io.EOF (the end of input), a read error (a
// read deadline's os.ErrDeadlineExceeded among them) and
// ErrReaderPanicked are final: every later call returns the same again.
// It is for one goroutine at a time.
func (s *Scanner) ReadLine() (line []byte, err error) {
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
	s.pending[0] = Event{} // the batch may outlive the line
	s.pending = s.pending[1:]
	switch ev.Kind {
	case KindLine:
		return ev.Data, nil
	case KindOversize, KindOverBudget:
		return nil, ErrLineTooLong
	case KindEOF:
		s.final = io.EOF
	case KindInterrupted: // a read deadline passed: the scanner stops
		s.final = os.ErrDeadlineExceeded
	default:
		s.final = ev.Err
	}
	return nil, s.final
}

// next reads the next batch, recovering a panic as a reader goroutine does.
func (s *Scanner) next() (evs []Event, err error) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("line scanner panicked", "panic", v)
			evs, err = nil, ErrReaderPanicked
		}
	}()
	return s.lr.Batch(), nil
}
