package upstream

import (
	"context"
	"sync"
)

// gate bounds the requests one instance has in flight (docs/upstreams.md §8:
// upstreams.max_in_flight, 32) and those waiting for a slot
// (upstreams.max_queued, 64). Waiting requests are served round-robin by
// session, so a session that queues many cannot starve the others. Its
// methods may be called from any goroutine.
type gate struct {
	maxInFlight, maxQueued int

	mu       sync.Mutex
	inFlight int
	queued   int
	// waiting holds each session's waiters in arrival order; turn is the
	// sessions with waiters, in round-robin order.
	waiting map[*Client][]chan struct{}
	turn    []*Client
}

func newGate(maxInFlight, maxQueued int) *gate {
	return &gate{maxInFlight: max(maxInFlight, 1), maxQueued: max(maxQueued, 0), waiting: map[*Client][]chan struct{}{}}
}

// enter takes a slot for a request of session (nil: a request from no
// session, such as a test's), waiting its turn when all are busy. It
// returns false at once when the queue is full, and ctx's error when ctx
// ends first. admitted, when not nil, is called once the
// request has a slot or a place in the queue, before it waits: the request
// may then give its executor slot back (executor.Detach), the gate bounding
// it. A true enter must be paired with leave.
func (g *gate) enter(ctx context.Context, session *Client, admitted func()) (bool, error) {
	g.mu.Lock()
	if g.inFlight < g.maxInFlight && len(g.turn) == 0 {
		g.inFlight++
		g.mu.Unlock()
		if admitted != nil {
			admitted()
		}
		return true, nil
	}
	if g.queued >= g.maxQueued {
		g.mu.Unlock()
		return false, nil
	}
	ch := make(chan struct{})
	if len(g.waiting[session]) == 0 {
		g.turn = append(g.turn, session)
	}
	g.waiting[session] = append(g.waiting[session], ch)
	g.queued++
	g.mu.Unlock()
	if admitted != nil {
		admitted()
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-ch: // handed a slot just as ctx ended: give it on
		g.inFlight--
		g.handOnLocked()
	default:
		g.removeLocked(session, ch)
	}
	return false, ctx.Err()
}

// leave gives a slot back, to the next session's oldest waiter if any.
func (g *gate) leave() {
	g.mu.Lock()
	g.inFlight--
	g.handOnLocked()
	g.mu.Unlock()
}

func (g *gate) handOnLocked() {
	for g.inFlight < g.maxInFlight && len(g.turn) > 0 {
		s := g.turn[0]
		g.turn = g.turn[1:]
		q := g.waiting[s]
		ch := q[0]
		if len(q) > 1 {
			g.waiting[s] = q[1:]
			g.turn = append(g.turn, s) // to the back of the turn order
		} else {
			delete(g.waiting, s)
		}
		g.queued--
		g.inFlight++
		close(ch)
	}
}

func (g *gate) removeLocked(session *Client, ch chan struct{}) {
	q := g.waiting[session]
	for i, c := range q {
		if c == ch {
			q = append(q[:i], q[i+1:]...)
			g.queued--
			break
		}
	}
	if len(q) > 0 {
		g.waiting[session] = q
		return
	}
	delete(g.waiting, session)
	for i, s := range g.turn {
		if s == session {
			g.turn = append(g.turn[:i], g.turn[i+1:]...)
			break
		}
	}
}

// load returns the requests in flight and queued.
func (g *gate) load() (inFlight, queued int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.queued
}
