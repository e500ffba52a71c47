package framing

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync/atomic"
)

// Kind says what a Splitter's event is.
type Kind uint8

// The kinds of Event.
const (
	KindLine       Kind = iota // a line within the limit
	KindOversize               // a line passed the limit (refused at once)
	KindOverBudget             // a line was taken to keep within the Budget
	KindEOF                    // end of input
	KindError                  // a read error other than EOF
	KindPanic                  // the reader panicked (set by its caller: a Splitter never makes it)
	// KindInterrupted: a read deadline passed (a reader's Close or Detach
	// stops a read so); the Splitter's state is intact and reading may go
	// on.
	KindInterrupted
)

// Event is one thing a Splitter found in its input.
type Event struct {
	Kind Kind
	// Data is the line without its newline (KindLine); the receiver owns
	// it.
	Data []byte
	// Err is the read error (KindError).
	Err error
}

// Splitter splits a byte stream into lines of at most limit bytes,
// newline included (docs/transport.md §3). It holds at most limit bytes of
// an incomplete line, whatever the peer sends. It is used by one goroutine
// at a time.
type Splitter struct {
	src   Source
	limit int
	count *atomic.Int64 // bytes read

	buf        []byte // the last read; buf[start:end] is not yet consumed
	start, end int
	line       []byte // the incomplete line so far, len(line) <= limit
	discarding bool   // skipping the rest of a refused line
	err        error  // the read error to report once buffered bytes are used
	// interrupted: the last read ended at a read deadline; reported once
	// (KindInterrupted) after the bytes read with it.
	interrupted bool

	// share, with a Budget, holds the incomplete line instead of line
	// (budget.go); shared is its length as this Splitter left it.
	share  *budgetShare
	shared int
}

// NewSplitter reads src in lines of at most limit bytes, adding what it
// reads to count. With a non-nil budget its unfinished line draws on it.
func NewSplitter(src Source, limit int, count *atomic.Int64, budget *Budget) *Splitter {
	s := &Splitter{src: src, limit: limit, count: count}
	if budget != nil {
		s.share = &budgetShare{b: budget}
	}
	return s
}

// The incomplete line, kept in line or, with a budget, in share.

func (lr *Splitter) held() int {
	if lr.share != nil {
		return lr.shared
	}
	return len(lr.line)
}

// dropLine forgets the incomplete line.
func (lr *Splitter) dropLine() {
	if lr.share != nil {
		lr.share.drop()
		lr.shared = 0
		return
	}
	lr.line = lr.line[:0]
}

// takeLine returns the incomplete line with tail appended, and forgets
// it; ok is false when the budget took it away meanwhile.
func (lr *Splitter) takeLine(tail []byte) (data []byte, ok bool) {
	if lr.share != nil {
		data, ok = lr.share.take(tail)
		lr.shared = 0
		return data, ok
	}
	data = append(lr.line, tail...)
	lr.line = nil // handed over with the line
	return data, true
}

// partialCopy returns a copy of the incomplete line, and whether the
// budget took it away (then there is none).
func (lr *Splitter) partialCopy() (line []byte, taken bool) {
	if lr.share == nil {
		return bytes.Clone(lr.line), false
	}
	return lr.share.snapshot()
}

// appendLine adds chunk to the incomplete line; false means the budget
// refused it (the line is dropped).
func (lr *Splitter) appendLine(chunk []byte) bool {
	if lr.share != nil {
		if !lr.share.grow(chunk, lr.limit) {
			lr.dropLine()
			return false
		}
		lr.shared += len(chunk)
		return true
	}
	lr.line = growLine(lr.line, len(chunk), lr.limit)
	lr.line = append(lr.line, chunk...)
	return true
}

// MaxBatchLines bounds the events of one batch, so that a read of blank
// lines cannot make a batch many times the size of the read.
const MaxBatchLines = 256

// Batch returns the next events: the lines the last read completed (at
// most MaxBatchLines), or one event at the end of input or at an
// interrupted read. After a batch ending in KindEOF or KindError it must
// not be called again.
func (lr *Splitter) Batch() []Event {
	var evs []Event
	for {
		if lr.start < lr.end && len(evs) < MaxBatchLines {
			if ev, ok := lr.scan(); ok {
				if evs == nil {
					n := 1 + bytes.Count(lr.buf[lr.start:lr.end], []byte{'\n'})
					evs = make([]Event, 0, min(n, MaxBatchLines))
				}
				evs = append(evs, ev)
			}
			continue
		}
		if len(evs) > 0 {
			return evs
		}
		if lr.interrupted {
			lr.interrupted = false
			return []Event{{Kind: KindInterrupted}}
		}
		if lr.err != nil {
			return []Event{lr.finish()}
		}
		buf, err := lr.src.Read()
		lr.count.Add(int64(len(buf)))
		lr.buf, lr.start, lr.end = buf, 0, len(buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			lr.interrupted = true // not the end: a reader stopped for a hand-over
		case err != nil:
			lr.err = err
		}
	}
}

// scan consumes buffered bytes and reports an event when one is complete.
func (lr *Splitter) scan() (Event, bool) {
	if lr.share != nil && !lr.discarding && lr.share.taken.Load() {
		// Another connection's Splitter took this line to keep within the
		// budget: it is refused now, and its rest dropped.
		lr.dropLine()
		lr.discarding = true
		return Event{Kind: KindOverBudget}, true
	}
	chunk := lr.buf[lr.start:lr.end]
	i := bytes.IndexByte(chunk, '\n')
	if lr.discarding {
		if i < 0 {
			lr.start = lr.end
			return Event{}, false
		}
		lr.start += i + 1
		lr.discarding = false
		return Event{}, false
	}
	held := lr.held()
	if i >= 0 {
		lr.start += i + 1
		if held+i+1 > lr.limit {
			lr.dropLine()
			return Event{Kind: KindOversize}, true
		}
		if held == 0 {
			return Event{Kind: KindLine, Data: bytes.Clone(chunk[:i])}, true
		}
		data, ok := lr.takeLine(chunk[:i])
		if !ok { // taken since the check above; its end is this LF
			lr.dropLine()
			return Event{Kind: KindOverBudget}, true
		}
		return Event{Kind: KindLine, Data: data}, true
	}
	// No newline yet: the line may still fit while it holds at most limit
	// bytes (a newline or EOF decides). Byte limit+1 refuses it.
	lr.start = lr.end
	if held+len(chunk) > lr.limit {
		lr.dropLine()
		lr.discarding = true
		return Event{Kind: KindOversize}, true
	}
	if !lr.appendLine(chunk) {
		lr.discarding = true
		return Event{Kind: KindOverBudget}, true
	}
	return Event{}, false
}

// growLine makes room in b for n more bytes without ever exceeding limit
// in capacity, so a peer cannot make the reader hold more than the limit.
func growLine(b []byte, n, limit int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	c := max(2*cap(b), need, 4096)
	c = min(c, limit)
	nb := make([]byte, len(b), c)
	copy(nb, b)
	return nb
}

// finish reports the end of input once buffered bytes are consumed: a final
// unterminated line first (it is within the limit, or it was refused).
func (lr *Splitter) finish() Event {
	if lr.share != nil && !lr.discarding && lr.share.taken.Load() {
		lr.dropLine()
		lr.discarding = true
		return Event{Kind: KindOverBudget}
	}
	if lr.held() > 0 && !lr.discarding && errors.Is(lr.err, io.EOF) {
		if data, ok := lr.takeLine(nil); ok {
			return Event{Kind: KindLine, Data: data}
		}
		lr.discarding = true
		return Event{Kind: KindOverBudget}
	}
	lr.dropLine()
	lr.line = nil
	if errors.Is(lr.err, io.EOF) {
		return Event{Kind: KindEOF}
	}
	return Event{Kind: KindError, Err: lr.err}
}

// Unfinished is what the Splitter holds that is not a line yet, for a
// reader handing its input over to another process (stdio's Carry):
// partial is a copy of the start of a line whose newline has not been
// read, discarding says the rest of a refused line is being skipped, taken
// that the budget took the unfinished line away (it is to be refused),
// rest the bytes read and not yet split, and ended that input had ended
// or failed after them.
func (lr *Splitter) Unfinished() (partial []byte, discarding, taken bool, rest []byte, ended bool) {
	partial, taken = lr.partialCopy()
	if lr.start < lr.end {
		rest = bytes.Clone(lr.buf[lr.start:lr.end])
	}
	return partial, lr.discarding, taken, rest, lr.err != nil
}

// Resume makes a new Splitter continue from what another one left
// (Unfinished): partial is the start of a line, discarding the skipping
// of a refused line's rest, rest the bytes not yet split, eof the end of
// input after them. A partial over this Splitter's limit, or one its
// budget cannot hold, is refused: refused is then the event to deliver
// before the Splitter's own (ok is true), and the rest of that line is
// skipped.
func (lr *Splitter) Resume(partial []byte, discarding bool, rest []byte, eof bool) (refused Event, ok bool) {
	lr.discarding = discarding && len(partial) == 0
	switch {
	case len(partial) > lr.limit:
		refused, ok = Event{Kind: KindOversize}, true
		lr.discarding = true
	case len(partial) > 0 && !lr.appendLine(partial):
		refused, ok = Event{Kind: KindOverBudget}, true
		lr.discarding = true
	}
	lr.buf, lr.start, lr.end = bytes.Clone(rest), 0, len(rest)
	if eof {
		lr.err = io.EOF
	}
	return refused, ok
}

// Release gives the unfinished line's bytes back to the budget, if the
// Splitter has one: the Splitter stops (its reader closes, or its line
// goes on in another process).
func (lr *Splitter) Release() {
	if lr.share != nil {
		lr.share.drop()
	}
}
