package stdio

import (
	"fmt"
	"io"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/protocol"
)

// LineBudget bounds the bytes of unfinished lines that the Readers sharing
// it hold together (daemon.max_buffered_bytes). Each Reader is bounded by
// its own line limit, but a thousand connections, each holding most of a
// line and then waiting, would hold a thousand limits; with a budget, a
// Reader that must grow its unfinished line past the total first takes
// the largest unfinished line there is (its own, if it holds the largest)
// away from its connection, freeing that memory at once. The connection
// whose line was taken is answered -32600 (BudgetError) when it next
// sends, or ends, its input; the rest of that line is dropped unread and
// the line after it is served (docs/transport.md §3.2, as for a line over the
// limit).
//
// Only unfinished lines count: a line that ends within one read never
// touches the budget, and read buffers (at most 32 KiB per connection
// reading) are not part of it. What is accounted is the lines' length; the
// memory behind them may be up to twice that while they grow.
//
// Its methods may be called from any goroutine; every Reader made with it
// (NewReader) draws on it until it is closed.
type LineBudget struct{ b *framing.Budget }

// NewLineBudget returns a budget of max bytes; 0 or less means
// limits.DefaultMaxBufferedBytes.
func NewLineBudget(max int) *LineBudget { return &LineBudget{framing.NewBudget(max)} }

// SetMax changes the budget (a reload); 0 or less means the default. Lines
// already held over a smaller budget are not taken until a Reader grows.
func (b *LineBudget) SetMax(max int) { b.b.SetMax(max) }

// Max is the budget in bytes.
func (b *LineBudget) Max() int { return b.b.Max() }

// Used is how many bytes of unfinished lines are held now.
func (b *LineBudget) Used() int64 { return b.b.Used() }

// NewReader is stdio.NewReader whose unfinished lines draw on b; on a nil
// budget it is stdio.NewReader.
func (b *LineBudget) NewReader(in io.Reader, maxLineBytes int) *Reader {
	if b == nil {
		return NewReader(in, maxLineBytes)
	}
	r := newReader(in, maxLineBytes)
	r.budget = b
	r.start(r.splitter())
	return r
}

// NewReaderFrom is stdio.NewReaderFrom whose unfinished lines draw on b
// (the carried one first); on a nil budget it is stdio.NewReaderFrom.
func (b *LineBudget) NewReaderFrom(in io.Reader, maxLineBytes int, c Carry) *Reader {
	return newReaderFrom(in, maxLineBytes, c, b)
}

// BudgetError is the line a connection gets when its unfinished line was
// taken to keep within a budget of max bytes.
func BudgetError(max int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: fmt.Sprintf(
		"Message refused: the unfinished lines of all connections passed daemon.max_buffered_bytes (%d bytes) and this one was the longest; send it again", max)}
}
