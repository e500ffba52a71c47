package stdio

import (
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/limits"
)

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
	batches chan []framing.Event
	// pending are the delivered lines the serving instance has not
	// handled yet. Only the serving instance uses it; instances serve one
	// after another.
	pending []framing.Event
	stop    chan struct{}
	done    sync.WaitGroup // the goroutine
	once    sync.Once      // Close or Detach
	budget  *Budget        // nil: the line limit alone bounds what is held
	// detaching is set by Detach: the unfinished line is carried, not
	// dropped from the budget, when the goroutine stops.
	detaching atomic.Bool

	// What the goroutine leaves when it stops, for Detach (carry.go): the
	// line splitter, the batch it could not deliver, and whether input had
	// ended. Read only after done.
	lr    *framing.Splitter
	held  []framing.Event
	ended bool

	bytesIn atomic.Int64
}

// NewReader starts reading in. maxLineBytes of 0 or less means
// limits.DefaultMaxLineBytes (Transport.Validate refuses a negative limit before
// this is reached). The caller must Close it.
func NewReader(in io.Reader, maxLineBytes int) *Reader {
	r := newReader(in, maxLineBytes)
	r.start(r.splitter())
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
		batches: make(chan []framing.Event),
		stop:    make(chan struct{}),
	}
}

// splitter is the reader's line splitter, drawing on its budget if it
// has one.
func (r *Reader) splitter() *framing.Splitter {
	var b *framing.Budget
	if r.budget != nil {
		b = r.budget.b
	}
	return framing.NewSplitter(framing.NewSource(r.in, r.limit+1), r.limit, &r.bytesIn, b)
}

func (r *Reader) start(lr *framing.Splitter) {
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

func (r *Reader) loop(lr *framing.Splitter) {
	defer r.done.Done()
	ended := r.read(lr)
	if !r.detaching.Load() {
		lr.Release() // an unfinished line stops counting with its reader
	}
	if ended {
		r.ended = true
		// The end of input stays on offer until Close, so an instance that
		// follows a failed one on the same Reader finds it too. Each offer
		// is a new batch: the one taken belongs to its taker.
		for r.deliver([]framing.Event{{Kind: framing.KindEOF}}) {
		}
	}
}

// read delivers lines until the end of input, which it reports, or until
// Close.
func (r *Reader) read(lr *framing.Splitter) (ended bool) {
	defer func() {
		if v := recover(); v != nil {
			slog.Error("stdio reader panicked", "panic", v)
			ended = r.deliver([]framing.Event{{Kind: framing.KindPanic}})
		}
	}()
	for {
		evs := lr.Batch()
		last := evs[len(evs)-1].Kind // evs belong to the coordinator once delivered
		if last == framing.KindInterrupted {
			select {
			case <-r.stop:
				return false
			default:
				// A deadline this Reader did not set is a read error,
				// as it always was.
				evs, last = []framing.Event{{Kind: framing.KindError, Err: os.ErrDeadlineExceeded}}, framing.KindError
			}
		}
		if !r.deliver(evs) {
			r.held = evs
			return false
		}
		if last == framing.KindEOF || last == framing.KindError {
			return true
		}
	}
}

// deliver hands evs to whichever transport instance is serving, or reports
// false once the Reader is closed.
func (r *Reader) deliver(evs []framing.Event) bool {
	select {
	case r.batches <- evs:
		return true
	case <-r.stop:
		return false
	}
}
