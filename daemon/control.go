package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/session"
)

// The control socket's server side: the protocol, its wire types and its
// client are package control's (daemon/control/doc.go lists the ops).

// statusReply is a status request's answer: {"ok":true, <Status fields>}.
type statusReply struct {
	OK bool `json:"ok"`
	*control.Status
}

const (
	// requestTimeout bounds the wait for a request line.
	requestTimeout = 10 * time.Second
	// replyTimeout bounds the writing of one reply line.
	replyTimeout = 5 * time.Second
)

// serveControl answers one control connection.
func (d *Daemon) serveControl(c *net.UnixConn) {
	handshaking := true
	defer func() {
		if handshaking {
			d.sessions.endHandshake()
		}
	}()
	defer c.Close()
	// A drain waits at most drainingReadTimeout for a client that has not
	// sent its request yet, then answers it as the drain answers.
	stop := context.AfterFunc(d.draining, func() { _ = c.SetReadDeadline(time.Now().Add(drainingReadTimeout)) })
	line, files, err := readRequest(c, time.Now().Add(requestTimeout))
	if !stop() {
		// The drain began while this request was read: answer it as
		// the drain answers (status says "draining"), unless the client
		// sent nothing in time.
		if err != nil {
			closeFiles(files)
			reply(c, control.Reply{Error: "the daemon is shutting down"})
			return
		}
		d.answerDraining(c, line, files)
		return
	}
	if errors.Is(err, errPassedFDsLost) {
		d.fdShortage()
		d.fdRefusal("control")
		reply(c, control.Reply{Error: err.Error()})
		return
	}
	if err != nil {
		d.log.Warn("control request dropped", "error", err)
		reply(c, control.Reply{Error: err.Error()})
		return
	}
	req, peer, ok := d.admitRequest(c, line)
	if !ok || req.Op != control.OpConnect {
		closeFiles(files)
	}
	if !ok {
		return
	}
	switch req.Op {
	case control.OpConnect:
		e, ok := d.connect(c, req, files, peer)
		if !ok {
			return
		}
		// From here the connection waits for the session's end, which may
		// be after the drain has started: it counts as a waiter, not as a
		// handshake.
		d.waiters.Add(1)
		defer d.waiters.Done()
		d.sessions.endHandshake()
		handshaking = false
		d.awaitEnd(c, e)
	case control.OpStatus:
		reply(c, statusReply{OK: true, Status: d.Status()})
	case control.OpKill:
		reply(c, d.kill(req.Session, peer))
	case control.OpUpgrade:
		// An upgrade waits for every handshake: this one is over.
		d.sessions.endHandshake()
		handshaking = false
		d.upgradeFor(c, req, peer)
	case control.OpLogin:
		// A login waits for a person: a waiter, not a handshake.
		d.waiters.Add(1)
		defer d.waiters.Done()
		d.sessions.endHandshake()
		handshaking = false
		d.serveLogin(c, req, peer)
	case control.OpLogout:
		d.logout(c, req, peer)
	case control.OpApprove:
		reply(c, d.approve(req, peer))
	case control.OpDiff:
		reply(c, d.diff(req))
	case control.OpFault:
		reply(c, d.fault(req.Session))
	case control.OpUpstream:
		reply(c, d.upstreamOp(req))
	case control.OpLogs:
		// A follow may last: it counts as a waiter, not as a handshake
		// (an upgrade waits for the handshakes).
		d.waiters.Add(1)
		defer d.waiters.Done()
		d.sessions.endHandshake()
		handshaking = false
		d.serveLogs(c, req)
	default:
		reply(c, control.Reply{Error: fmt.Sprintf("unknown op %q; the ops are %s", req.Op, opList())})
	}
}

// opList names the ops for a refusal: "connect, status, … and fault".
func opList() string {
	ops := control.Ops
	return strings.Join(ops[:len(ops)-1], ", ") + " and " + ops[len(ops)-1]
}

// admitRequest checks the peer of a control connection (the daemon's uid
// or daemon.allowed_uids) and decodes its request line; a refusal is
// answered on c, and ok is false. The caller closes what was passed.
func (d *Daemon) admitRequest(c *net.UnixConn, line []byte) (req control.Request, peer session.Peer, ok bool) {
	peer, err := peerCred(c)
	if err != nil {
		reply(c, control.Reply{Error: err.Error()})
		return req, peer, false
	}
	if !uidAllowed(peer.UID, d.uid, d.Config().Daemon.AllowedUIDs) {
		d.log.Warn("control connection refused", "peer_pid", peer.PID, "peer_uid", peer.UID)
		reply(c, control.Reply{Error: uidError(peer.UID).Message})
		return req, peer, false
	}
	if err := json.Unmarshal(line, &req); err != nil {
		reply(c, control.Reply{Error: "request is not a JSON object: " + err.Error()})
		return req, peer, false
	}
	return req, peer, true
}

// connect starts a session on the descriptors a client passed, and answers
// with its id; on refusal it answers why and closes them.
func (d *Daemon) connect(c *net.UnixConn, req control.Request, files []*os.File, peer session.Peer) (*entry, bool) {
	if req.Relay {
		closeFiles(files)
		reply(c, control.Reply{Error: "relay is not served on the control socket; connect to the session socket (daemon.socket) instead"})
		return nil, false
	}
	if len(files) != 2 {
		closeFiles(files)
		reply(c, control.Reply{Error: fmt.Sprintf("connect needs 2 descriptors (standard input and output) sent with the request, got %d", len(files))})
		return nil, false
	}
	in, out := files[0], files[1]
	if err := d.ups.Has(req.View); err != nil {
		writeLineNow(out, refusalLine(&protocol.Error{Code: protocol.CodeInvalidRequest, Message: "snodod connect " + req.View + ": " + err.Error()}))
		closeFiles(files)
		reply(c, control.Reply{Error: err.Error()})
		return nil, false
	}
	e, g, refusal := d.admit(peer, place{via: "connect", view: req.View, cwd: req.Cwd})
	if refusal != nil {
		// The MCP client reads the passed standard output: it gets the
		// same line a socket client would.
		writeLineNow(out, refusalLine(refusal))
		closeFiles(files)
		d.log.Warn("connect refused", "peer_pid", peer.PID, "peer_uid", peer.UID, "reason", refusal.Message)
		reply(c, control.Reply{Error: refusal.Message})
		return nil, false
	}
	if sameFile(in, out) {
		out.Close()
		out = in
	}
	dev, err := session.NewDevice(in, out, peer) // on error it closes both
	if err != nil {
		d.sessions.reap(e)
		if fdShortage(err) {
			d.fdShortage()
			d.fdRefusal("control")
			reply(c, control.Reply{Error: outOfFDsText("the daemon is")})
			return nil, false
		}
		reply(c, control.Reply{Error: "cannot serve the passed descriptors: " + err.Error()})
		return nil, false
	}
	if err := d.startSession(e, g, dev, c); err != nil {
		reply(c, control.Reply{Error: err.Error()})
		return nil, false
	}
	d.log.Info("session started", "session", e.id, "via", "connect", "view", req.View, "peer_pid", peer.PID, "peer_uid", peer.UID)
	if !reply(c, control.Reply{OK: true, Session: e.id}) {
		d.log.Info("connect client left before its reply; the session goes on", "session", e.id)
		return nil, false
	}
	return e, true
}

// awaitEnd tells the client when its session ends. A client that leaves
// first (its control connection ends: the connect process exited or was
// killed) ends the session: whoever started `snodod connect` has lost its
// server, and a terminal it handed over must be restored and given back to
// the shell, which reads it next.
//
// A session handed over to a new daemon (an upgrade) has not ended for its
// client: the connection is passed on with it (waiterConn), and nothing is
// written here.
func (d *Daemon) awaitEnd(c *net.UnixConn, e *entry) {
	s := e.s // started
	d.sessions.await(e, c)
	defer d.sessions.await(e, nil)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = io.Copy(io.Discard, c)
	}()
	select {
	case <-s.Done():
		if s.Reason() == session.ReasonHandedOver {
			break
		}
		msg := ""
		if err := s.Err(); err != nil {
			msg = err.Error()
		}
		reply(c, control.Ended{Ended: true, Error: msg})
	case <-gone:
		d.log.Info("the connect process of a session left; ending the session", "session", e.id)
		s.Kill("its snodod connect process exited")
	case <-d.stopped:
	}
	c.Close()
	<-gone
}

// killWait bounds how long a kill request waits for its session's end
// (the transport answers what is in flight and closes at once; this only
// covers a device whose writes block).
const killWait = 10 * time.Second

// kill ends session id for `snodod kill` and answers once it has ended:
// its requests are cancelled, its device released, a terminal restored.
func (d *Daemon) kill(id uint64, peer session.Peer) control.Reply {
	return d.endSession(id, fmt.Sprintf("by snodod kill (pid %d)", peer.PID), fmt.Sprintf("snodod kill, pid %d uid %d", peer.PID, peer.UID))
}

// fault makes session id's coordinator fail once, as a bug would: a test
// hook for restarts (internal/faults), refused unless the process armed it
// (SNODOD_TEST_FAULTS=1).
func (d *Daemon) fault(id uint64) control.Reply {
	if !faults.Armed() {
		return control.Reply{Error: "fault injection is off; start the daemon with " + faults.EnvVar + "=1"}
	}
	s := d.sessions.session(id)
	if s == nil || !faults.Inject(s) {
		return control.Reply{Error: fmt.Sprintf("no session %d", id)}
	}
	return control.Reply{OK: true}
}

// waiterConn returns a duplicate of the control connection of the `snodod
// connect` waiting for the end of e's session, to pass on with the
// session; nil when none waits.
func (d *Daemon) waiterConn(e *entry) *os.File {
	c := d.sessions.waiterOf(e)
	if c == nil {
		return nil
	}
	f, err := dupFile(c, "control connection")
	if err != nil {
		d.log.Warn("the control connection of a session cannot be passed on", "session", e.id, "error", err)
		return nil
	}
	return f
}

// upgradeFor runs the upgrade a control client asked for, and answers it.
func (d *Daemon) upgradeFor(c *net.UnixConn, req control.Request, peer session.Peer) {
	if peer.UID != d.uid {
		reply(c, control.Reply{Error: fmt.Sprintf("only uid %d, the daemon's, may upgrade it (it runs the new binary as itself)", d.uid)})
		return
	}
	if req.Binary != "" && !filepath.IsAbs(req.Binary) {
		reply(c, control.Reply{Error: "the binary of an upgrade must be an absolute path, got " + req.Binary})
		return
	}
	d.log.Info("upgrade requested", "binary", req.Binary, "by_pid", peer.PID)
	done := make(chan struct{})
	defer close(done)
	pid, err := d.requestUpgrade(context.Background(), req.Binary, done)
	if err != nil {
		reply(c, control.Reply{Error: err.Error()})
		return
	}
	reply(c, control.Reply{OK: true, PID: pid})
}

// reply writes v as one JSON line; it reports whether the line was written.
func reply(c *net.UnixConn, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	_ = c.SetWriteDeadline(time.Now().Add(replyTimeout))
	_, err = c.Write(append(b, '\n'))
	_ = c.SetWriteDeadline(time.Time{})
	return err == nil
}
