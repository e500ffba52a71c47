package server

import (
	"context"
	"errors"
	"sync"
)

// This file holds the subscription hub: the process-wide fan-out of catalog
// changes to every subscription (a 2026 listen stream, or a legacy
// connection's notification feed). Delivery follows docs/protocol.md §9.4: each
// subscription pulls its next change only after the previous one was
// written, at most maxWaiting changes wait per subscription, an identical
// waiting change absorbs a new one, and on overflow the oldest is dropped.

// ChangeKind says what changed in the catalog.
type ChangeKind uint8

const (
	changeTools           ChangeKind = iota + 1 // the tool list changed
	changePrompts                               // the prompt list changed
	changeResources                             // the resource or template list changed
	changeResourceUpdated                       // the resource at change.uri changed
)

// change is one catalog change event. Two changes are identical when they
// are equal (==): same kind and, for changeResourceUpdated, same URI.
type change struct {
	kind ChangeKind
	uri  string // only for changeResourceUpdated
}

// maxWaiting is how many undelivered changes wait per feed (docs/protocol.md
// §9.4).
const maxWaiting = 100

// errFeedClosed is returned by feed.next once the feed is closed.
var errFeedClosed = errors.New("subscription feed closed")

// hub fans catalog changes out to feeds. It is safe for concurrent use.
// publish never blocks on a subscriber: it only appends to each accepting
// feed's bounded queue and nudges its wake channel, so its cost is one
// short critical section per feed and no goroutine is ever started.
type hub struct {
	mu    sync.RWMutex
	feeds map[*feed]struct{}
}

func newHub() *hub { return &hub{feeds: make(map[*feed]struct{})} }

// publish offers c to every feed whose filter accepts it. It never blocks.
func (h *hub) publish(c change) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for f := range h.feeds {
		if f.accept == nil || f.accept(c) {
			f.offer(c)
		}
	}
}

// subscribe returns a new feed receiving the changes accept reports true
// for (all of them when accept is nil). accept is called by publishing
// goroutines, possibly concurrently: it must be fast and must not block or
// call back into the hub. wake, 1-buffered, is the feed's "the queue may
// have grown": a SessionState shares its own with the feeds it polls (poll
// only; whoever owns wake learns of close some other way). With nil, the
// feed gets its own, and next may wait on it. The caller closes the feed.
func (h *hub) subscribe(accept func(change) bool, wake chan struct{}) *feed {
	f := &feed{hub: h, accept: accept, wake: wake}
	if wake == nil {
		f.wake, f.done = make(chan struct{}, 1), make(chan struct{})
	}
	h.mu.Lock()
	h.feeds[f] = struct{}{}
	h.mu.Unlock()
	return f
}

// feed is one subscription's queue of waiting changes. next is meant for a
// single consumer; offer and close may be called from any goroutine.
type feed struct {
	hub    *hub
	accept func(change) bool
	wake   chan struct{} // 1-buffered: "the queue may have grown"
	done   chan struct{} // closed by close; nil for a polled feed

	mu      sync.Mutex
	closed  bool
	waiting ring
}

// offer queues c, merging it into an identical waiting change, or dropping
// the oldest waiting change when maxWaiting are already waiting.
func (f *feed) offer(c change) {
	f.mu.Lock()
	if f.closed || f.waiting.contains(c) {
		f.mu.Unlock()
		return
	}
	if f.waiting.n == maxWaiting {
		f.waiting.pop()
	}
	f.waiting.push(c)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// poll returns a waiting change without blocking; closed reports a closed
// feed. After an empty poll, a send on f.wake says the queue may have grown.
func (f *feed) poll() (c change, ok, closed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return change{}, false, true
	}
	c, ok = f.waiting.pop()
	return c, ok, false
}

// next blocks until an accepted change is waiting, ctx ends (ctx.Err()) or
// the feed is closed (errFeedClosed). A closed feed wins over a waiting
// change, and an ended ctx over a waiting change, so the result is
// deterministic when several hold at once.
func (f *feed) next(ctx context.Context) (change, error) {
	for {
		f.mu.Lock()
		closed := f.closed
		c, ok := change{}, false
		if !closed && ctx.Err() == nil {
			c, ok = f.waiting.pop()
		}
		f.mu.Unlock()
		switch {
		case closed:
			return change{}, errFeedClosed
		case ok:
			return c, nil
		}
		select {
		case <-f.wake:
		case <-f.done:
		case <-ctx.Done():
			return change{}, ctx.Err()
		}
	}
}

// close unsubscribes the feed and drops its waiting changes. It is
// idempotent and wakes a blocked next.
func (f *feed) close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	f.waiting = ring{}
	f.mu.Unlock()
	if f.done != nil {
		close(f.done)
	}
	f.hub.mu.Lock()
	delete(f.hub.feeds, f)
	f.hub.mu.Unlock()
}

// ring is a FIFO of changes that grows on demand up to maxWaiting, so an
// idle feed costs no queue memory.
type ring struct {
	buf  []change
	head int
	n    int
}

func (r *ring) at(i int) *change { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring) contains(c change) bool {
	for i := range r.n {
		if *r.at(i) == c {
			return true
		}
	}
	return false
}

func (r *ring) push(c change) {
	if r.n == len(r.buf) {
		grown := make([]change, min(max(2*len(r.buf), 4), maxWaiting))
		for i := range r.n {
			grown[i] = *r.at(i)
		}
		r.buf, r.head = grown, 0
	}
	*r.at(r.n) = c
	r.n++
}

func (r *ring) pop() (change, bool) {
	if r.n == 0 {
		return change{}, false
	}
	p := r.at(0)
	c := *p
	*p = change{} // let the URI string be collected
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return c, true
}
