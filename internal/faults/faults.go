// Package faults lets tests make a session's coordinator fail as a bug
// would, from outside the session: the failed transport instance answers
// what it had in flight and the session restarts it on the same device
// (docs/transport.md §12.4). It is internal so that it is no part of any
// package's API: only snodod's own packages and tests reach it.
//
// Faults are off unless armed: by a test in its own process (Arm), or by
// SNODOD_TEST_FAULTS=1 in the environment of a process under test (the
// end-to-end tests run the daemon so and inject through its control
// socket's "fault" operation). Unarmed, New returns nil, a nil Point's C is
// nil, and nothing of this package costs a session anything.
package faults

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
)

// EnvVar is the environment variable that arms faults for a process.
const EnvVar = "SNODOD_TEST_FAULTS"

var armed atomic.Bool

func init() {
	if os.Getenv(EnvVar) == "1" {
		armed.Store(true)
	}
}

// Arm turns fault injection on for this process, for a test, and returns
// the function that restores the previous setting (for t.Cleanup). Points
// are made when a session starts: one started unarmed takes no fault.
func Arm() (restore func()) {
	was := armed.Swap(true)
	return func() { armed.Store(was) }
}

// Armed reports whether fault injection is on.
func Armed() bool { return armed.Load() }

// Point is where one session takes its faults: the coordinator of each of
// its transport instances selects on C. Its methods may be called from any
// goroutine.
type Point struct {
	ch   chan struct{}
	done <-chan struct{}
	key  any
}

var (
	mu     sync.Mutex
	points = map[any]*Point{}
)

// New returns the fault point of the session identified by key (any
// comparable value, usually the session itself), registered for Inject,
// or nil when faults are not armed. done is closed when the session has
// ended for good: a fault is then no longer waited for. Release
// unregisters it.
func New(key any, done <-chan struct{}) *Point {
	if !Armed() {
		return nil
	}
	p := &Point{ch: make(chan struct{}), done: done, key: key}
	mu.Lock()
	points[key] = p
	mu.Unlock()
	return p
}

// Release unregisters p. A nil p is ignored.
func (p *Point) Release() {
	if p == nil {
		return
	}
	mu.Lock()
	if points[p.key] == p {
		delete(points, p.key)
	}
	mu.Unlock()
}

// C is the channel a coordinator selects on: a receive is the injected
// failure. It is nil for a nil Point, so an unarmed coordinator never
// takes one.
func (p *Point) C() <-chan struct{} {
	if p == nil {
		return nil
	}
	return p.ch
}

// Inject makes the running transport instance of the session registered
// under key fail once. It returns once an instance took the failure (true),
// or once the session has ended (true: there was nothing left to fail), or
// at once when no session is registered under key (false). Before the
// session's first instance runs it waits for it.
func Inject(key any) bool {
	mu.Lock()
	p := points[key]
	mu.Unlock()
	if p == nil {
		return false
	}
	select {
	case p.ch <- struct{}{}:
	case <-p.done:
	}
	return true
}

type pointKey struct{}

// With returns a context carrying p, for the transport instance served
// with it.
func With(ctx context.Context, p *Point) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, pointKey{}, p)
}

// From returns the Point ctx carries, or nil.
func From(ctx context.Context) *Point {
	p, _ := ctx.Value(pointKey{}).(*Point)
	return p
}
