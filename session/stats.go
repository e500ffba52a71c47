package session

import (
	"encoding/json"
	"fmt"
	"time"
)

// Stats is a snapshot of one session, for `snodod status`.
type Stats struct {
	ID      uint64
	Kind    Kind
	Peer    Peer
	Started time.Time
	// Version is the negotiated legacy version, "" before a legacy
	// initialize (a 2026 client never negotiates one).
	Version string
	// ClientInfo is the clientInfo object the client sent (its
	// initialize's, or its last 2026 request's), nil before it did.
	ClientInfo json.RawMessage
	// InFlight counts admitted requests without a final line, running or
	// queued. Subscriptions counts open subscriptions/listen streams and
	// subscribed legacy resource URIs, as the cap does.
	InFlight, Subscriptions int
	// Requests counts the request lines received so far, over every
	// instance of the session (the daemon's daemon.initialize_timeout).
	Requests int64
	// Restarts counts the times the session was restarted after a failure.
	Restarts int
	// BytesIn and BytesOut count what crossed the device, over every
	// instance of the session (BytesIn as the session's reader read it).
	BytesIn, BytesOut int64
}

// Stats returns the session's current figures. It may be called from any
// goroutine, before, during and after Serve.
func (s *Session) Stats() Stats {
	return Stats{
		ID:            s.id,
		Kind:          s.dev.Kind(),
		Peer:          s.dev.Peer(),
		Started:       s.started,
		Version:       s.rt.Negotiated(),
		ClientInfo:    s.rt.ClientInfo(),
		InFlight:      s.counters.InFlight(),
		Subscriptions: s.rt.Subscriptions(),
		Requests:      s.counters.Requests(),
		Restarts:      int(s.restarts.Load()),
		BytesIn:       s.bytesIn(),
		BytesOut:      s.dev.BytesOut(),
	}
}

// ID is the session's id, as New or Resume was given it. It may be called
// from any goroutine.
func (s *Session) ID() uint64 { return s.id }

// String names the session for logs: "session 12 (pty, pid 123)", or
// "session 12 (pipe)" when the peer is unknown.
func (s *Session) String() string {
	if pid := s.dev.Peer().PID; pid != 0 {
		return fmt.Sprintf("session %d (%s, pid %d)", s.id, s.dev.Kind(), pid)
	}
	return fmt.Sprintf("session %d (%s)", s.id, s.dev.Kind())
}

// bytesIn is what the session's reader has read from the device.
func (s *Session) bytesIn() int64 {
	s.mu.Lock()
	r := s.ownReader
	s.mu.Unlock()
	if r == nil {
		return 0
	}
	return r.BytesIn()
}
