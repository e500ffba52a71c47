package mcpclient

import (
	"sync"
	"time"

	"github.com/snodod/snodod/internal/tailbuf"
)

// Defaults of the stderr limits (docs/upstreams.md §8).
const (
	DefaultStderrRingBytes   = 64 << 10
	DefaultStderrBudgetBytes = 8 << 20
	// stderrFloorBytes of every ring are kept whatever the budget says, so
	// that an ExitError always has its stderr tail.
	stderrFloorBytes = 2 << 10
	// followBuffer is how many writes a Follow channel holds before a slow
	// reader starts losing them.
	followBuffer = 64
)

// StderrBudget bounds the bytes all StderrRings of a daemon hold together
// (8 MiB by default). A ring grows only while the budget allows; a ring
// that cannot grow keeps what it has and drops its own oldest bytes. Each
// ring may hold its first 2 KiB outside the budget, so that every instance
// keeps the stderr tail its errors quote. Its methods may be called from
// any goroutine.
type StderrBudget struct {
	mu   sync.Mutex
	max  int
	used int
}

// NewStderrBudget returns a budget of maxBytes; 0 or less means
// DefaultStderrBudgetBytes.
func NewStderrBudget(maxBytes int) *StderrBudget {
	if maxBytes <= 0 {
		maxBytes = DefaultStderrBudgetBytes
	}
	return &StderrBudget{max: maxBytes}
}

// take grants up to n bytes.
func (b *StderrBudget) take(n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n = max(0, min(n, b.max-b.used))
	b.used += n
	return n
}

func (b *StderrBudget) give(n int) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used is the number of bytes the budget's rings hold beyond their floors.
func (b *StderrBudget) Used() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// StderrRing keeps the newest bytes of an upstream's stderr (64 KiB by
// default) within a daemon-wide budget: it is shared by the instances of
// one upstream across restarts, so `snodod logs NAME` shows the history,
// each line with the time it was written and a mark at each start
// (stderr_log.go). Its methods may be called from any goroutine. Its
// memory grows with what is written, up to its size.
type StderrRing struct {
	budget *StderrBudget
	size   int

	mu        sync.Mutex
	buf       []byte // the ring's storage; len(buf) is its current capacity
	charged   int    // bytes of buf taken from the budget
	head, n   int    // buf[head] is the oldest of the n bytes held
	followers map[*follower]struct{}
	closed    bool
	stamps    // when each byte held was written, and the start marks
}

type follower struct{ ch chan []byte }

// NewStderrRing returns a ring of size bytes (0 or less means
// DefaultStderrRingBytes) charged to b; a nil b means no daemon budget.
func NewStderrRing(b *StderrBudget, size int) *StderrRing {
	if size <= 0 {
		size = DefaultStderrRingBytes
	}
	return &StderrRing{budget: b, size: size}
}

// Write keeps p's newest bytes and passes p to followers; it never blocks
// and never fails.
func (r *StderrRing) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.send(r.stamp(nil, p, now))
	if r.closed {
		return len(p), nil
	}
	if r.n+len(p) > len(r.buf) {
		r.grow(r.n + len(p))
	}
	q := p
	if len(q) > len(r.buf) {
		q = q[len(q)-len(r.buf):]
	}
	// Drop the oldest bytes that q displaces, then copy q in at the end.
	if drop := r.n + len(q) - len(r.buf); drop > 0 {
		r.head = (r.head + drop) % len(r.buf)
		r.n -= drop
	}
	end := (r.head + r.n) % len(r.buf)
	c := copy(r.buf[end:], q)
	copy(r.buf, q[c:])
	r.n += len(q)
	r.wrote(len(p), now, r.n)
	return len(p), nil
}

// send gives a rendered piece of the log to the followers; r.mu is held.
func (r *StderrRing) send(b []byte) {
	for f := range r.followers {
		select {
		case f.ch <- b: // read only: one copy serves them all
		default: // a slow follower loses this write
		}
	}
}

// grow makes the ring's capacity up to need bytes (within size and the
// budget), keeping what it holds in order.
func (r *StderrRing) grow(need int) {
	want := min(r.size, max(need, 2*len(r.buf), 4<<10))
	extra := want - len(r.buf)
	free := max(0, min(stderrFloorBytes, r.size)-len(r.buf)) // the floor is not charged
	free = min(free, extra)
	granted := free
	if extra > free {
		if r.budget == nil {
			granted = extra
		} else {
			got := r.budget.take(extra - free)
			r.charged += got
			granted += got
		}
	}
	if granted == 0 {
		return
	}
	nb := make([]byte, len(r.buf)+granted)
	r.copyOut(nb)
	r.buf, r.head = nb, 0
}

// copyOut copies the held bytes, oldest first, into dst.
func (r *StderrRing) copyOut(dst []byte) int {
	if r.n == 0 {
		return 0
	}
	first := min(r.n, len(r.buf)-r.head)
	c := copy(dst, r.buf[r.head:r.head+first])
	c += copy(dst[c:], r.buf[:r.n-first])
	return c
}

// Tail returns the last n bytes (fewer when it holds fewer), cut forward to
// a UTF-8 boundary. It copies only those: a failure quotes 2 KiB of a ring
// of up to 64 KiB.
func (r *StderrRing) Tail(n int) string {
	r.mu.Lock()
	k := min(max(n, 0)+1, r.n) // one byte more, for tailString to see a cut
	b := make([]byte, k)
	if k > 0 {
		start := (r.head + r.n - k) % len(r.buf)
		c := copy(b, r.buf[start:min(start+k, len(r.buf))])
		copy(b[c:], r.buf[:k-c])
	}
	r.mu.Unlock()
	return tailString(b, n)
}

// tailString is the last n bytes of b, starting at a rune boundary.
func tailString(b []byte, n int) string { return string(tailbuf.Cut(b, n)) }

// Snapshot returns a copy of all it holds, oldest first.
func (r *StderrRing) Snapshot() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]byte, r.n)
	r.copyOut(out)
	return out
}

// Log returns what the ring holds as `snodod logs NAME` shows it (each
// line after the time it was written, and a mark at each start), and with
// follow what is written from now on, rendered alike, until cancel is
// called; a slow reader loses whole writes rather than blocking the
// writer. cancel closes the channel; it may be called more than once.
func (r *StderrRing) Log(follow bool) (held []byte, ch <-chan []byte, cancel func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	held = r.render()
	if !follow {
		return held, nil, func() {}
	}
	f := &follower{ch: make(chan []byte, followBuffer)}
	if r.followers == nil {
		r.followers = make(map[*follower]struct{})
	}
	r.followers[f] = struct{}{}
	var once sync.Once
	return held, f.ch, func() {
		once.Do(func() {
			r.mu.Lock()
			delete(r.followers, f)
			close(f.ch)
			r.mu.Unlock()
		})
	}
}

// Close gives the ring's bytes back to the budget (an upstream removed from
// the configuration) and empties it; later writes reach followers only.
func (r *StderrRing) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	if r.budget != nil {
		r.budget.give(r.charged)
	}
	r.buf, r.charged, r.head, r.n = nil, 0, 0, 0
	r.stamps = stamps{written: r.written, midLine: r.midLine}
}
