package stdio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/internal/cancelled"
)

// phase is where a connection is in its life (docs/transport.md §12). It only
// moves forward, by two events that may come in either order: the end of
// input (EOF, a read error, a reader panic) and the start of a shutdown
// (Serve's ctx ends). A failed write ends the connection from any phase
// (coordinator.failed, §11.4); a failed coordinator is abandoned
// (abandon).
type phase uint8

const (
	// serving: reading lines and admitting requests.
	serving phase = iota
	// inputEnded: reading has stopped; admitted requests finish and
	// their lines are written; then Serve returns (§12.1).
	inputEnded
	// closing: a shutdown has begun while input is still open: requests
	// that arrive are answered "Session closed by server", admitted ones
	// may finish within the grace period (§12.4).
	closing
	// closingInputEnded: both.
	closingInputEnded
)

// inputOpen reports whether lines are still read.
func (p phase) inputOpen() bool { return p == serving || p == closing }

// shuttingDown reports whether a shutdown has begun.
func (p phase) shuttingDown() bool { return p >= closing }

// endInput is the phase after the end of input.
func (p phase) endInput() phase {
	if p.shuttingDown() {
		return closingInputEnded
	}
	return inputEnded
}

// shutdown is the phase after a shutdown begins.
func (p phase) shutdown() phase {
	if p.inputOpen() {
		return closing
	}
	return closingInputEnded
}

func (p phase) String() string {
	return [...]string{"serving", "input ended", "closing", "closing, input ended"}[p]
}

// shutdownLinger is how long a shutting-down connection with nothing in
// flight keeps reading, so requests already on their way are answered
// "Session closed by server" (docs/transport.md §12.4 step 2) instead of
// finding the connection gone. Each line read restarts it; the grace
// period still bounds the whole shutdown.
const shutdownLinger = 25 * time.Millisecond

// ErrKilled, as the cause of Serve's context (context.WithCancelCause),
// ends the connection as a shutdown does but without the grace period:
// what is admitted is cancelled and answered "Session closed by server" at
// once. Serve then returns nil, as after a shutdown.
var ErrKilled = errors.New("session killed")

// ErrSessionFailed is returned by Serve when the coordinator itself failed
// (a panic): the device is still good, and a new Transport with the same
// Reader and State continues on it.
var ErrSessionFailed = errors.New("session coordinator failed")

// settle publishes the load and reports whether the connection is done:
// input ended and nothing is admitted. Shutting down with nothing admitted
// while input is open, it lingers instead, to answer the lines the client
// already sent ("Session closed by server") before handing the device
// back, rather than leaving them unread.
func (c *coordinator) settle() (done bool) {
	c.sweep()
	if c.handoff {
		return c.handoffDone()
	}
	if c.phase == serving || len(c.inflight) > 0 {
		return false
	}
	if !c.phase.inputOpen() {
		return true
	}
	if c.linger == nil {
		c.linger = time.NewTimer(shutdownLinger)
	}
	return false
}

// endInput handles EOF (§12.1): reading stops, listen streams close
// silently, admitted requests continue. Requests to the client fail at
// once: it can no longer answer them.
func (c *coordinator) endInput() {
	c.phase = c.phase.endInput()
	c.out.setEager() // from now on each request's end is awaited
	c.feedWake = nil
	for _, w := range c.inflight {
		if w.stream != nil {
			c.closeStream(w, server.Disconnected, "")
		}
	}
	c.failClientRequests(errClientInputEnded)
}

// shutdown begins the daemon shutdown of §12.4: listen streams are ended
// with notifications/cancelled, new requests are refused, admitted ones may
// finish within the grace period, which is none when ctx was cancelled
// with ErrKilled.
func (c *coordinator) shutdown(ctx context.Context) {
	if errors.Is(context.Cause(ctx), ErrHandOver) {
		c.beginHandoff(c.upgrade)
		return
	}
	c.phase = c.phase.shutdown()
	c.out.setEager()
	grace := c.grace
	if errors.Is(context.Cause(ctx), ErrKilled) {
		grace = 0
	}
	c.graceEnd = time.NewTimer(grace)
	for _, w := range c.inflight {
		if w.stream == nil || c.failed != nil {
			continue
		}
		c.announceStreamClosed(w.id)
		c.closeStream(w, server.ClosedByServer, "")
	}
}

// expire ends the grace period: what is still admitted is cancelled and
// answered "Session closed by server".
func (c *coordinator) expire() {
	if c.handoff {
		c.expireHandoff()
		return
	}
	c.endAdmitted(false)
}

// abandon ends a failed instance before the device is handed on
// (docs/transport.md §12.4): listen streams get notifications/cancelled,
// admitted requests get "Session closed by server", and the requests they
// had sent to the client are cancelled.
func (c *coordinator) abandon(cause any) error {
	c.lazy = false
	c.flushAll()
	c.endAdmitted(true)
	c.flushAll()
	if c.failed != nil {
		return c.failed
	}
	return fmt.Errorf("%w: %v", ErrSessionFailed, cause)
}

// endAdmitted cancels everything admitted and answers each request
// "Session closed by server"; a listen stream is told first with
// notifications/cancelled when announce is set (a restart; at the end of
// the grace period streams were told when the shutdown began).
func (c *coordinator) endAdmitted(announce bool) {
	for id, w := range c.inflight {
		if c.failed != nil {
			break
		}
		delete(c.inflight, id)
		if w.stream != nil {
			if announce {
				c.announceStreamClosed(id)
			}
			c.closeStream(w, server.ClosedByServer, "")
			continue
		}
		c.answerAdmitted(w, protocol.ErrSessionClosed)
	}
}

// answerAdmitted cancels the admitted request w, already out of the
// in-flight set, and answers it e, unless its final frame was committed
// already.
func (c *coordinator) answerAdmitted(w *work, e *protocol.Error) {
	if w.state.Load() != live {
		return
	}
	c.exec.Cancel(w.id)
	c.journalDone(w.id, true)
	c.cancelClientRequestsOf(w)
	c.writeErrorFor(w, w.id, e)
	c.out.end(w, dropped) // if the write path failed meanwhile
}

// announceStreamClosed tells the client that the server ended the listen
// stream id (notifications/cancelled).
func (c *coordinator) announceStreamClosed(id protocol.ID) {
	c.writeNotification("notifications/cancelled", cancelled.Params{RequestID: id, Reason: cancelled.SubscriptionClosed})
}

// teardown runs when the coordinator returns, on every path.
func (c *coordinator) teardown() {
	c.out.close()
	c.mail.close()
	c.exec.CancelAll()
	for _, w := range c.inflight {
		if w.stream != nil {
			c.closeStream(w, server.Disconnected, "")
		}
	}
	c.sweep() // the journal hears of what workers answered
	c.journalEnd()
	clear(c.inflight)
	c.failClientRequests(errClientRequestClosed)
	c.out.w.Close()
	c.pumps.Wait()
	c.publishEnd()
}
