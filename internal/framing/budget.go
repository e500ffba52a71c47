package framing

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/limits"
)

// Budget bounds the bytes of unfinished lines that the Splitters drawing
// on it hold together (daemon.max_buffered_bytes; stdio.LineBudget says
// what a connection sees). A Splitter that must grow its unfinished line
// past the total first takes the largest unfinished line there is (its
// own, if it holds the largest) away from its connection, freeing that
// memory at once; the Splitter whose line was taken reports KindOverBudget
// for it and skips the rest of that line. Only unfinished lines count: a
// line that ends within one read never touches the budget. Its methods may
// be called from any goroutine.
type Budget struct {
	mu      sync.Mutex
	max     int64
	used    int64
	holders map[*budgetShare]struct{} // the shares holding bytes
}

// NewBudget returns a budget of max bytes; 0 or less means
// limits.DefaultMaxBufferedBytes.
func NewBudget(max int) *Budget {
	b := &Budget{holders: map[*budgetShare]struct{}{}}
	b.SetMax(max)
	return b
}

// SetMax changes the budget (a reload); 0 or less means the default. Lines
// already held over a smaller budget are not taken until a Splitter grows.
func (b *Budget) SetMax(max int) {
	if max <= 0 {
		max = limits.DefaultMaxBufferedBytes
	}
	b.mu.Lock()
	b.max = int64(max)
	b.mu.Unlock()
}

// Max is the budget in bytes.
func (b *Budget) Max() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.max)
}

// Used is how many bytes of unfinished lines are held now.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// budgetShare is one Splitter's unfinished line while it draws on a Budget.
// line is guarded by the budget's mutex: another Splitter may take it away.
type budgetShare struct {
	b    *Budget
	line []byte
	// taken is set (under the budget's mutex) when another Splitter took
	// the line: the Splitter reports it, then drops the rest of the line.
	// It is atomic so that the Splitter can look at every line without the
	// lock.
	taken atomic.Bool
}

// grow appends chunk to the share's line, first taking the largest lines
// until the total fits (the grower's own when it is the largest, then it
// reports false and holds nothing). It reports false as well when the
// line was taken since the Splitter last looked.
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

// drop releases the line (refused, taken, or the Splitter stops) and clears
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
