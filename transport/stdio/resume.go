package stdio

import (
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Resume continues, in this process, a connection another process served
// (docs/transport.md §12.4): after an upgrade handed it over, or after a
// crash. The Transport's Reader continues the device's input (NewReaderFrom)
// and its State the runtime state (server.SessionState.Restore); Resume says
// what else the first instance does before it reads a line.
type Resume struct {
	// Lost are the ids of requests the previous process admitted and never
	// answered (it crashed): each is answered -32603 "snodod restarted;
	// this request was lost", first.
	Lost []protocol.ID
	// Streams are the listen streams the client has open: each is reopened
	// with its id and filter, without a second acknowledgement, and
	// delivers events from now on. One the Dispatcher cannot reopen (it
	// is no server.Resumer, or refuses the record) is ended with
	// notifications/cancelled "Subscription closed by server", as at a
	// restart; so is one beyond the subscription cap.
	Streams []server.ListenRecord
}

// resume does what r asks before the first line is read.
func (c *coordinator) resume(r *Resume) {
	for _, id := range r.Lost {
		c.writeError(id, protocol.ErrRestartLost)
	}
	lr, canResume := c.disp.(server.Resumer)
	for _, rec := range r.Streams {
		id, ok := protocol.ParseID(rec.ID)
		if !ok {
			c.log.Warn("a handed-over listen stream has no valid id; dropped", "id", string(rec.ID))
			continue
		}
		if _, dup := c.inflight[id]; dup {
			continue
		}
		var s server.Stream
		var err error
		if canResume {
			s, err = lr.ResumeListen(c.sess, rec)
		}
		switch {
		case !canResume || err != nil:
			c.log.Warn("a handed-over listen stream cannot be reopened; ending it", "id", id, "err", err)
		case !c.sess.AcquireSubscription():
			s.Close(server.Refused, "")
			c.log.Warn("a handed-over listen stream is beyond the subscription cap; ending it", "id", id)
		default:
			c.startStream(&work{id: id}, s)
			continue
		}
		c.announceStreamClosed(id)
	}
	c.flush()
}

// Restore sets the request count of Counters that continue another
// process's (see Resume). Call it before Serve.
func (c *Counters) Restore(requests int64) { c.requests.Store(requests) }
