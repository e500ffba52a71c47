package framing

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
)

// The output side of the Budget (docs/transport.md §3.5, §11.5): output
// is charged when it fits, exactly up to the budget; past it the longest
// unfinished lines give way; what still does not fit waits its turn.
// (transport/stdio's TestBudgetOutputTakesLines shows what a connection
// whose line output took sees.)

// TestBudgetOutputBoundary: output fits up to the budget's last byte, one
// byte more waits until output is given back, and the wait is first come,
// first served.
func TestBudgetOutputBoundary(t *testing.T) {
	b := NewBudget(1000)
	if !b.TryOutput(600) || !b.TryOutput(400) {
		t.Fatal("1,000 bytes of output do not fit a budget of 1,000")
	}
	if b.Used() != 1000 || b.Output() != 1000 {
		t.Fatalf("used %d, output %d; want 1000 and 1000", b.Used(), b.Output())
	}
	if b.TryOutput(1) {
		t.Fatal("one byte past the budget was charged")
	}
	first := awaitAsync(b, 500)
	waitWaiters(t, b, 1) // in this order
	second := awaitAsync(b, 100)
	waitWaiters(t, b, 2)
	// Room for the second, not the first: nobody passes it.
	if peak := b.ReleaseOutput(400); peak != 0 {
		t.Fatalf("a release that leaves output held reports a peak of %d", peak)
	}
	if b.TryOutput(100) {
		t.Fatal("a charge went before the waiters")
	}
	waitWaiters(t, b, 2)
	b.ReleaseOutput(200) // 600 free: the first (to exactly 1,000), then the second
	expectGranted(t, first)
	expectGranted(t, second)
	if b.Used() != 1000 || b.Output() != 1000 {
		t.Fatalf("used %d, output %d; want the budget exactly", b.Used(), b.Output())
	}
}

// TestBudgetOutputTakesTheLongestLine: output that does not fit takes the
// longest unfinished line first, and only as many as it needs.
func TestBudgetOutputTakesTheLongestLine(t *testing.T) {
	b := NewBudget(1000)
	long, short := growShare(t, b, 500), growShare(t, b, 300)
	if !b.TryOutput(200) {
		t.Fatal("200 bytes did not fit beside 800 of lines in 1,000")
	}
	if long.taken.Load() || short.taken.Load() {
		t.Fatal("a line was taken while output still fit")
	}
	if !b.TryOutput(1) {
		t.Fatal("output did not take a line to fit")
	}
	if !long.taken.Load() || short.taken.Load() {
		t.Fatal("output took another line than the longest")
	}
	if b.Used() != 300+201 {
		t.Fatalf("used %d, want 501", b.Used())
	}
}

// TestBudgetOutputLargerThanBudget: one answer larger than the whole
// budget is charged once no other output is held, taking every line; a
// release that leaves no output reports the peak since output was last at
// zero.
func TestBudgetOutputLargerThanBudget(t *testing.T) {
	b := NewBudget(1000)
	line := growShare(t, b, 400)
	if !b.TryOutput(100) {
		t.Fatal("small output refused")
	}
	if b.TryOutput(5000) {
		t.Fatal("an answer larger than the budget was charged while other output is held")
	}
	big := awaitAsync(b, 5000)
	waitWaiters(t, b, 1)
	// Output is at zero before the waiter is let in: the peak so far.
	if peak := b.ReleaseOutput(100); peak != 100 {
		t.Fatalf("the release of the only output reports a peak of %d, want 100", peak)
	}
	expectGranted(t, big)
	if b.Used() != 5000 || !line.taken.Load() {
		t.Fatalf("used %d (line taken: %v), want 5000 and the line taken", b.Used(), line.taken.Load())
	}
	if peak := b.ReleaseOutput(5000); peak != 5000 {
		t.Fatalf("the last release reports a peak of %d, want 5000", peak)
	}
	if b.Used() != 0 || b.Output() != 0 || b.HighWater() != 5000 {
		t.Fatalf("used %d, output %d, high water %d after every release", b.Used(), b.Output(), b.HighWater())
	}
}

// TestBudgetOutputWaitEnds: a waiter whose request ends leaves the queue,
// charging nothing, and the next one is served.
func TestBudgetOutputWaitEnds(t *testing.T) {
	b := NewBudget(1000)
	b.TryOutput(1000)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan bool, 1)
	go func() { gone <- b.AwaitOutput(ctx, 900) }()
	next := awaitAsync(b, 100)
	waitWaiters(t, b, 2)
	cancel()
	if <-gone {
		t.Fatal("a cancelled wait reports a charge")
	}
	b.ReleaseOutput(100)
	expectGranted(t, next)
	if b.Used() != 1000 || len(b.waiters) != 0 {
		t.Fatalf("used %d, want 1000: the cancelled waiter charged", b.Used())
	}
}

// TestBudgetSetMaxGrants: a reload's larger budget lets the waiters in.
func TestBudgetSetMaxGrants(t *testing.T) {
	b := NewBudget(1000)
	b.TryOutput(1000)
	w := awaitAsync(b, 500)
	waitWaiters(t, b, 1)
	b.SetMax(1500)
	expectGranted(t, w)
}

// growShare is an unfinished line of n bytes drawing on b.
func growShare(t *testing.T, b *Budget, n int) *budgetShare {
	t.Helper()
	s := &budgetShare{b: b}
	if !s.grow(bytes.Repeat([]byte("x"), n), 1<<20) {
		t.Fatalf("a line of %d bytes did not fit", n)
	}
	return s
}

// awaitAsync starts a wait for n bytes; its channel says whether they
// were charged.
func awaitAsync(b *Budget, n int64) chan bool {
	got := make(chan bool, 1)
	go func() { got <- b.AwaitOutput(context.Background(), n) }()
	return got
}

func waitWaiters(t *testing.T, b *Budget, n int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("%d waiters", n), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.waiters) == n
	})
}

func expectGranted(t *testing.T, c chan bool) {
	t.Helper()
	select {
	case ok := <-c:
		if !ok {
			t.Fatal("a wait ended without its charge")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter that fits was not let in")
	}
}
