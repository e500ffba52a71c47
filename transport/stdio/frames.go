package stdio

import (
	"github.com/snodod/snodod/protocol"
)

// maxKeptBuffer is the largest encoding buffer a connection keeps between
// frames; a bigger one (a large result) is dropped after its write so an
// idle connection does not hold it.
const maxKeptBuffer = 64 << 10

// writeFrame hands one encoded frame to the writer. After the first failure
// nothing is written again (transport.md §11.4).
func (c *conn) writeFrame(frame []byte) bool {
	if c.failed != nil {
		return false
	}
	err := c.w.write(frame)
	if cap(frame) <= maxKeptBuffer {
		c.buf = frame[:0]
	} else {
		c.buf = nil
	}
	if err != nil {
		c.failed = err
		c.log.Warn("stdio output failed; ending the connection", "err", err)
		return false
	}
	return true
}

func (c *conn) writeError(id protocol.ID, e *protocol.Error) bool {
	return c.writeFrame(protocol.AppendError(c.buf[:0], id, e))
}

// writeResult writes a response; a result that cannot be encoded is
// replaced by "Server produced an invalid result".
func (c *conn) writeResult(id protocol.ID, result any) bool {
	if result == nil {
		c.log.Error("handler produced no result", "id", id)
		return c.writeError(id, protocol.ErrInvalidResult)
	}
	frame, err := protocol.AppendResult(c.buf[:0], id, result)
	if err != nil {
		c.log.Error("result cannot be encoded", "id", id, "err", err)
		return c.writeError(id, protocol.ErrInvalidResult)
	}
	return c.writeFrame(frame)
}

func (c *conn) writeNotification(method string, params any) bool {
	frame, err := protocol.AppendNotification(c.buf[:0], method, params)
	if err != nil {
		c.log.Error("notification cannot be encoded", "method", method, "err", err)
		return false
	}
	return c.writeFrame(frame)
}
