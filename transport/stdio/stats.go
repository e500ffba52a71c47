package stdio

import "sync/atomic"

// Counters show a running connection's load to other goroutines (a status
// display) without a message to the coordinator. Give one to
// Transport.Counters; the coordinator keeps it current and leaves it at zero
// when Serve returns, so the successive instances of a restarted session
// may share one. All methods may be called from any goroutine.
type Counters struct {
	inFlight atomic.Int64
	requests atomic.Int64
}

// Requests is the number of requests received so far, each answered once
// (a refusal included). Unlike InFlight it is never reset: the instances
// of a restarted session add to it.
func (c *Counters) Requests() int64 { return c.requests.Load() }

// InFlight is the number of admitted requests without a final line,
// running or queued. Open listen streams are not counted here.
func (c *Counters) InFlight() int { return int(c.inFlight.Load()) }

// counting is the coordinator's side of Counters. It publishes after each
// event it handled, and only when the value changed, so an idle status
// reader costs the coordinator nothing and a busy one a compare.
type counting struct {
	to       *Counters // nil: nobody is looking
	streams  int       // open listen streams (they live in inflight too)
	inFlight int       // last published value
}

// publish stores the current load in the Counters, if any.
func (c *coordinator) publish() {
	s := &c.stats
	if s.to == nil {
		return
	}
	if n := len(c.inflight) - s.streams; n != s.inFlight {
		s.inFlight = n
		s.to.inFlight.Store(int64(n))
	}
}

// request counts a request line.
func (s *counting) request() {
	if s.to != nil {
		s.to.requests.Add(1)
	}
}

// publishEnd leaves the Counters at zero once the coordinator has returned.
func (c *coordinator) publishEnd() {
	if c.stats.to != nil {
		c.stats.to.inFlight.Store(0)
	}
}
