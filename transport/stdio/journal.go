package stdio

import (
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Journal keeps, for an owner that must survive its own crash
// (docs/operations.md: the daemon under systemd keeps a record of each
// session in a memfd), the
// part of a connection's state that only the coordinator knows: the ids of
// the requests admitted and not yet answered, and the listen streams open.
//
// Its methods are called on the coordinator's goroutine, one instance at a
// time; they must be quick and must not block. An id is Answered once its
// final line has been written (not merely committed), or once it will get
// none (the client cancelled it, the connection ended): a crash between
// the write and Answered makes the successor answer it again, as lost,
// rather than leave it unanswered.
type Journal interface {
	// Admitted is told of a request the executor admitted.
	Admitted(id protocol.ID)
	// Answered is told when an admitted request needs nothing more.
	Answered(id protocol.ID)
	// Streams is told of the open listen streams whenever they change.
	Streams(open []server.ListenRecord)
}

// journalAdmit tells the journal of an admitted request.
func (c *coordinator) journalAdmit(id protocol.ID) {
	if c.journal != nil {
		c.journal.Admitted(id)
	}
}

// journalDone notes that an admitted request left the in-flight set:
// answered (its final line is committed; the journal hears of it once it
// is written) or not (it gets no line: the journal hears of it at once).
func (c *coordinator) journalDone(id protocol.ID, answered bool) {
	switch {
	case c.journal == nil:
	case answered:
		c.unjournaled = append(c.unjournaled, id)
	default:
		c.journal.Answered(id)
	}
}

// journalWritten tells the journal of the answers a successful write
// carried.
func (c *coordinator) journalWritten() {
	for _, id := range c.unjournaled {
		c.journal.Answered(id)
	}
	clear(c.unjournaled)
	c.unjournaled = c.unjournaled[:0]
}

// journalStreams tells the journal of the open listen streams.
func (c *coordinator) journalStreams() {
	if c.journal == nil {
		return
	}
	var open []server.ListenRecord
	for _, w := range c.inflight {
		if w.stream == nil {
			continue
		}
		if rec, ok := server.ListenRecordOf(w.stream); ok {
			open = append(open, rec)
		}
	}
	c.journal.Streams(open)
}

// journalEnd releases, at teardown, every id the journal still holds: the
// connection is over, and with it the record.
func (c *coordinator) journalEnd() {
	if c.journal == nil {
		return
	}
	for id, w := range c.inflight {
		if w.stream == nil {
			c.journal.Answered(id)
		}
	}
	c.journalWritten()
}
