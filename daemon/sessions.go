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

// admit decides whether a new session of peer, to be served at at, may
// start, and reserves its entry: it returns the entry and the generation
// to start it with, or the refusal, counted.
func (d *Daemon) admit(peer session.Peer, at place) (*entry, *generation, *protocol.Error) {
	g := d.gen.Load()
	if !d.viewAllowed(g, at.view, peer.UID) {
		d.refusal("uid")
		if v := namedConfig(g, at.view); v != nil {
			rule := "daemon.allowed_uids"
			if len(v.AllowedUIDs) > 0 {
				rule = "views." + v.Name + ".allowed_uids"
			}
			return nil, nil, &protocol.Error{Code: protocol.CodeInvalidRequest,
				Message: fmt.Sprintf("Connection refused: uid %d may not open view %s (%s)", peer.UID, v.Name, rule)}
		}
		return nil, nil, uidError(peer.UID)
	}
	e, why := d.sessions.reserve(peer.UID, at, g.limits.MaxSessions, g.limits.MaxSessionsPerUID)
	var refused *protocol.Error
	switch why {
	case "":
		e.pid = peer.PID
		return e, g, nil
	case refusedDraining:
		refused = errShuttingDown
	case refusedCapacity:
		refused = capacityError(g.limits.MaxSessions)
	case refusedUIDCapacity:
		refused = uidCapacityError(g.limits.MaxSessionsPerUID, peer.UID)
	}
	d.refusal(string(why))
	return nil, nil, refused
}

// startSession starts the session of e, admitted, on dev, under the
// sessions supervisor, with the generation admit returned; ctl is the
// control connection of the `snodod connect` that handed dev over (nil
// for a session socket connection). It must be called while the
// connection is counted as a handshake: the drain waits for those before
// it cancels the sessions, so no session is added to a stopped
// supervisor. On error (an unknown view) it closes dev and reaps e.
func (d *Daemon) startSession(e *entry, g *generation, dev *session.Device, ctl *net.UnixConn) error {
	var stored []*os.File
	if ctl != nil && d.store.enabled { // only a crash record needs it
		f, err := dupFile(ctl, "control connection")
		if err == nil {
			defer f.Close()
			stored = []*os.File{f}
		}
	}
	cfg, err := d.sessionConfig(e, g, append(dev.Files(), stored...), nil)
	if err != nil {
		dev.Close()
		d.sessions.reap(e)
		return err
	}
	s := session.New(e.id, dev, cfg)
	d.serve(e, s, stored)
	d.watchFirstRequest(e, s, g.limits.InitializeTimeout)
	return nil
}

// sessionConfig is the configuration of e's session under generation g;
// files are its descriptors (the device's, then the control
// connection's), to identify in its crash record. Under systemd's
// descriptor store it has a crash record (journal.go), in a new memfd, or
// in jf, the one its predecessor kept (an upgrade, a crash). The session
// reaps e when it ends. It takes ownership of jf.
func (d *Daemon) sessionConfig(e *entry, g *generation, files []*os.File, jf *os.File) (session.Config, error) {
	srv, caller, g, end, err := d.open(e, g)
	if err != nil {
		if jf != nil {
			jf.Close()
		}
		return session.Config{}, err
	}
	d.openJournal(e, files, jf)
	cfg := session.Config{
		Dispatcher: srv,
		Caller:     caller,
		Executor:   g.exec,
		Limits:     g.limits,
		Budget:     d.budget,
		Logger:     d.log, // the session adds its id
		Ended: func(s *session.Session) {
			end()
			d.closeJournal(e, s)
			d.sessions.reap(e)
		},
	}
	if e.journal != nil {
		cfg.Journal = e.journal
	}
	return cfg, nil
}

// serve records s as e's session and serves it, under the sessions
// supervisor: its crash record starts, and a new one is stored with the
// session's descriptors (ctl: the control connection's duplicate, if
// any). The session reaps e when it ends.
func (d *Daemon) serve(e *entry, s *session.Session, ctl []*os.File) {
	d.sessions.start(e, s)
	if j := e.journal; j != nil {
		j.attach(s)
		if j.fresh {
			d.store.store(fdStoreName(e.id), append(append(s.Files(), ctl...), j.f)...)
		}
	}
	d.sessionsSup.Add(s)
	d.fdRecovered()
}

// poke tells Run that the session count changed.
func (d *Daemon) poke() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}
