package session

import (
	"math"
	"runtime"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// idleHeapLimit is the heap an idle session may hold besides its two
// goroutines' records (about 450 B each; the runtime reuses them), its
// client's end of the socket pair and the test's records of it included:
// 5.3 KiB today (of which the three waits of its coordinator's select,
// 112 B each), and a margin. The goal is at most 12 KiB of daemon RSS
// per idle session (docs/bench.md, "Goals"), of which the stacks take
// 6 KiB: this is a line against growth, not the goal.
const idleHeapLimit = 6 << 10

// TestIdleSessionCost pins what an idle session holds: exactly two
// goroutines (its reader, waiting in the poller, and its coordinator) and
// at most idleHeapLimit of heap. Both are measured, in a process of the
// test's own (inFreshProcess), as the growth by n initialized idle
// sessions served as the daemon serves them, after n others, so that what
// the first sessions start once (executor workers, pools) is not counted,
// and after 2n sessions came and went, so that every goroutine reuses a
// record, as in a daemon that has served for a while.
func TestIdleSessionCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 750 sessions")
	}
	if !inFreshProcess(t) {
		return
	}
	const n = 150
	before := runtime.NumGoroutine()
	t.Run("came and went", func(t *testing.T) { serveIdle(t)(2 * n) })
	eventually.True(t, "the sessions that came and went have ended", func() bool { return runtime.NumGoroutine() <= before })
	open := serveIdle(t)
	// Two rounds of n more sessions after the first n, and the smaller
	// heap growth of the two: a table shared by the sessions (the
	// supervisor's map of services) doubles in one round or the other.
	open(n)
	perHeap := math.Inf(1)
	for range 2 {
		heap0, g0 := heapAlloc(), runtime.NumGoroutine()
		open(n)
		heap1, g1 := heapAlloc(), runtime.NumGoroutine()
		if per := float64(g1-g0) / n; per != 2 {
			t.Errorf("an idle session has %.3f goroutines, want 2 (its reader and its coordinator)", per)
		}
		perHeap = min(perHeap, float64(int64(heap1)-int64(heap0))/n)
	}
	t.Logf("heap per idle session: %.0f B", perHeap)
	if perHeap > idleHeapLimit {
		t.Errorf("an idle session holds %.0f B of heap, over %d B: see BenchmarkIdleSession's profile (-memprofile) for what it keeps", perHeap, idleHeapLimit)
	}
}

// heapAlloc is the heap allocated after collections: its live objects.
func heapAlloc() uint64 {
	for range 2 {
		runtime.GC()
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
