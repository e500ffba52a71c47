package daemon

import (
	"net"
	"sync"
	"time"

	"github.com/snodod/snodod/session"
)

// The session table: one entry per session id, from the admission that
// reserves it (or the resumption of a session a predecessor left) to the
// session's end. An entry holds what the daemon keeps per connection, as
// net/http.Server keeps it on its *conn: where the session is served, the
// uid it is charged to, its crash record, the control connection of the
// `snodod connect` waiting for its end, its first-request timer.
//
// An entry's life is reserve (or resume), then start, then reap; reap is
// the only way out of the table, and reaping twice is harmless. A reserved
// entry counts against daemon.max_sessions and daemon.max_sessions_per_uid
// as a started one does, so that admissions under way cannot overshoot
// them.

// entry is one session of the table. id, uid and at never change; the
// others are guarded by the table's lock, but s is set once, by start,
// and journal before start by the goroutine that starts the session: each
// may be read without the lock by whoever got the entry from started, or
// holds it since before start.
type entry struct {
	id  uint64
	uid int
	pid int // the peer's, when admitted (0 for a session resumed by an upgrade): the audit log's
	at  place

	journal *journal // the crash record; nil without systemd's store (crash.go)

	s            *session.Session // nil until start
	waiter       *net.UnixConn    // the control connection of the connect waiting for the end
	firstRequest *time.Timer      // daemon.initialize_timeout, until the first request
	reaped       bool
	gone         chan struct{} // closed by reap; made by reapedCh, for those who wait
}

// place is where a session is served: how it came (via "socket" or
// "connect"), its view and its client's working directory, which an
// upgrade hands over with it.
type place struct{ via, view, cwd string }

// table is the daemon's sessions. Its methods may be called from any
// goroutine.
type table struct {
	mu      sync.Mutex
	entries map[uint64]*entry
	perUID  map[int]int // entries by uid
	nextID  uint64      // the last id given
	closed  bool        // draining: nothing enters any more
	changed func()      // called, under mu, as an entry enters or leaves: it must not block; may be nil

	// unreaped counts the entries not yet reaped; handshakes the
	// connections accepted and not yet served (a session started, a
	// refusal, a control request answered), which may add entries. Every
	// Add of either is made under mu before closed is set, and close
	// comes before a drain's wait, as sync.WaitGroup requires.
	unreaped, handshakes sync.WaitGroup
}

func newTable(changed func()) *table {
	return &table{entries: map[uint64]*entry{}, perUID: map[int]int{}, changed: changed}
}

// refusal is why reserve refused an entry: the reason status counts it
// under (see Daemon.refusal), "" when it did not.
type refusal string

const (
	refusedDraining    refusal = "draining"
	refusedCapacity    refusal = "capacity"
	refusedUIDCapacity refusal = "uid_capacity"
)

// reserve makes the entry of a new session of a client of uid, served at
// at, under a new id: unless the table is closed, holds max entries, or
// maxPerUID of uid's.
func (t *table) reserve(uid int, at place, max, maxPerUID int) (*entry, refusal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
		return nil, refusedDraining
	case len(t.entries) >= max:
		return nil, refusedCapacity
	case t.perUID[uid] >= maxPerUID:
		return nil, refusedUIDCapacity
	}
	t.nextID++
	return t.addLocked(t.nextID, uid, at), ""
}

// resume makes the entry of a session a predecessor served as id (an
// upgrade's, a crash's): it was admitted there, so no limit applies. It
// returns nil when the table is closed or id is taken.
func (t *table) resume(id uint64, uid int, at place) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.entries[id] != nil {
		return nil
	}
	t.nextID = max(t.nextID, id)
	return t.addLocked(id, uid, at)
}

func (t *table) addLocked(id uint64, uid int, at place) *entry {
	e := &entry{id: id, uid: uid, at: at}
	t.entries[id] = e
	t.perUID[uid]++
	t.unreaped.Add(1)
	t.notify()
	return e
}

// newID returns an id no session has: the HTTP views' sessions, which are
// not the table's, share the id space (what a session holds on upstreams
// is by id).
func (t *table) newID() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nextID++
	return t.nextID
}

// lastID returns the last id given, for the successor of an upgrade.
func (t *table) lastID() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.nextID
}

// skipTo makes the next id given greater than id.
func (t *table) skipTo(id uint64) {
	t.mu.Lock()
	t.nextID = max(t.nextID, id)
	t.mu.Unlock()
}

// start records e's session, made and about to be served: e is not
// reaped yet, as only the session's end or a failure before start reaps
// it.
func (t *table) start(e *entry, s *session.Session) {
	t.mu.Lock()
	e.s = s
	t.mu.Unlock()
}

// reap takes e out of the table: its places are free, its timer stopped.
// Reaping an entry again does nothing.
func (t *table) reap(e *entry) {
	t.mu.Lock()
	if e.reaped {
		t.mu.Unlock()
		return
	}
	e.reaped = true
	delete(t.entries, e.id)
	if t.perUID[e.uid]--; t.perUID[e.uid] <= 0 {
		delete(t.perUID, e.uid)
	}
	if e.firstRequest != nil {
		e.firstRequest.Stop()
		e.firstRequest = nil
	}
	if e.gone != nil {
		close(e.gone)
	}
	t.notify()
	t.mu.Unlock()
	t.unreaped.Done()
}

// reapedCh returns a channel closed once e is reaped. A session handed
// over has ended by the time HandOver returns, but is reaped an instant
// later, on its own goroutine: what resumes it again as the same id
// (after a failed upgrade) waits for that.
func (t *table) reapedCh(e *entry) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.gone == nil {
		e.gone = make(chan struct{})
		if e.reaped {
			close(e.gone)
		}
	}
	return e.gone
}

func (t *table) notify() {
	if t.changed != nil {
		t.changed()
	}
}

// session returns the session of id, nil when none has started as id.
func (t *table) session(id uint64) *session.Session {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.entries[id]; e != nil {
		return e.s
	}
	return nil
}

// started returns the entries whose sessions have started (their s is
// set for good).
func (t *table) started() []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	list := make([]*entry, 0, len(t.entries))
	for _, e := range t.entries {
		if e.s != nil {
			list = append(list, e)
		}
	}
	return list
}

// len returns the number of entries, reserved ones included.
func (t *table) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// beginHandshake counts an accepted connection as a handshake, unless
// the table is closed.
func (t *table) beginHandshake() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.handshakes.Add(1)
	return true
}

// endHandshake ends a handshake beginHandshake counted.
func (t *table) endHandshake() { t.handshakes.Done() }

// awaitHandshakes waits until no connection is in its handshake; the
// caller has closed the table or stopped accepting, so that the ids given
// are final.
func (t *table) awaitHandshakes() { t.handshakes.Wait() }

// close refuses every entry and handshake from now on (the drain).
func (t *table) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// wait waits until every entry is reaped; close must have been called.
func (t *table) wait() { t.unreaped.Wait() }

// await records c as the control connection waiting for e's end, or
// forgets it (c nil).
func (t *table) await(e *entry, c *net.UnixConn) {
	t.mu.Lock()
	e.waiter = c
	t.mu.Unlock()
}

// waiterOf returns the control connection waiting for e's end, or nil.
func (t *table) waiterOf(e *entry) *net.UnixConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return e.waiter
}

// arm starts e's first-request timer: fire runs after timeout unless e
// is reaped (or disarmed) first.
func (t *table) arm(e *entry, timeout time.Duration, fire func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.reaped {
		return
	}
	// Made under mu, so that disarm finds it even if it fires at once.
	e.firstRequest = time.AfterFunc(timeout, fire)
}

// disarm stops e's first-request timer; it reports whether the timer was
// still armed (false once e is reaped).
func (t *table) disarm(e *entry) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	armed := e.firstRequest != nil
	if armed {
		e.firstRequest.Stop()
		e.firstRequest = nil
	}
	return armed
}
