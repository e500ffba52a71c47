package stdio

import (
	"math"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Fixed progress limits (docs/transport.md §10.2, §15).
const (
	maxProgressNotifications = 1000
	maxProgressMessageBytes  = 4096
	progressAckTimeout       = 5 * time.Second
)

// requestSink carries a request's progress reports (server.ProgressReporter,
// when it has a progressToken), its request-scoped notifications
// (server.Notifier) and, in a legacy request, its requests to the client
// (server.ClientRequester, clientrequest.go). Both run on the handler's goroutine and wait for the
// coordinator, which owns the sequence state and writes the notification.
// One report or notification may be outstanding at a time.
type requestSink struct {
	c     *coordinator
	w     *work
	token protocol.ID
	busy  atomic.Bool // a report is outstanding
	asked atomic.Bool // the handler sent a request to the client

	// Owned by the coordinator.
	count int
	last  float64
}

// Report implements server.ProgressReporter.
func (s *requestSink) Report(p server.Progress) error {
	if !finite(p.Progress) || p.HasTotal && !finite(p.Total) ||
		len(p.Message) > maxProgressMessageBytes || !utf8.ValidString(p.Message) {
		return server.ErrProgressInvalid
	}
	return s.send(message{kind: msgProgress, note: &note{progress: p}})
}

// Notify implements server.Notifier.
func (s *requestSink) Notify(method string, params any) error {
	return s.send(message{kind: msgNotify, note: &note{method: method, params: params}})
}

// send hands m to the coordinator and waits for it to be written or
// refused, at most progressAckTimeout.
func (s *requestSink) send(m message) error {
	if !s.busy.CompareAndSwap(false, true) {
		return server.ErrProgressBusy
	}
	reply := make(chan error, 1)
	m.note.sink, m.note.reply = s, reply
	if !s.c.mail.post(m) {
		s.busy.Store(false)
		return server.ErrProgressClosed
	}
	timer := time.NewTimer(progressAckTimeout)
	defer timer.Stop()
	select {
	case err := <-reply:
		s.busy.Store(false)
		return err
	case <-s.c.mail.done:
		s.busy.Store(false)
		select {
		case err := <-reply:
			return err
		default:
			return server.ErrProgressClosed
		}
	case <-timer.C:
		return server.ErrProgressTimeout // the slot stays held: later reports are busy
	}
}

type progressParams struct {
	Token    protocol.ID `json:"progressToken"`
	Progress float64     `json:"progress"`
	Total    *float64    `json:"total,omitempty"`
	Message  string      `json:"message,omitempty"`
}

// progress writes one report if its request is still in flight and the
// report keeps the sequence strictly increasing and within the cap.
func (c *coordinator) progress(s *requestSink, p server.Progress) error {
	if c.inflight[s.w.id] != s.w || s.w.state.Load() != live {
		return server.ErrProgressClosed
	}
	if s.count >= maxProgressNotifications {
		return server.ErrProgressLimit
	}
	if s.count > 0 && !(p.Progress > s.last) {
		return server.ErrProgressNotIncreasing
	}
	params := progressParams{Token: s.token, Progress: p.Progress, Message: p.Message}
	if p.HasTotal {
		params.Total = &p.Total
	}
	// Committed only while the request is live, and written before the
	// handler hears back, so it precedes the final frame (output).
	if !c.writeNotificationFor(s.w, "notifications/progress", params) {
		return server.ErrProgressClosed
	}
	s.count++
	s.last = p.Progress
	return nil
}

// notify writes a request-scoped notification if its request is still in
// flight.
func (c *coordinator) notify(s *requestSink, method string, params any) error {
	if c.inflight[s.w.id] != s.w || !c.writeNotificationFor(s.w, method, params) {
		return server.ErrProgressClosed
	}
	return nil
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
