package stdio

import (
	"github.com/snodod/snodod/protocol"
)

// maxBatch bounds the frames a connection commits before writing them: once
// the pending frames reach it they are written at once. It is also the
// largest output buffer a busy connection keeps between writes; a bigger
// one (a large result) is dropped after its write, and so is any buffer
// once nothing is in flight, so an idle connection holds none.
const maxBatch = 64 << 10

// The coordinator's frames are encoded into c.scratch and committed to the
// shared output (output.go), where workers commit final frames too. A
// frame committed while the coordinator handles a line or an outcome
// (c.lazy) may wait until the coordinator has nothing else ready (or a
// worker writes it with its own), so frames that become ready together go
// out in one write; any other frame is written at once, together with
// those waiting before it. Either way frames never interleave or split,
// and nothing waits beyond maxBatch.

// commit commits the frame in c.scratch, for the request w when it is not
// nil (final: its last frame), and writes what is pending unless c.lazy
// lets it wait. It reports false when nothing may be written: after the
// first write failure (docs/transport.md §11.4), or for a request that has
// ended.
//
// Past session.max_pending_output_bytes it writes what is pending first,
// within the write timeout (docs/transport.md §11.5): the coordinator never
// waits for room, it makes it, and meanwhile reads no more requests.
func (c *coordinator) commit(w *work, final bool) bool {
	var ok bool
	for {
		var r int
		if w != nil {
			r = c.out.commitFor(w, c.scratch, final)
		} else {
			r = c.out.commit(c.scratch)
		}
		if r == crowded && c.flush() {
			continue
		}
		ok = r == committed
		break
	}
	c.scratch = c.scratch[:0]
	if cap(c.scratch) > maxBatch || len(c.inflight) == 0 {
		c.scratch = nil // an idle connection holds no buffer
	}
	if !ok {
		c.noteFailure()
		return false
	}
	if n, _ := c.out.waiting(); c.lazy && n < maxBatch {
		return true
	}
	return c.flush()
}

// flush writes the committed frames, or reports false when the write path
// has failed, now or before.
func (c *coordinator) flush() bool {
	if !c.out.flush() {
		c.noteFailure()
		return false
	}
	if len(c.inflight) == 0 {
		c.out.release() // an idle connection holds no buffer
	}
	if len(c.unjournaled) > 0 {
		c.journalWritten()
	}
	return true
}

// noteFailure records the output's terminal failure, if there is one.
func (c *coordinator) noteFailure() {
	if c.failed != nil {
		return
	}
	if err := c.out.err(); err != nil {
		c.failed = err
		c.log.Warn("stdio output failed; ending the connection", "err", err)
	}
}

func (c *coordinator) writeError(id protocol.ID, e *protocol.Error) bool {
	return c.writeErrorFor(nil, id, e)
}

// writeErrorFor writes an error line, as w's final frame when w is set.
func (c *coordinator) writeErrorFor(w *work, id protocol.ID, e *protocol.Error) bool {
	if c.failed != nil {
		return false
	}
	c.scratch = protocol.AppendError(c.scratch[:0], id, e)
	return c.commit(w, w != nil)
}

// writeResult writes a response; a result that cannot be encoded is
// replaced by "Server produced an invalid result".
func (c *coordinator) writeResult(id protocol.ID, result any) bool {
	return c.writeResultFor(nil, id, result)
}

// writeResultFor writes a response, as w's final frame when w is set.
func (c *coordinator) writeResultFor(w *work, id protocol.ID, result any) bool {
	if c.failed != nil {
		return false
	}
	frame, ok := encodeResult(c.scratch[:0], id, result, c, nil)
	if !ok {
		return c.writeErrorFor(w, id, protocol.ErrInvalidResult)
	}
	c.scratch = frame
	return c.commit(w, w != nil)
}

// encodeResult appends a response frame to dst, its large texts spliced
// into sp when sp is not nil, or reports false (logged) when result is nil
// or cannot be encoded.
func encodeResult(dst []byte, id protocol.ID, result any, c *coordinator, sp *protocol.Splices) ([]byte, bool) {
	if result == nil {
		c.log.Error("handler produced no result", "id", id)
		return dst, false
	}
	frame, err := protocol.AppendResultSpliced(dst, id, result, sp)
	if err != nil {
		c.log.Error("result cannot be encoded", "id", id, "err", err)
		return dst, false
	}
	return frame, true
}

func (c *coordinator) writeNotification(method string, params any) bool {
	return c.writeNotificationFor(nil, method, params)
}

// writeNotificationFor writes a notification, as one of w's frames when w
// is set (nothing is written once w has ended).
func (c *coordinator) writeNotificationFor(w *work, method string, params any) bool {
	if c.failed != nil {
		return false
	}
	frame, err := protocol.AppendNotification(c.scratch[:0], method, params)
	if err != nil {
		c.log.Error("notification cannot be encoded", "method", method, "err", err)
		return false
	}
	c.scratch = frame
	return c.commit(w, false)
}
