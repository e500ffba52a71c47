package stdio

import "sync/atomic"

// Counters show a running connection's load to other goroutines (a status
// display) without a message to the coordinator. Give one to
// Transport.Counters; the transport keeps it current and leaves it at zero
// when Serve returns, so the successive instances of a restarted session
// may share one. All methods may be called from any goroutine.
type Counters struct {
	inFlight atomic.Int64
	requests atomic.Int64
	pending  atomic.Int64
}

// Requests is the number of requests received so far, each answered once
// (a refusal included). Unlike InFlight it is never reset: the instances
// of a restarted session add to it.
func (c *Counters) Requests() int64 { return c.requests.Load() }

// InFlight is the number of admitted requests without a final line,
// running or queued. Open listen streams are not counted here.
func (c *Counters) InFlight() int { return int(c.inFlight.Load()) }

// PendingOutput is the number of bytes of output committed and not yet
// written, with the room workers reserved for their answers: what
// session.max_pending_output_bytes bounds (docs/transport.md §11.5).
func (c *Counters) PendingOutput() int64 { return c.pending.Load() }

// The transport's side of Counters, on the one pointer the output holds
// (output.counters; nil: nobody is looking). A request is counted when it
// is admitted and uncounted by whoever ends it (output.endLocked: the
// worker that commits its final frame, or the coordinator), so the count
// is current without the coordinator looking.

// request counts a request line.
func (c *Counters) request() {
	if c != nil {
		c.requests.Add(1)
	}
}

// addInFlight adds n to the admitted requests.
func (c *Counters) addInFlight(n int64) {
	if c != nil {
		c.inFlight.Add(n)
	}
}

// setPending publishes the output's held bytes.
func (c *Counters) setPending(n int) {
	if c != nil {
		c.pending.Store(int64(n))
	}
}

// publishEnd leaves the Counters at zero once the coordinator has returned.
func (c *coordinator) publishEnd() {
	if c.out.counters != nil {
		c.out.counters.inFlight.Store(0)
		c.out.counters.pending.Store(0)
	}
}
