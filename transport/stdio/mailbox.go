package stdio

import (
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/server"
)

// mailbox carries everything that reaches the coordinator besides lines:
// outcomes, progress reports, request-scoped notifications, stream events
// and requests to the client. Posting never blocks (docs/architecture.md
// §3.4): an
// executor worker that delivers an outcome to a connection whose writer is
// stuck must not wait on it, or that worker, and the next queued job it was
// already handed (perhaps another connection's), would wait for the write
// timeout too. The queue needs no bound of its own: each admitted request
// posts one outcome and at most one report or client request at a time,
// and each stream one event at a time, so the executor's limits and the
// connection's subscription cap bound it.
//
// The coordinator takes every waiting message at once when wake fires.
// Senders that wait for an answer (progress, client requests) wait on
// their own reply channel and on done, never on the mailbox.
type mailbox struct {
	wake chan struct{} // 1-buffered: the queue became non-empty
	done chan struct{} // closed when the coordinator has returned

	mu     sync.Mutex
	queue  []message
	closed bool
}

func newMailbox() mailbox {
	return mailbox{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

type messageKind uint8

const (
	msgOutcome       messageKind = iota // w.outcome is ready
	msgProgress                         // note carries a progress report
	msgNotify                           // note carries a request-scoped notification
	msgEvent                            // note carries a stream event
	msgClientRequest                    // call is to be sent to the client
	msgClientCancel                     // call's handler stopped waiting
	msgWake                             // the output needs the coordinator (see nudge)
)

// message is small, since the mailbox holds one per waiting outcome: what
// only the rarer kinds carry is behind note and call.
type message struct {
	kind messageKind
	w    *work
	note *note
	call *clientCall
}

// note is a progress report, a request-scoped notification or a stream
// event.
type note struct {
	sink     *requestSink
	progress server.Progress
	method   string
	params   any
	reply    chan error
	event    server.Event
	err      error

	// wait is a report's or notification's: noteWaiting until the
	// coordinator answers it or its sender stops waiting (requestSink.send).
	wait atomic.Uint32
}

// post queues m for the coordinator, or reports false once the
// coordinator has returned (m's request is gone with the connection).
func (b *mailbox) post(m message) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.queue = append(b.queue, m)
	first := len(b.queue) == 1
	b.mu.Unlock()
	if first {
		select {
		case b.wake <- struct{}{}:
		default: // a wake is already pending
		}
	}
	return true
}

// take returns every queued message, leaving spare (emptied) as the queue,
// so that two slices alternate and a busy connection does not allocate.
func (b *mailbox) take(spare []message) []message {
	b.mu.Lock()
	defer b.mu.Unlock()
	got := b.queue
	b.queue = spare[:0]
	return got
}

// close makes post refuse, and closes done. It is called once, by the
// coordinator on its way out.
func (b *mailbox) close() {
	b.mu.Lock()
	b.closed = true
	b.queue = nil
	b.mu.Unlock()
	close(b.done)
}

// maxSpareMessages bounds the message slice a connection keeps between
// turns; a bigger one (after a burst of outcomes) is dropped.
const maxSpareMessages = 64

// handleMail handles every message in the mailbox, in the order posted.
func (c *coordinator) handleMail() {
	msgs := c.mail.take(c.spare)
	for i := range msgs {
		c.handleMessage(msgs[i])
		msgs[i] = message{}
	}
	switch {
	case cap(msgs) > maxSpareMessages:
		c.spare = nil
	case len(c.inflight) == 0:
		c.spare = nil // an idle connection holds no buffer
	default:
		c.spare = msgs[:0]
	}
}

func (c *coordinator) handleMessage(m message) {
	switch m.kind {
	case msgOutcome:
		c.lazy = true
		c.complete(m.w, m.w.outcome)
		c.lazy = false
	case msgProgress:
		m.note.answer(c.progress(m.note.sink, m.note.progress))
	case msgNotify:
		m.note.answer(c.notify(m.note.sink, m.note.method, m.note.params))
	case msgEvent:
		c.streamEvent(m.w, m.note.event, m.note.err)
	case msgClientRequest:
		c.sendClientRequest(m.call)
	case msgClientCancel:
		c.cancelClientRequest(m.call)
	case msgWake:
		// The loop then sweeps, and writes what workers could not.
		c.out.nudged.Store(false)
		c.noteFailure()
	}
}

// nudge wakes the coordinator for the output (a worker's write that would
// block or failed, or a request it ended while the coordinator waits for
// them): once, however many workers ask before it looks.
func (c *coordinator) nudge() {
	if c.out.nudged.CompareAndSwap(false, true) {
		c.mail.post(message{kind: msgWake})
	}
}

// sweep takes the requests workers finished out of the in-flight set.
func (c *coordinator) sweep() {
	if !c.out.hasFinished.Load() {
		return
	}
	got := c.out.takeFinished(c.swept)
	for i, w := range got {
		if c.inflight[w.id] == w {
			delete(c.inflight, w.id)
		}
		c.journalDone(w.id, true)
		got[i] = nil
	}
	if len(c.unjournaled) > 0 {
		c.flush() // the journal hears once they are written
	}
	if cap(got) <= maxSpareMessages && len(c.inflight) > 0 {
		c.swept = got[:0]
	} else {
		c.swept = nil // an idle connection holds no list
	}
}
