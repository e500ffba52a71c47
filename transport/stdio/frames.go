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

// Frames are committed to c.out and written by flush. A frame committed
// while the coordinator handles a line or an outcome (c.lazy) may wait in
// c.out until the coordinator has nothing else ready, so frames that become
// ready together go out in one write; any other frame is written at once,
// together with those waiting before it. Either way frames never
// interleave or split, and nothing waits beyond maxBatch.

// commit ends a frame appended to c.out. After the first write failure
// nothing is written again (transport.md §11.4) and commit reports false.
func (c *coordinator) commit() bool {
	if c.lazy && len(c.out) < maxBatch {
		return c.failed == nil
	}
	return c.flush()
}

// flush writes the committed frames in one write, or reports false when
// the write path has failed, now or before.
func (c *coordinator) flush() bool {
	if c.failed != nil {
		return false
	}
	if len(c.out) == 0 {
		return true
	}
	if err := c.w.write(c.out); err != nil {
		// An abandoned write may still be reading the buffer.
		c.out = nil
		c.failed = err
		c.log.Warn("stdio output failed; ending the connection", "err", err)
		return false
	}
	if cap(c.out) <= maxBatch && len(c.inflight) > 0 {
		c.out = c.out[:0]
	} else {
		c.out = nil // an idle connection holds no buffer
	}
	if len(c.unjournaled) > 0 {
		c.journalWritten()
	}
	return true
}

func (c *coordinator) writeError(id protocol.ID, e *protocol.Error) bool {
	if c.failed != nil {
		return false
	}
	c.out = protocol.AppendError(c.out, id, e)
	return c.commit()
}

// writeResult writes a response; a result that cannot be encoded is
// replaced by "Server produced an invalid result".
func (c *coordinator) writeResult(id protocol.ID, result any) bool {
	if c.failed != nil {
		return false
	}
	if result == nil {
		c.log.Error("handler produced no result", "id", id)
		return c.writeError(id, protocol.ErrInvalidResult)
	}
	var err error
	// On failure the Append functions leave c.out as it was.
	if c.out, err = protocol.AppendResult(c.out, id, result); err != nil {
		c.log.Error("result cannot be encoded", "id", id, "err", err)
		return c.writeError(id, protocol.ErrInvalidResult)
	}
	return c.commit()
}

func (c *coordinator) writeNotification(method string, params any) bool {
	if c.failed != nil {
		return false
	}
	var err error
	if c.out, err = protocol.AppendNotification(c.out, method, params); err != nil {
		c.log.Error("notification cannot be encoded", "method", method, "err", err)
		return false
	}
	return c.commit()
}
