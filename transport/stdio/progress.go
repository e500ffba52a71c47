package stdio

import (
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/internal/progress"
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

	seq progress.Sequence // owned by the coordinator
}

// Report implements server.ProgressReporter.
func (s *requestSink) Report(p server.Progress) error {
	if err := progress.Check(p); err != nil {
		return err
	}
	return s.send(message{kind: msgProgress, note: &note{progress: p}})
}

// Notify implements server.Notifier.
func (s *requestSink) Notify(method string, params any) error {
	return s.send(message{kind: msgNotify, note: &note{method: method, params: params}})
}

// The states of a note's wait (note.wait).
const (
	noteWaiting   uint32 = iota
	noteAnswered         // the coordinator answered it
	noteAbandoned        // its sender stopped waiting first
)

// send hands m to the coordinator and waits for it to be written or
// refused: at most progress.AckTimeout, and not at all while the
// connection's device would block (output.stalled), since then the client
// is not reading and only it can end the wait (docs/transport.md §10.2).
// A handler never waits on its client holding its executor slot: a report
// that cannot be written at once is left to the coordinator, which writes
// it when its turn comes (or drops it with its request), and the handler
// gets server.ErrProgressTimeout at once. Until the coordinator has
// handled it, later reports get server.ErrProgressBusy, also at once: one
// report at a time is outstanding, so a client that does not read costs
// its connection's mailbox one note per request.
func (s *requestSink) send(m message) error {
	if !s.busy.CompareAndSwap(false, true) {
		return server.ErrProgressBusy
	}
	reply := make(chan error, 1)
	m.note.sink, m.note.reply = s, reply
	stalled := s.c.out.stalled()
	if !s.c.mail.post(m) {
		s.busy.Store(false)
		return server.ErrProgressClosed
	}
	timer := time.NewTimer(progress.AckTimeout)
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
	case <-stalled:
	case <-timer.C:
	}
	if m.note.wait.CompareAndSwap(noteWaiting, noteAbandoned) {
		return server.ErrProgressTimeout // busy until the coordinator handles it (answer)
	}
	s.busy.Store(false) // answered meanwhile
	return <-reply
}

// answer is the coordinator's answer to a report or notification; when
// its sender stopped waiting (send), answer makes the request's next
// report possible again.
func (n *note) answer(err error) {
	n.reply <- err
	if !n.wait.CompareAndSwap(noteWaiting, noteAnswered) {
		n.sink.busy.Store(false)
	}
}

// progress writes one report if its request is still in flight and the
// report keeps the sequence strictly increasing and within the cap.
func (c *coordinator) progress(s *requestSink, p server.Progress) error {
	if c.inflight[s.w.id] != s.w || s.w.state.Load() != live {
		return server.ErrProgressClosed
	}
	params, err := s.seq.Next(s.token, p)
	if err != nil {
		return err
	}
	// Committed only while the request is live, and written before the
	// handler hears back, so it precedes the final frame (output).
	if !c.writeNotificationFor(s.w, "notifications/progress", params) {
		return server.ErrProgressClosed
	}
	s.seq.Written(p)
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
