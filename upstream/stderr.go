package upstream

// Defaults of the stderr limits (upstreams.md §8).
const (
	DefaultStderrRingBytes   = 64 << 10
	DefaultStderrBudgetBytes = 8 << 20
)

// StderrBudget bounds the bytes all StderrRings of a daemon hold together
// (8 MiB by default). A ring that would pass the budget drops its own
// oldest bytes first. Its methods may be called from any goroutine.
type StderrBudget struct{}

// NewStderrBudget returns a budget of maxBytes; 0 or less means
// DefaultStderrBudgetBytes.
func NewStderrBudget(maxBytes int) *StderrBudget { panic("not yet") }

// StderrRing keeps the newest bytes of an upstream's stderr (64 KiB by
// default) within a daemon-wide budget: it is shared by the instances of
// one upstream across restarts, so `snodod logs NAME` shows the history.
// Its methods may be called from any goroutine.
type StderrRing struct{}

// NewStderrRing returns a ring of size bytes (0 or less means
// DefaultStderrRingBytes) charged to b; a nil b means no daemon budget.
func NewStderrRing(b *StderrBudget, size int) *StderrRing { panic("not yet") }

// Write keeps p's newest bytes; it never blocks and never fails.
func (r *StderrRing) Write(p []byte) (int, error) { panic("not yet") }

// Tail returns the last n bytes (fewer when it holds fewer), cut forward to
// a UTF-8 boundary.
func (r *StderrRing) Tail(n int) string { panic("not yet") }

// Snapshot returns a copy of all it holds.
func (r *StderrRing) Snapshot() []byte { panic("not yet") }

// Follow returns the bytes written from now on until cancel is called (for
// `snodod logs -f`); a slow reader loses bytes rather than blocking the
// writer. The channel is closed after cancel.
func (r *StderrRing) Follow() (ch <-chan []byte, cancel func()) { panic("not yet") }
