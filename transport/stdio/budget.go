package stdio

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/limits"
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
type LineBudget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	holders map[*budgetShare]struct{} // the shares holding bytes
}

// NewLineBudget returns a budget of max bytes; 0 or less means
// limits.DefaultMaxBufferedBytes.
func NewLineBudget(max int) *LineBudget {
	b := &LineBudget{holders: map[*budgetShare]struct{}{}}
	b.SetMax(max)
	return b
}

// SetMax changes the budget (a reload); 0 or less means the default. Lines
// already held over a smaller budget are not taken until a Reader grows.
func (b *LineBudget) SetMax(max int) {
	if max <= 0 {
		max = limits.DefaultMaxBufferedBytes
	}
	b.mu.Lock()
	b.max = int64(max)
	b.mu.Unlock()
}

// Max is the budget in bytes.
func (b *LineBudget) Max() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.max)
}

// Used is how many bytes of unfinished lines are held now.
func (b *LineBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// NewReader is stdio.NewReader whose unfinished lines draw on b; on a nil
// budget it is stdio.NewReader.
func (b *LineBudget) NewReader(in io.Reader, maxLineBytes int) *Reader {
	if b == nil {
		return NewReader(in, maxLineBytes)
	}
	r := newReader(in, maxLineBytes)
	r.budget = b
	r.start(r.lineReader())
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

// budgetShare is one Reader's unfinished line while it draws on a budget.
// line is guarded by the budget's mutex: another Reader may take it away.
type budgetShare struct {
	b    *LineBudget
	line []byte
	// taken is set (under the budget's mutex) when another Reader took the
	// line: the Reader reports it, then drops the rest of the line. It is
	// atomic so that the Reader can look at every line without the lock.
	taken atomic.Bool
}

// grow appends chunk to the share's line, first taking the largest lines
// until the total fits (the grower's own when it is the largest, then it
// reports false and holds nothing). It reports false as well when the
// line was taken since the Reader last looked.
func (s *budgetShare) grow(chunk []byte, limit int) bool {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.taken.Load() {
		return false
	}
	b.used += int64(len(chunk))
	size := int64(len(s.line) + len(chunk))
	for b.used > b.max {
		victim, most := s, size
		for h := range b.holders {
			if n := int64(len(h.line)); h != s && n > most {
				victim, most = h, n
			}
		}
		if victim == s {
			b.used -= size
			s.line = nil
			delete(b.holders, s)
			return false
		}
		b.used -= most
		victim.line = nil
		victim.taken.Store(true)
		delete(b.holders, victim)
	}
	s.line = growLine(s.line, len(chunk), limit)
	s.line = append(s.line, chunk...)
	b.holders[s] = struct{}{}
	return true
}

// take hands over the line with tail appended (the end of the line, which
// was never counted) and releases its bytes; ok is false when the line
// was taken away.
func (s *budgetShare) take(tail []byte) (line []byte, ok bool) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.taken.Load() {
		return nil, false
	}
	line = append(s.line, tail...)
	b.used -= int64(len(s.line))
	s.line = nil
	delete(b.holders, s)
	return line, true
}

// snapshot returns a copy of the line, and whether it was taken away.
func (s *budgetShare) snapshot() (line []byte, taken bool) {
	s.b.mu.Lock()
	defer s.b.mu.Unlock()
	return bytes.Clone(s.line), s.taken.Load()
}

// drop releases the line (refused, taken, or the Reader stops) and clears
// taken.
func (s *budgetShare) drop() {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= int64(len(s.line))
	s.line = nil
	delete(b.holders, s)
	s.taken.Store(false)
}
