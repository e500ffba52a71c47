package stdio

import (
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/snodod/snodod/internal/framing"
)

// A Reader's input can continue in another process (docs/transport.md §12.4:
// a daemon upgrade hands its sessions over). Detach stops the Reader without
// losing a byte and returns what it read and the coordinator has not
// handled, as a Carry; NewReaderFrom continues from it on the same device,
// so that the next line the new process handles is the one the old would
// have.

// Carry is the input a Reader read and nobody handled yet, as plain data
// (it crosses a process boundary in JSON). In input order: Lines, then
// Partial, then Rest.
type Carry struct {
	// Lines are whole lines, without their newlines, not yet handled; an
	// Oversize entry stands for a line that passed the limit (its bytes
	// are gone; it is still to be refused).
	Lines []CarriedLine `json:"lines,omitempty"`
	// Partial is the start of a line whose newline has not been read;
	// Discarding says the rest of a refused line is still being skipped
	// (Partial is then empty).
	Partial    []byte `json:"partial,omitempty"`
	Discarding bool   `json:"discarding,omitempty"`
	// Rest are bytes read and not yet split into lines.
	Rest []byte `json:"rest,omitempty"`
	// EOF says input had ended after these bytes (or failed: a read error
	// is carried as an end, which is how the coordinator treats it).
	EOF bool `json:"eof,omitempty"`
	// BytesIn is what the Reader had read from the device, its counter.
	BytesIn int64 `json:"bytesIn,omitempty"`
}

// CarriedLine is one line of a Carry.
type CarriedLine struct {
	Data     []byte `json:"d,omitempty"`
	Oversize bool   `json:"o,omitempty"`
}

// ErrDetach is Detach's error when the Reader cannot be stopped without
// losing bytes (its input has no read deadline) or has been stopped.
var ErrDetach = errors.New("stdio: the reader cannot be detached")

// Detach stops the Reader without losing a byte and returns everything it
// read that no transport instance handled: the lines delivered and not
// taken, the batch it was delivering, the start of a line and the bytes
// not yet split. Call it once no transport instance serves the Reader
// (Serve has returned). The device is left as it was, with no read
// deadline; the Reader is finished (Close does nothing more). It needs an
// input with SetReadDeadline (an *os.File on a pipe, a socket or a
// terminal): a blocked read is interrupted, never abandoned.
func (r *Reader) Detach() (Carry, error) {
	d, ok := r.in.(readDeadliner)
	if !ok {
		return Carry{}, ErrDetach
	}
	detached := false
	var err error
	r.once.Do(func() {
		detached = true
		r.detaching.Store(true)
		close(r.stop)
		if err = d.SetReadDeadline(time.Now()); err != nil {
			return
		}
		r.done.Wait()
		err = d.SetReadDeadline(time.Time{})
	})
	switch {
	case !detached:
		return Carry{}, ErrDetach
	case err != nil:
		// The goroutine may still be in a read that cannot be stopped:
		// what it reads is lost, so nothing may continue from here.
		return Carry{}, errors.Join(ErrDetach, err)
	}
	c := Carry{BytesIn: r.bytesIn.Load()}
	for _, evs := range [][]framing.Event{r.pending, r.held} {
		for _, ev := range evs {
			switch ev.Kind {
			case framing.KindLine:
				c.Lines = append(c.Lines, CarriedLine{Data: ev.Data})
			case framing.KindOversize, framing.KindOverBudget:
				// A line taken by the budget is refused over there as
				// one over the limit: Carry has no kind of its own for it.
				c.Lines = append(c.Lines, CarriedLine{Oversize: true})
			case framing.KindEOF, framing.KindError, framing.KindPanic:
				c.EOF = true
			}
		}
	}
	r.pending, r.held = nil, nil
	lr := r.lr
	if !c.EOF {
		partial, discarding, taken, rest, ended := lr.Unfinished()
		c.Partial, c.Discarding, c.Rest = partial, discarding, rest
		if taken {
			c.Lines = append(c.Lines, CarriedLine{Oversize: true})
			c.Discarding = true
		}
		c.EOF = r.ended || ended
	}
	lr.Release() // the line goes on in the carry, and out of this budget
	return c, nil
}

// NewReaderFrom is NewReader continuing from c on the device it was
// detached from: the carried lines come first (undelivered, as if just
// read), then the lines the carried bytes and the device complete. With
// c.EOF the device is not read again. maxLineBytes is as for NewReader; a
// carried line is not measured against it again.
func NewReaderFrom(in io.Reader, maxLineBytes int, c Carry) *Reader {
	return newReaderFrom(in, maxLineBytes, c, nil)
}

// newReaderFrom is NewReaderFrom drawing on budget (nil: none).
func newReaderFrom(in io.Reader, maxLineBytes int, c Carry, budget *Budget) *Reader {
	r := newReader(in, maxLineBytes)
	r.budget = budget
	r.bytesIn.Store(c.BytesIn)
	for _, l := range c.Lines {
		if l.Oversize {
			r.pending = append(r.pending, framing.Event{Kind: framing.KindOversize})
		} else {
			r.pending = append(r.pending, framing.Event{Kind: framing.KindLine, Data: bytes.Clone(l.Data)})
		}
	}
	lr := r.splitter()
	if refused, ok := lr.Resume(c.Partial, c.Discarding, c.Rest, c.EOF); ok {
		// Under a smaller limit than the one it was read with, or over
		// the budget: refused now, the rest skipped.
		r.pending = append(r.pending, refused)
	}
	r.start(lr)
	return r
}
