package stdio

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/limits"
)

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

// source fills the lineReader's buffer.
type source interface {
	// read returns the next bytes, or an error (io.EOF at the end of
	// input) after the bytes read with it. The bytes returned before are
	// no longer used when read is called.
	read() ([]byte, error)
}

// plainSource reads an io.Reader into a buffer of its own.
type plainSource struct {
	r      io.Reader
	max    int // the largest read: the line limit plus one
	buf    []byte
	filled bool // the last read filled buf
}

func (s *plainSource) read() ([]byte, error) {
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

// lineKind says what the reader delivers to the coordinator.
type lineKind uint8

const (
	lineData       lineKind = iota // a line within the limit
	lineOversize                   // a line passed the limit (refused at once)
	lineOverBudget                 // a line was taken to keep within the LineBudget
	lineEOF                        // end of input
	lineError                      // a read error other than EOF
	linePanic                      // the reader panicked
	// lineInterrupted: a read deadline passed (Close or Detach stops a
	// read so); never delivered, and the reader's state is intact.
	lineInterrupted
)

type lineEvent struct {
	kind lineKind
	// data is the line without its newline; the receiver owns it.
	data []byte
	err  error
}

// lineReader splits a byte stream into lines of at most limit bytes,
// newline included (docs/transport.md §3). It holds at most limit bytes of an
// incomplete line, whatever the peer sends. It is used by one goroutine.
type lineReader struct {
	src   source
	limit int
	count *atomic.Int64 // bytes read

	buf        []byte // the last read; buf[start:end] is not yet consumed
	start, end int
	line       []byte // the incomplete line so far, len(line) <= limit
	discarding bool   // skipping the rest of a refused line
	err        error  // the read error to report once buffered bytes are used
	// interrupted: the last read ended at a read deadline; reported once
	// (lineInterrupted) after the bytes read with it.
	interrupted bool

	// share, with a LineBudget, holds the incomplete line instead of line
	// (budget.go); shared is its length as this reader left it.
	share  *budgetShare
	shared int
}

func newLineReader(src source, limit int, count *atomic.Int64) *lineReader {
	return &lineReader{src: src, limit: limit, count: count}
}

// The incomplete line, kept in line or, with a budget, in share.

func (lr *lineReader) held() int {
	if lr.share != nil {
		return lr.shared
	}
	return len(lr.line)
}

// dropLine forgets the incomplete line.
func (lr *lineReader) dropLine() {
	if lr.share != nil {
		lr.share.drop()
		lr.shared = 0
		return
	}
	lr.line = lr.line[:0]
}

// takeLine returns the incomplete line with tail appended, and forgets
// it; ok is false when the budget took it away meanwhile.
func (lr *lineReader) takeLine(tail []byte) (data []byte, ok bool) {
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
func (lr *lineReader) partialCopy() (line []byte, taken bool) {
	if lr.share == nil {
		return bytes.Clone(lr.line), false
	}
	return lr.share.snapshot()
}

// appendLine adds chunk to the incomplete line; false means the budget
// refused it (the line is dropped).
func (lr *lineReader) appendLine(chunk []byte) bool {
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

// maxBatchLines bounds the events of one batch, so that a read of blank
// lines cannot make a batch many times the size of the read.
const maxBatchLines = 256

// batch returns the next events: the lines the last read completed (at
// most maxBatchLines), or one event at the end of input. After a batch
// ending in lineEOF or lineError it must not be called again.
func (lr *lineReader) batch() []lineEvent {
	var evs []lineEvent
	for {
		if lr.start < lr.end && len(evs) < maxBatchLines {
			if ev, ok := lr.scan(); ok {
				if evs == nil {
					n := 1 + bytes.Count(lr.buf[lr.start:lr.end], []byte{'\n'})
					evs = make([]lineEvent, 0, min(n, maxBatchLines))
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
			return []lineEvent{{kind: lineInterrupted}}
		}
		if lr.err != nil {
			return []lineEvent{lr.finish()}
		}
		buf, err := lr.src.read()
		lr.count.Add(int64(len(buf)))
		lr.buf, lr.start, lr.end = buf, 0, len(buf)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			lr.interrupted = true // not the end: see carry.go
		case err != nil:
			lr.err = err
		}
	}
}

// scan consumes buffered bytes and reports an event when one is complete.
func (lr *lineReader) scan() (lineEvent, bool) {
	if lr.share != nil && !lr.discarding && lr.share.taken.Load() {
		// Another connection's reader took this line to keep within the
		// budget: it is refused now, and its rest dropped.
		lr.dropLine()
		lr.discarding = true
		return lineEvent{kind: lineOverBudget}, true
	}
	chunk := lr.buf[lr.start:lr.end]
	i := bytes.IndexByte(chunk, '\n')
	if lr.discarding {
		if i < 0 {
			lr.start = lr.end
			return lineEvent{}, false
		}
		lr.start += i + 1
		lr.discarding = false
		return lineEvent{}, false
	}
	held := lr.held()
	if i >= 0 {
		lr.start += i + 1
		if held+i+1 > lr.limit {
			lr.dropLine()
			return lineEvent{kind: lineOversize}, true
		}
		if held == 0 {
			return lineEvent{kind: lineData, data: bytes.Clone(chunk[:i])}, true
		}
		data, ok := lr.takeLine(chunk[:i])
		if !ok { // taken since the check above; its end is this LF
			lr.dropLine()
			return lineEvent{kind: lineOverBudget}, true
		}
		return lineEvent{kind: lineData, data: data}, true
	}
	// No newline yet: the line may still fit while it holds at most limit
	// bytes (a newline or EOF decides). Byte limit+1 refuses it.
	lr.start = lr.end
	if held+len(chunk) > lr.limit {
		lr.dropLine()
		lr.discarding = true
		return lineEvent{kind: lineOversize}, true
	}
	if !lr.appendLine(chunk) {
		lr.discarding = true
		return lineEvent{kind: lineOverBudget}, true
	}
	return lineEvent{}, false
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
func (lr *lineReader) finish() lineEvent {
	if lr.share != nil && !lr.discarding && lr.share.taken.Load() {
		lr.dropLine()
		lr.discarding = true
		return lineEvent{kind: lineOverBudget}
	}
	if lr.held() > 0 && !lr.discarding && errors.Is(lr.err, io.EOF) {
		if data, ok := lr.takeLine(nil); ok {
			return lineEvent{kind: lineData, data: data}
		}
		lr.discarding = true
		return lineEvent{kind: lineOverBudget}
	}
	lr.dropLine()
	lr.line = nil
	if errors.Is(lr.err, io.EOF) {
		return lineEvent{kind: lineEOF}
	}
	return lineEvent{kind: lineError, err: lr.err}
}

// Reader is the input side of a device: it reads lines of at most its
// limit in its own goroutine and hands them over a read at a time: the
// lines one read completed (or one long line) go to the coordinator in one
// batch, and the Reader holds at most one undelivered batch (see
// docs/transport.md §11.2, which says one line). It outlives a Transport: a
// session restarted on the same device continues with the bytes already
// read, the lines delivered but not yet handled included, and finds the
// end of input if an earlier instance took it. Its goroutine ends with
// Close. It never closes the device.
type Reader struct {
	in      io.Reader
	limit   int
	batches chan []lineEvent
	// pending are the delivered lines the serving instance has not
	// handled yet. Only the serving instance uses it; instances serve one
	// after another.
	pending []lineEvent
	stop    chan struct{}
	done    sync.WaitGroup // the goroutine
	once    sync.Once      // Close or Detach
	budget  *LineBudget    // nil: the line limit alone bounds what is held
	// detaching is set by Detach: the unfinished line is carried, not
	// dropped from the budget, when the goroutine stops.
	detaching atomic.Bool

	// What the goroutine leaves when it stops, for Detach (carry.go): the
	// line reader, the batch it could not deliver, and whether input had
	// ended. Read only after done.
	lr    *lineReader
	held  []lineEvent
	ended bool

	bytesIn atomic.Int64
}

// NewReader starts reading in. maxLineBytes of 0 or less means
// limits.DefaultMaxLineBytes (Transport.Validate refuses a negative limit before
// this is reached). The caller must Close it.
func NewReader(in io.Reader, maxLineBytes int) *Reader {
	r := newReader(in, maxLineBytes)
	r.start(r.lineReader())
	return r
}

// newReader is a Reader of in that has not started reading.
func newReader(in io.Reader, maxLineBytes int) *Reader {
	if maxLineBytes <= 0 {
		maxLineBytes = limits.DefaultMaxLineBytes
	}
	return &Reader{
		in:      in,
		limit:   maxLineBytes,
		batches: make(chan []lineEvent),
		stop:    make(chan struct{}),
	}
}

// lineReader is the reader's line splitter, drawing on its budget if it
// has one.
func (r *Reader) lineReader() *lineReader {
	lr := newLineReader(newSource(r.in, r.limit+1), r.limit, &r.bytesIn)
	if r.budget != nil {
		lr.share = &budgetShare{b: r.budget}
	}
	return lr
}

func (r *Reader) start(lr *lineReader) {
	r.lr = lr
	r.done.Add(1)
	go r.loop(lr)
}

// BytesIn is the number of bytes read from the device so far. It may be
// called from any goroutine.
func (r *Reader) BytesIn() int64 { return r.bytesIn.Load() }

type readDeadliner interface{ SetReadDeadline(time.Time) error }

// Close stops reading. A device with read deadlines is interrupted and left
// with no deadline; otherwise the goroutine exits when its blocked Read
// returns, dropping what it read. Close is idempotent.
func (r *Reader) Close() {
	r.once.Do(func() {
		close(r.stop)
		d, ok := r.in.(readDeadliner)
		if !ok || d.SetReadDeadline(time.Now()) != nil {
			return
		}
		r.done.Wait()
		_ = d.SetReadDeadline(time.Time{})
	})
}

func (r *Reader) loop(lr *lineReader) {
	defer r.done.Done()
	ended := r.read(lr)
	if lr.share != nil && !r.detaching.Load() {
		lr.share.drop() // an unfinished line stops counting with its reader
	}
	if ended {
		r.ended = true
		// The end of input stays on offer until Close, so an instance that
		// follows a failed one on the same Reader finds it too. Each offer
		// is a new batch: the one taken belongs to its taker.
		for r.deliver([]lineEvent{{kind: lineEOF}}) {
		}
	}
}

// read delivers lines until the end of input, which it reports, or until
// Close.
func (r *Reader) read(lr *lineReader) (ended bool) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("stdio reader panicked", "panic", v)
			ended = r.deliver([]lineEvent{{kind: linePanic}})
		}
	}()
	for {
		evs := lr.batch()
		last := evs[len(evs)-1].kind // evs belong to the coordinator once delivered
		if last == lineInterrupted {
			select {
			case <-r.stop:
				return false
			default:
				// A deadline this Reader did not set is a read error,
				// as it always was.
				evs, last = []lineEvent{{kind: lineError, err: os.ErrDeadlineExceeded}}, lineError
			}
		}
		if !r.deliver(evs) {
			r.held = evs
			return false
		}
		if last == lineEOF || last == lineError {
			return true
		}
	}
}

// deliver hands evs to whichever transport instance is serving, or reports
// false once the Reader is closed.
func (r *Reader) deliver(evs []lineEvent) bool {
	select {
	case r.batches <- evs:
		return true
	case <-r.stop:
		return false
	}
}
