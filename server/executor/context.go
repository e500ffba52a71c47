package executor

import (
	"context"
	"sync"
	"time"

	"github.com/snodod/snodod/server/internal/ctxkey"
)

// jobContext is the context a job's handler runs with: the submitter's
// values, without its cancellation or deadline, and cancelled when the job
// is cancelled, times out or finishes (Submit). It lives in the job, and
// makes its Done channel only when someone asks for it, so that a job
// whose handler never waits on its context costs no allocation for it
// (context.WithCancel cost two per request).
//
// It is an afterFuncer for the context package: contexts derived from it
// (WithCancel, WithTimeout, AfterFunc) register a function instead of a
// goroutine each to learn of its end.
type jobContext struct {
	job    *job // whose context it is, for ExtendDeadline
	parent context.Context

	mu     sync.Mutex
	done   chan struct{} // made lazily; closed by cancel
	err    error         // context.Canceled once cancelled
	afters []*afterFunc  // registered by AfterFunc, run by cancel
}

type afterFunc struct{ f func() }

// closedChan is the Done channel of a context cancelled before anyone
// asked for it.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (c *jobContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *jobContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		if c.err != nil {
			return closedChan
		}
		c.done = make(chan struct{})
	}
	return c.done
}

func (c *jobContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value answers jobKey with the job (ExtendDeadline, Detach, HoldConn),
// ctxkey.TimedOut with the job's timeout flag (the runtime's Observer),
// and the submitter's values otherwise.
func (c *jobContext) Value(key any) any {
	switch key.(type) {
	case jobKey:
		if c.job != nil {
			return c.job
		}
	case ctxkey.TimedOut:
		if c.job != nil {
			return &c.job.timedOut
		}
	}
	return c.parent.Value(key)
}

// AfterFunc arranges for f to run in its own goroutine once c is
// cancelled, at once if it is already; stop undoes it and reports whether
// it did (f had not been started). It is context.AfterFunc's hook.
func (c *jobContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	a := &afterFunc{f: f}
	c.afters = append(c.afters, a)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, other := range c.afters {
			if other == a {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends c; later calls do nothing.
func (c *jobContext) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	afters := c.afters
	c.afters = nil
	c.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}

// String names the context in panics and logs, as the context package's
// contexts do.
func (c *jobContext) String() string { return "executor.jobContext" }
