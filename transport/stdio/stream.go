package stdio

import (
	"context"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// openStream starts a listen stream whose dispatch completed (docs/protocol.md
// §9.2): the acknowledgement first, then events one at a time.
func (c *coordinator) openStream(w *work, s server.Stream) {
	// Handing over, a stream opens as usual, to be handed over with the
	// rest (handoff.go).
	switch {
	case !c.phase.inputOpen() && !c.handoff:
		// Input ended before the stream opened: nothing is written (§12.1).
		s.Close(server.Disconnected, "")
		return
	case c.phase.shuttingDown() && !c.handoff:
		s.Close(server.ClosedByServer, "")
		c.writeError(w.id, protocol.ErrSessionClosed)
		return
	case !c.sess.AcquireSubscription():
		s.Close(server.Refused, "")
		c.writeError(w.id, protocol.ErrSubscriptionCap)
		return
	}
	// The acknowledgement is written, not only committed, before the first
	// event is asked for (§9.4).
	if !c.writeNotification("notifications/subscriptions/acknowledged", s.Ack()) || !c.flush() {
		c.sess.ReleaseSubscription()
		reason := server.OutputFailed
		if c.failed == nil {
			reason = server.Completed // the acknowledgement could not be encoded
			c.writeError(w.id, protocol.ErrSubscriptionFailed)
		}
		s.Close(reason, "")
		return
	}
	c.startStream(w, s)
}

// startStream registers an acknowledged stream and starts asking its
// source for events.
func (c *coordinator) startStream(w *work, s server.Stream) {
	ctx, cancel := context.WithCancel(context.Background())
	w.stream, w.cancel, w.next = s, cancel, make(chan struct{}, 1)
	c.inflight[w.id] = w
	c.streams++
	c.pumps.Add(1)
	go c.pump(ctx, w)
	c.journalStreams()
}

// pump asks the source for events and hands them to the coordinator, asking
// for the next only after the previous was written (§9.4).
func (c *coordinator) pump(ctx context.Context, w *work) {
	defer c.pumps.Done()
	for {
		ev, err := w.stream.Next(ctx)
		if ctx.Err() != nil {
			return
		}
		if !c.mail.post(message{kind: msgEvent, w: w, note: &note{event: ev, err: err}}) {
			return
		}
		if err != nil || ev.Done {
			return
		}
		select {
		case <-w.next:
		case <-ctx.Done():
			return
		}
	}
}

func (c *coordinator) streamEvent(w *work, ev server.Event, err error) {
	if c.inflight[w.id] != w {
		return // closed meanwhile
	}
	switch {
	case err != nil:
		c.log.Warn("subscription source failed", "id", w.id, "err", err)
		c.closeStream(w, server.Completed, err.Error())
		c.writeError(w.id, protocol.ErrSubscriptionFailed)
	case ev.Done:
		c.closeStream(w, server.Completed, "")
		c.writeResult(w.id, ev.Final)
	default:
		if c.writeNotification(ev.Method, ev.Params) {
			w.next <- struct{}{}
		} else if c.failed == nil {
			// An event that cannot be shaped fails the stream (§9.6).
			c.closeStream(w, server.Completed, "event cannot be encoded")
			c.writeError(w.id, protocol.ErrSubscriptionFailed)
		}
	}
}

// closeStream ends a listen stream: its id leaves the in-flight set and the
// source learns why. Nothing is written here.
func (c *coordinator) closeStream(w *work, reason server.CloseReason, detail string) {
	delete(c.inflight, w.id)
	c.streams--
	c.sess.ReleaseSubscription()
	w.cancel()
	w.stream.Close(reason, detail)
	c.journalStreams()
}

// ready is a closed channel: selecting on it proceeds at once.
var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// pollSession writes the legacy session's next waiting notification (a
// list change, a resource update), one per turn of the coordinator, each
// asked for only after the previous one was written (docs/protocol.md §9.4).
// With nothing waiting it keeps the channel that will say when to look
// again. Session-level notifications end at EOF (docs/transport.md §12.1).
func (c *coordinator) pollSession() {
	c.feedWake = nil
	if !c.phase.inputOpen() || c.failed != nil {
		return
	}
	ev, ok, wake := c.sess.Poll()
	if !ok {
		c.feedWake = wake
		return
	}
	if c.writeNotification(ev.Method, ev.Params) {
		c.feedWake = ready // more may be waiting: look again next turn
	}
}
