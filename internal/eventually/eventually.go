// Package eventually waits, in tests, for a state that nothing announces:
// a figure another goroutine publishes, a slot freed after a handler
// returned, a process that has exited, a status row that changes. Where a
// channel or a callback can say that the state was reached, a test waits
// on that instead.
//
// A wait that runs out is a failure, never a measurement: the bounds are
// long enough for a loaded machine, and a test asserts no duration. Inside
// a testing/synctest bubble the waits run on the bubble's clock.
package eventually

import (
	"testing"
	"time"
)

// Timeout is how long True waits before it fails the test.
const Timeout = 10 * time.Second

// The polling interval starts at firstPoll, so that a state reached at
// once costs a millisecond, and doubles up to maxPoll, so that a condition
// that is costly to evaluate (a status request, a directory listing) does
// not load the machine it waits on.
const (
	firstPoll = time.Millisecond
	maxPoll   = 16 * time.Millisecond
)

// True waits until cond holds, and fails t with what (the state waited
// for) when it does not within Timeout. It calls t.Fatalf, so it must run
// on the test's goroutine.
func True(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Within(Timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", Timeout, what)
	}
}

// Within reports whether cond held within d, for a caller whose failure
// message shows the state it last saw. cond is called at least once, and
// the last call is made after d has passed.
func Within(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for poll := firstPoll; !cond(); poll = min(2*poll, maxPoll) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
	return true
}
