package daemon

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/session"
)

// Admission and the life of a session: who may start one, the refusal line
// of one who may not, and the bookkeeping from start to end.

// Refusal lines, written to a client the daemon does not serve.
var errShuttingDown = &protocol.Error{Code: protocol.CodeInternalError, Message: "Server is shutting down"}

func capacityError(max int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInternalError,
		Message: fmt.Sprintf("Server session capacity exhausted (daemon.max_sessions = %d)", max)}
}

func uidCapacityError(max, uid int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInternalError,
		Message: fmt.Sprintf("Server session capacity exhausted (daemon.max_sessions_per_uid = %d, held by uid %d)", max, uid)}
}

func uidError(uid int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest,
		Message: fmt.Sprintf("Connection refused: uid %d is not allowed (daemon.allowed_uids)", uid)}
}

// refusalLine is the one JSON-RPC line a refused client gets.
func refusalLine(e *protocol.Error) []byte { return protocol.AppendError(nil, protocol.ID{}, e) }

// RefusalMessage reports whether line (with or without its newline) is the
// line the daemon writes to a client it refuses, before closing the
// connection (the uid is not allowed, daemon.max_sessions or
// daemon.max_sessions_per_uid is reached, or the daemon is draining), and
// returns the refusal's message. A session
// never writes such a line, so a relay can tell a refusal from a session
// by the first line it reads.
func RefusalMessage(line []byte) (string, bool) {
	var v struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(line, &v) != nil || v.JSONRPC != "2.0" || string(v.ID) != "null" || v.Error == nil {
		return "", false
	}
	m := v.Error.Message
	switch {
	case v.Error.Code == errShuttingDown.Code && m == errShuttingDown.Message,
		v.Error.Code == protocol.CodeInternalError && strings.HasPrefix(m, "Server session capacity exhausted (daemon.max_sessions"),
		v.Error.Code == protocol.CodeInvalidRequest && strings.HasPrefix(m, "Connection refused: uid "):
		return m, true
	}
	return "", false
}

// uidAllowed reports whether a peer with uid may use the daemon: the
// daemon's own uid, or one listed in daemon.allowed_uids. Root is not
// special: it can connect to any socket, so it too must be listed.
func uidAllowed(uid, self int, allowed []int) bool {
	return uid == self || slices.Contains(allowed, uid)
}

// admit decides whether a new session may start, and reserves its id: it
// returns the generation to start it with, or the refusal.
func (d *Daemon) admit(peer session.Peer) (uint64, *generation, *protocol.Error) {
	g := d.gen.Load()
	if !uidAllowed(peer.UID, d.uid, g.cfg.Daemon.AllowedUIDs) {
		d.refusal("uid")
		return 0, nil, uidError(peer.UID)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closing:
		d.refusal("draining")
		return 0, nil, errShuttingDown
	case len(d.sessions) >= g.limits.MaxSessions:
		d.refusal("capacity")
		return 0, nil, capacityError(g.limits.MaxSessions)
	case d.adm.perUID[peer.UID] >= g.limits.MaxSessionsPerUID:
		d.refusal("uid_capacity")
		return 0, nil, uidCapacityError(g.limits.MaxSessionsPerUID, peer.UID)
	}
	d.nextID++
	id := d.nextID
	d.sessions[id] = nil // reserved: counts against max_sessions
	d.countUIDLocked(id, peer.UID)
	return id, g, nil
}

// unreserve releases an id admit reserved for a session that did not start.
func (d *Daemon) unreserve(id uint64) {
	d.mu.Lock()
	delete(d.sessions, id)
	d.uncountLocked(id)
	d.mu.Unlock()
}

// start starts session id on dev, under the sessions supervisor, with the
// generation admit returned, serving at.view ("" the aggregated view,
// else an upstream passed through) to a client working in at.cwd; ctl is
// the control connection of the `snodod connect` that handed dev over
// (nil for a session socket connection). It must be called while the
// connection is counted in handshakes: the drain waits for those before it
// cancels the sessions, so no session is added to a stopped supervisor. On
// error (an unknown view) it closes dev and releases id.
func (d *Daemon) start(id uint64, g *generation, dev *session.Device, at place, ctl *net.UnixConn) (*session.Session, error) {
	var stored []*os.File
	if ctl != nil && d.store.enabled { // only a crash record needs it
		f, err := dupFile(ctl, "control connection")
		if err == nil {
			defer f.Close()
			stored = []*os.File{f}
		}
	}
	cfg, j, err := d.sessionConfig(id, g, at, append(dev.Files(), stored...), nil)
	if err != nil {
		dev.Close()
		d.unreserve(id)
		return nil, err
	}
	s := session.New(id, dev, cfg)
	d.enter(s, j, stored)
	d.watchFirstRequest(s, g.limits.InitializeTimeout)
	return s, nil
}

// place is where a session is served: how it came (via "socket" or
// "connect"), its view and its client's working directory, which an
// upgrade hands over with it.
type place struct{ via, view, cwd string }

// sessionConfig is the configuration of session id under generation g,
// served at at; files are its descriptors (the device's, then the control
// connection's), to identify in its crash record. Under systemd's
// descriptor store it has a crash record (journal.go), in a new memfd, or
// in jf, the one its predecessor kept (an upgrade, a crash). It records
// the place until the session is reaped.
func (d *Daemon) sessionConfig(id uint64, g *generation, at place, files []*os.File, jf *os.File) (session.Config, *journal, error) {
	disp, end, err := d.dispatcher(id, g, at.view, at.cwd)
	if err != nil {
		return session.Config{}, nil, err
	}
	j := d.openJournal(id, at, files, jf)
	d.mu.Lock()
	d.places[id] = at
	d.mu.Unlock()
	cfg := session.Config{
		Dispatcher: disp,
		Executor:   g.exec,
		Limits:     g.limits,
		LineBudget: d.budget,
		Logger:     d.log, // the session adds its id
		Ended: func(s *session.Session) {
			end()
			d.closeJournal(id, j, s)
			d.reap(id)
		},
	}
	if j != nil {
		cfg.Journal = j
	}
	return cfg, j, nil
}

// enter records a session made by sessionConfig and serves it: its crash
// record starts, and a new one is stored with the session's descriptors
// (ctl: the control connection's duplicate, if any).
func (d *Daemon) enter(s *session.Session, j *journal, ctl []*os.File) {
	id := s.ID()
	uid := s.Stats().Peer.UID // a resumed session was not admitted here
	d.mu.Lock()
	d.sessions[id] = s
	if _, counted := d.adm.uidOf[id]; !counted {
		d.countUIDLocked(id, uid)
	}
	d.mu.Unlock()
	if j != nil {
		j.attach(s)
		if j.fresh {
			d.store.store(fdStoreName(id), append(append(s.Files(), ctl...), j.f)...)
		}
	}
	d.serveSession(s)
}

// serveSession serves a session entered in d.sessions, under the sessions
// supervisor; reap forgets it when it ends.
func (d *Daemon) serveSession(s *session.Session) {
	d.reapers.Add(1)
	d.sessionsSup.Add(s)
	d.poke()
	d.fdRecovered()
}

// placeOf returns where session id is served.
func (d *Daemon) placeOf(id uint64) place {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.places[id]
}

// liveSessions returns the sessions that have started.
func (d *Daemon) liveSessions() []*session.Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	list := make([]*session.Session, 0, len(d.sessions))
	for _, s := range d.sessions {
		if s != nil { // nil: reserved by admit, not started yet
			list = append(list, s)
		}
	}
	return list
}

// reap forgets a session once it has ended; the session has closed its
// device and logged its end, with why, by then. The session calls it as it
// ends.
func (d *Daemon) reap(id uint64) {
	defer d.reapers.Done()
	d.mu.Lock()
	delete(d.sessions, id)
	delete(d.places, id)
	d.uncountLocked(id)
	d.mu.Unlock()
	d.poke()
}

// poke tells Run that the session count changed.
func (d *Daemon) poke() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// session returns session id, or nil.
func (d *Daemon) session(id uint64) *session.Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[id]
}
