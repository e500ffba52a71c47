package eventually

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestWithin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		start := time.Now()
		// Holds on the fifth call.
		if !Within(time.Second, func() bool { return calls.Add(1) == 5 }) {
			t.Fatal("Within gave up on a condition that held")
		}
		if calls.Load() != 5 {
			t.Fatalf("%d calls, want 5", calls.Load())
		}
		// 1 + 2 + 4 + 8 ms of polling before the fifth call.
		if waited := time.Since(start); waited != 15*time.Millisecond {
			t.Fatalf("waited %v, want 15ms", waited)
		}
	})
}

func TestWithinGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var calls int
		if Within(100*time.Millisecond, func() bool { calls++; return false }) {
			t.Fatal("Within reported a condition that never held")
		}
		// The last poll ends at most maxPoll after the deadline.
		if waited := time.Since(start); waited <= 100*time.Millisecond || waited > 100*time.Millisecond+maxPoll {
			t.Fatalf("gave up after %v", waited)
		}
		if calls < 2 {
			t.Fatalf("%d calls", calls)
		}
	})
}
