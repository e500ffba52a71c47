package framing

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/limits"
)

// Budget bounds the bytes that the connections drawing on it hold
// together (daemon.max_buffered_bytes; stdio.Budget says what a connection
// sees): the unfinished lines of its Splitters and the output its writers
// have committed and not yet written, which they charge themselves
// (TryOutput, AwaitOutput, ForceOutput, ReleaseOutput).
//
// When the total would pass the budget, unfinished lines give way first:
// a Splitter that must grow its unfinished line past the total first takes
// the largest unfinished line there is (its own, if it holds the largest,
// or output holds the rest) away from its connection, freeing that memory
// at once; the Splitter whose line was taken reports KindOverBudget for it
// and skips the rest of that line. Output takes the largest lines the same
// way, but is never taken itself: what does not fit waits its turn, first
// come first served, until output is given back; output larger than the
// whole budget fits once no other output is held.
//
// Only unfinished lines count: a line that ends within one read never
// touches the budget. Its methods may be called from any goroutine.
type Budget struct {
	mu      sync.Mutex
	max     int64
	used    int64                     // lines and output
	output  int64                     // of used: output
	holders map[*budgetShare]struct{} // the shares holding bytes
	// waiters are the writers waiting for room for their output, in
	// arrival order.
	waiters []*outputWaiter
	// peak is the most output held since output was last at zero
	// (ReleaseOutput reports it); highWater is the most ever held.
	peak, highWater int64
}

// NewBudget returns a budget of max bytes; 0 or less means
// limits.DefaultMaxBufferedBytes.
func NewBudget(max int) *Budget {
	b := &Budget{holders: map[*budgetShare]struct{}{}}
	b.SetMax(max)
	return b
}

// SetMax changes the budget (a reload); 0 or less means the default. What
// is held over a smaller budget is not taken until a Splitter grows or
// more output is charged; output waiting for a larger one is let through.
func (b *Budget) SetMax(max int) {
	if max <= 0 {
		max = limits.DefaultMaxBufferedBytes
	}
	b.mu.Lock()
	b.max = int64(max)
	b.grantLocked()
	b.mu.Unlock()
}

// Max is the budget in bytes.
func (b *Budget) Max() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.max)
}

// Used is how many bytes are held now: unfinished lines and output
// together.
func (b *Budget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Output is how many of Used's bytes are output.
func (b *Budget) Output() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.output
}

// HighWater is the most output held at once since b was made.
func (b *Budget) HighWater() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.highWater
}

// takeLinesLocked takes the largest unfinished lines until n more bytes
// fit, or no line is left. b.mu is held.
func (b *Budget) takeLinesLocked(n int64) {
	for b.used+n > b.max && len(b.holders) > 0 {
		var victim *budgetShare
		var most int64 = -1
		for h := range b.holders {
			if l := int64(len(h.line)); l > most {
				victim, most = h, l
			}
		}
		b.used -= most
		victim.line = nil
		victim.taken.Store(true)
		delete(b.holders, victim)
	}
}

// fitOutputLocked charges n bytes of output when they fit, taking lines
// first; output larger than what is left fits when no other output is
// held, so that an answer larger than the budget is still written. b.mu
// is held.
func (b *Budget) fitOutputLocked(n int64) bool {
	b.takeLinesLocked(n)
	if b.used+n > b.max && b.output > 0 {
		return false
	}
	b.chargeLocked(n)
	return true
}

// chargeLocked counts n bytes of output. b.mu is held.
func (b *Budget) chargeLocked(n int64) {
	b.used += n
	b.output += n
	b.peak = max(b.peak, b.output)
	b.highWater = max(b.highWater, b.output)
}

// TryOutput charges n bytes of output when nobody waits before it and
// they fit (taking the largest unfinished lines first), and reports
// whether it did.
func (b *Budget) TryOutput(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters) == 0 && b.fitOutputLocked(n)
}

// ForceOutput charges n bytes of output that cannot wait, even past the
// budget: the caller bounds them otherwise (stdio: a session's own frames
// and the executor's errors, each small or bounded by the connection's
// limit).
func (b *Budget) ForceOutput(n int64) {
	b.mu.Lock()
	b.chargeLocked(n)
	b.mu.Unlock()
}

// outputWaiter is a writer waiting for room for n bytes of output; ready
// is closed once they are charged (granted, under the budget's mutex).
type outputWaiter struct {
	n       int64
	ready   chan struct{}
	granted bool
}

// AwaitOutput waits its turn until n bytes of output fit and charges them
// (true), or until ctx ends (false, nothing charged).
func (b *Budget) AwaitOutput(ctx context.Context, n int64) bool {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.fitOutputLocked(n) {
		b.mu.Unlock()
		return true
	}
	w := &outputWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.granted {
		return true
	}
	b.waiters = slices.DeleteFunc(b.waiters, func(x *outputWaiter) bool { return x == w })
	b.grantLocked() // the next one may fit where this one did not
	return false
}

// ReleaseOutput gives back n bytes of output (written, or dropped with a
// connection that failed) and lets in the waiters that now fit. When it
// leaves no output held it returns the most output held since output was
// last at zero (so that the caller may give memory back after a large
// peak); otherwise 0.
func (b *Budget) ReleaseOutput(n int64) (peak int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.output -= n
	if b.output == 0 {
		peak, b.peak = b.peak, 0
	}
	b.grantLocked()
	return peak
}

// grantLocked charges the waiters that now fit, in order. b.mu is held.
func (b *Budget) grantLocked() {
	for len(b.waiters) > 0 && b.fitOutputLocked(b.waiters[0].n) {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		w.granted = true
		close(w.ready)
	}
	if len(b.waiters) == 0 {
		b.waiters = nil
	}
}

// budgetShare is one Splitter's unfinished line while it draws on a Budget.
// line is guarded by the budget's mutex: another Splitter, or output, may
// take it away.
type budgetShare struct {
	b    *Budget
	line []byte
	// taken is set (under the budget's mutex) when the line was taken
	// away: the Splitter reports it, then drops the rest of the line. It
	// is atomic so that the Splitter can look at every line without the
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
			// The longest, or output holds the rest: this line goes.
			b.used -= size
			s.line = nil
			delete(b.holders, s)
			b.grantLocked()
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
	b.grantLocked()
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
	b.grantLocked()
}
