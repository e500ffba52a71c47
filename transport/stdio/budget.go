package stdio

import (
	"context"
	"fmt"
	"io"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/protocol"
)

// Budget bounds the bytes that the connections sharing it hold together
// (daemon.max_buffered_bytes): the unfinished lines of the Readers made
// with it (NewReader, NewReaderFrom) and the output that the Transports
// serving those Readers have committed and not yet written
// (docs/transport.md §3.5, §11.5). Each connection is bounded by its own
// line limit and output limit, but a thousand connections, each holding
// most of a line or a few large answers for a client that does not read,
// would hold a thousand limits.
//
// When the total would pass the budget, unfinished lines give way first:
// the largest is taken from its connection, freeing that memory at once,
// until the total fits (a Reader growing the largest line loses its own).
// The connection whose line was taken is answered -32600 (BudgetError)
// when it next sends, or ends, its input; the rest of that line is dropped
// unread and the line after it is served (docs/transport.md §3.2, as for a
// line over the limit). Output is never taken: a worker whose answer does
// not fit waits, first come first served, until output is written (or a
// connection that does not read ends at its write timeout); an answer
// larger than the whole budget is written once no other output is held.
//
// Only unfinished lines count: a line that ends within one read never
// touches the budget, and read buffers (at most 32 KiB per connection
// reading) are not part of it. Likewise the first 64 KiB of a connection's
// pending output (one write batch) are its own, so that a connection whose
// client reads never touches the budget. What is accounted is the lines'
// and frames' length; the memory behind a growing line may be up to twice
// that.
//
// Its methods may be called from any goroutine; every Reader made with it
// draws on it until it is closed, and so does the output of a Transport
// serving such a Reader. The accounting is framing.Budget's.
type Budget struct{ b *framing.Budget }

// NewBudget returns a budget of max bytes; 0 or less means
// limits.DefaultMaxBufferedBytes.
func NewBudget(max int) *Budget { return &Budget{framing.NewBudget(max)} }

// SetMax changes the budget (a reload); 0 or less means the default. What
// is held over a smaller budget is not taken until a Reader grows or more
// output is committed; output waiting for a larger one is let through.
func (b *Budget) SetMax(max int) { b.b.SetMax(max) }

// Max is the budget in bytes.
func (b *Budget) Max() int { return b.b.Max() }

// Used is how many bytes are held now: unfinished lines and pending
// output together.
func (b *Budget) Used() int64 { return b.b.Used() }

// Output is how many of Used's bytes are pending output.
func (b *Budget) Output() int64 { return b.b.Output() }

// NewReader is stdio.NewReader whose unfinished lines draw on b; on a nil
// budget it is stdio.NewReader.
func (b *Budget) NewReader(in io.Reader, maxLineBytes int) *Reader {
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
func (b *Budget) NewReaderFrom(in io.Reader, maxLineBytes int, c Carry) *Reader {
	return newReaderFrom(in, maxLineBytes, c, b)
}

// BudgetError is the line a connection gets when its unfinished line was
// taken to keep within a budget of max bytes.
func BudgetError(max int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: fmt.Sprintf(
		"Message refused: the unfinished lines and pending output of all connections passed daemon.max_buffered_bytes (%d bytes) and this line was the longest unfinished one; send it again", max)}
}

// The output's side (output.go): a connection's pending output past its
// allowance is charged here.

// tryOutput charges n bytes of output when nobody waits before it and
// they fit, taking the longest unfinished lines first.
func (b *Budget) tryOutput(n int64) bool { return b.b.TryOutput(n) }

// forceOutput charges n bytes of output that cannot wait: the
// coordinator's own frames and the executor's errors, each small or
// bounded by the connection's limit (output.go).
func (b *Budget) forceOutput(n int64) { b.b.ForceOutput(n) }

// awaitOutput waits its turn until n bytes of output fit and charges them
// (true), or until ctx ends (false, nothing charged).
func (b *Budget) awaitOutput(ctx context.Context, n int64) bool { return b.b.AwaitOutput(ctx, n) }

// releaseOutput gives back n bytes of output: written, or dropped with a
// connection that failed. Output back at zero after a large peak asks the
// runtime to return the memory (scavenge.go).
func (b *Budget) releaseOutput(n int64) {
	if b.b.ReleaseOutput(n) >= scavengeAfter {
		requestScavenge()
	}
}
