package stdio

import (
	"errors"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// A connection handed to another process (docs/transport.md §12.4: a daemon
// upgrade; docs/operations.md) pauses instead of ending. Serve's ctx ends
// with ErrHandOver as its cause; then:
//
//  1. No line is read or handled any more: what the Reader holds, and what
//     the device still buffers, is the successor's (Reader.Detach).
//  2. Admitted requests go on and their lines are written, progress
//     included, for up to Limits.UpgradeGrace. Requests the handlers had
//     sent to the client are cancelled (its answer could not be read), and
//     a listen whose dispatch completes is opened, to be handed over too.
//  3. When nothing is admitted, or the grace ends, Serve returns a
//     *Handoff; requests still admitted at the end of the grace are
//     cancelled and answered -32603 "snodod restarted; this request was
//     cancelled". Open listen streams are closed without a line, and
//     their records (server.ListenRecord) are in the Handoff: the
//     successor reopens them (Transport.Resume), so the client keeps
//     receiving their events. A stream the records cannot describe gets
//     notifications/cancelled, as at a restart.
//
// A failed write still ends the connection at once (an *OutputError).

// ErrHandOver, as the cause of Serve's context (context.WithCancelCause),
// pauses the connection so that another process can continue it: see
// Handoff.
var ErrHandOver = errors.New("session handed over")

// errClientRestarting fails the requests to the client when the connection
// is handed over: its answer could not be read any more.
var errClientRestarting = errors.New("snodod is restarting; the client's answer cannot be read")

// Handoff is Serve's error after a hand-over (it matches ErrHandOver): the
// connection is paused, nothing is in flight, and its open listen streams
// are Streams. The device, the Reader and the State are as the owner gave
// them: the owner detaches the Reader and passes them on.
type Handoff struct {
	Streams []server.ListenRecord
}

func (*Handoff) Error() string { return "session handed over" }

// Is makes a *Handoff match ErrHandOver.
func (*Handoff) Is(target error) bool { return target == ErrHandOver }

// beginHandoff starts the pause of a hand-over.
func (c *coordinator) beginHandoff(grace time.Duration) {
	c.handoff = true
	c.phase = closingInputEnded // nothing more is read
	c.out.setEager()            // each request's end is awaited
	c.feedWake = nil
	c.graceEnd = time.NewTimer(grace)
	for _, call := range c.calls {
		c.forgetCall(call)
		c.announceCancel(call, "snodod is restarting")
		call.reply <- clientReply{err: errClientRestarting}
	}
}

// handoffDone reports whether the pause is over: nothing admitted is left
// but listen streams.
func (c *coordinator) handoffDone() bool { return len(c.inflight) == c.streams }

// expireHandoff ends the grace of a hand-over: the requests still admitted
// are cancelled and answered "snodod restarted; this request was
// cancelled". Listen streams stay, to be handed over.
func (c *coordinator) expireHandoff() {
	for id, w := range c.inflight {
		if c.failed != nil {
			return
		}
		if w.stream != nil {
			continue
		}
		delete(c.inflight, id)
		c.answerAdmitted(w, protocol.ErrRestartCancelled)
	}
}

// handedOff closes the open listen streams without a line, keeping their
// records, and returns the Handoff; or the output failure that ended the
// connection meanwhile.
func (c *coordinator) handedOff() error {
	h := &Handoff{}
	for _, w := range c.inflight {
		if w.stream == nil {
			continue
		}
		rec, ok := server.ListenRecordOf(w.stream)
		if ok {
			h.Streams = append(h.Streams, rec)
		} else {
			c.announceStreamClosed(w.id)
		}
		c.closeStream(w, server.ClosedByServer, "")
	}
	if !c.flush() {
		return c.failed
	}
	return h
}
