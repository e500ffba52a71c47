// Package progress holds the rules of progress notifications that every
// transport applies the same way (docs/transport.md §10.2, §15): which
// reports are valid at all, and the per-request sequence (strictly
// increasing, at most MaxNotifications). How a report reaches the wire,
// and when it is acknowledged, stays with each transport.
package progress

import (
	"math"
	"time"
	"unicode/utf8"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Fixed progress limits (docs/transport.md §10.2, §15).
const (
	// MaxNotifications is how many progress notifications one request may
	// write; later reports get server.ErrProgressLimit.
	MaxNotifications = 1000
	// MaxMessageBytes is the longest message a report may carry.
	MaxMessageBytes = 4096
	// AckTimeout is how long a handler's report waits to be written or
	// refused before it gets server.ErrProgressTimeout. A transport that
	// knows its device would block does not wait that long: the stdio
	// one refuses at once then (docs/transport.md §10.2).
	AckTimeout = 5 * time.Second
)

// Check returns server.ErrProgressInvalid for a report no request may
// write (a progress or total that is not a finite number, a message over
// MaxMessageBytes or not UTF-8), and nil otherwise. It holds no state, so
// a handler's goroutine calls it before it hands the report on.
func Check(p server.Progress) error {
	if !finite(p.Progress) || p.HasTotal && !finite(p.Total) ||
		len(p.Message) > MaxMessageBytes || !utf8.ValidString(p.Message) {
		return server.ErrProgressInvalid
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// Params are the params of a notifications/progress.
type Params struct {
	Token    protocol.ID `json:"progressToken"`
	Progress float64     `json:"progress"`
	Total    *float64    `json:"total,omitempty"`
	Message  string      `json:"message,omitempty"`
}

// Sequence is one request's progress so far. The zero Sequence has
// written nothing. It is owned by the one goroutine that writes the
// request's notifications.
type Sequence struct {
	count int
	last  float64
}

// Next returns the params that write p for the request whose progress
// token is token, or why p may not be written next: server.ErrProgressLimit
// after MaxNotifications, server.ErrProgressNotIncreasing when p does not
// exceed the last written progress. The sequence moves on only by Written,
// once the notification is on its way, so a report that fails to be
// written does not count.
func (s *Sequence) Next(token protocol.ID, p server.Progress) (Params, error) {
	if s.count >= MaxNotifications {
		return Params{}, server.ErrProgressLimit
	}
	if s.count > 0 && !(p.Progress > s.last) {
		return Params{}, server.ErrProgressNotIncreasing
	}
	params := Params{Token: token, Progress: p.Progress, Message: p.Message}
	if p.HasTotal {
		params.Total = &p.Total
	}
	return params, nil
}

// Written records that p, accepted by Next, was written.
func (s *Sequence) Written(p server.Progress) {
	s.count++
	s.last = p.Progress
}
