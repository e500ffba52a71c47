package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/session"
)

// beginHandshake counts an accepted connection in handshakes, unless the
// drain has begun. Adding under mu, and never once closing is set, keeps
// every Add before the drain's Wait, as sync.WaitGroup requires.
func (d *Daemon) beginHandshake() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return false
	}
	d.handshakes.Add(1)
	return true
}

// acceptor is the suture service that accepts connections on one listener.
type acceptor struct {
	d *Daemon
	l *listener
}

func (a *acceptor) String() string { return a.l.name + " listener " + a.l.path }

// Serve accepts until ctx ends. Running out of descriptors or memory is
// transient: it backs off and goes on, as net/http.Server does, instead of
// spinning; a client that waits meanwhile is told the daemon is out of
// descriptors (fdlimit.go). Any other error ends the service, and the
// supervisor restarts it on the same listener.
func (a *acceptor) Serve(ctx context.Context) error {
	// A deadline in the past interrupts a blocked Accept without closing
	// the listener, which a restarted acceptor would still need.
	stop := context.AfterFunc(ctx, func() { _ = a.l.ln.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	var delay time.Duration
	for {
		c, err := a.l.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("%s closed: %w", a, suture.ErrDoNotRestart)
			}
			if fdShortage(err) {
				a.d.fdShortage()
				if a.acceptShort() {
					delay = 0
					continue
				}
			}
			if transientAcceptError(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				if !fdShortage(err) { // said once per shortage, by fdShortage
					a.d.log.Warn("accept failed; retrying", "socket", a.l.name, "error", err, "in", delay)
				}
				select {
				case <-time.After(delay):
					continue
				case <-ctx.Done():
					return nil
				}
			}
			return fmt.Errorf("accept on %s: %w", a.l.path, err)
		}
		delay = 0
		a.serve(c)
	}
}

// serve hands an accepted connection to its handler, unless the drain has
// begun.
func (a *acceptor) serve(c *net.UnixConn) {
	if !a.d.beginHandshake() {
		// Accepted as the drain began: a control client is answered as
		// the drain answers (answerWhileDraining takes over the
		// listener), a session client is not served.
		if a.l.name == "control" {
			a.d.late.Add(1)
			go func() {
				defer a.d.late.Done()
				a.d.serveDraining(c)
			}()
			return
		}
		c.Close()
		return
	}
	if a.l.name == "control" {
		go a.d.serveControl(c)
	} else {
		go a.d.serveConn(c)
	}
}

// acceptShort is Accept at the descriptor limit: a client waiting (within
// a moment) is accepted with the spare descriptor, then served if a
// descriptor was freed meanwhile, else refused with one line. It reports
// whether a client was taken.
func (a *acceptor) acceptShort() bool {
	if !clientWaiting(a.l.ln, 100*time.Millisecond) {
		return false
	}
	c, served, err := a.d.spare.acceptWithSpare(a.l.ln)
	if err != nil {
		return false
	}
	if served {
		a.serve(c)
		return true
	}
	a.d.fdRefusal(a.l.name)
	if a.l.name == "control" {
		b, _ := json.Marshal(control.Reply{Error: outOfFDsText("the daemon is")})
		refuseNow(c, append(b, '\n'))
	} else {
		refuseNow(c, refusalLine(errOutOfFDs()))
	}
	return true
}

func transientAcceptError(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serveConn makes a session of a connection to the session socket, or
// refuses it with one line.
func (d *Daemon) serveConn(c *net.UnixConn) {
	defer d.handshakes.Done()
	peer, err := peerCred(c)
	if err != nil {
		d.log.Warn("connection refused", "error", err)
		c.Close()
		return
	}
	id, g, refusal := d.admit(peer)
	if refusal != nil {
		d.log.Warn("connection refused", "peer_pid", peer.PID, "peer_uid", peer.UID, "reason", refusal.Message)
		refuse(c, refusal)
		return
	}
	// The session needs an *os.File: File duplicates the descriptor, and
	// the connection's own copy is closed once the device is made, so that
	// a client can still be told why none could be.
	f, err := c.File()
	var dev *session.Device
	if err == nil {
		dev, err = session.NewDevice(f, f, peer) // on error it closes f
	}
	if err != nil {
		d.unreserve(id)
		if fdShortage(err) {
			// At the limit a refusal must not hold its descriptor for
			// long (refuse waits up to a second for the client).
			d.fdShortage()
			d.fdRefusal("session")
			refuseNow(c, refusalLine(errOutOfFDs()))
			return
		}
		c.Close()
		d.log.Error("connection dropped", "error", err)
		return
	}
	c.Close()
	if _, err := d.start(id, g, dev, place{via: "socket"}, nil); err != nil {
		d.log.Error("connection dropped", "error", err)
		return
	}
	d.log.Info("session started", "session", id, "via", "socket", "peer_pid", peer.PID, "peer_uid", peer.UID)
}

// refuse writes the refusal line to c and closes it, within a second.
func refuse(c *net.UnixConn, e *protocol.Error) {
	writeAndClose(c, refusalLine(e), time.Second, time.Second)
}

// writeAndClose writes line to c, shuts down its writing side, and reads
// what the client sent (until it closes, 1 MiB, or readFor) before
// closing: closing a Unix socket with unread input makes the client's
// next read fail with ECONNRESET instead of returning the line and then
// end of file.
func writeAndClose(c *net.UnixConn, line []byte, writeBy, readFor time.Duration) {
	defer c.Close()
	_ = c.SetWriteDeadline(time.Now().Add(writeBy))
	if _, err := c.Write(line); err != nil {
		return
	}
	_ = c.CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(readFor))
	buf := make([]byte, 4096)
	for n := 0; n < 1<<20; {
		m, err := c.Read(buf)
		n += m
		if err != nil {
			return
		}
	}
}

// Bounds on what one client can hold (issue 20 item 11): at most
// daemon.max_sessions_per_uid sessions per uid, and a new session that
// sends no request within daemon.initialize_timeout is ended, so that
// idle connections cannot keep session places from others. Every refusal
// is counted by reason for `snodod status`.

// admission is the daemon's per-uid bookkeeping, guarded by Daemon.mu;
// the refusal counts have a lock of their own (they are counted where
// Daemon.mu may be held).
type admission struct {
	uidOf        map[uint64]int // the uid each counted session (or reservation) is charged to
	perUID       map[int]int
	firstRequest map[uint64]*time.Timer // daemon.initialize_timeout, until the session ends

	refusedMu sync.Mutex
	refused   map[string]int64
}

// countUIDLocked charges session id to uid.
func (d *Daemon) countUIDLocked(id uint64, uid int) {
	a := &d.adm
	if a.uidOf == nil {
		a.uidOf, a.perUID = map[uint64]int{}, map[int]int{}
	}
	a.uidOf[id] = uid
	a.perUID[uid]++
}

// uncountLocked releases what session id was charged, and its timer.
func (d *Daemon) uncountLocked(id uint64) {
	a := &d.adm
	if uid, ok := a.uidOf[id]; ok {
		delete(a.uidOf, id)
		if a.perUID[uid]--; a.perUID[uid] <= 0 {
			delete(a.perUID, uid)
		}
	}
	if t := a.firstRequest[id]; t != nil {
		t.Stop()
		delete(a.firstRequest, id)
	}
}

// refusal counts a client refused (or a session ended unused) for reason.
func (d *Daemon) refusal(reason string) {
	a := &d.adm
	a.refusedMu.Lock()
	if a.refused == nil {
		a.refused = map[string]int64{}
	}
	a.refused[reason]++
	a.refusedMu.Unlock()
}

// refusals returns the counts by reason since the start.
func (d *Daemon) refusals() map[string]int64 {
	a := &d.adm
	a.refusedMu.Lock()
	defer a.refusedMu.Unlock()
	return maps.Clone(a.refused) // nil until the first refusal
}

// watchFirstRequest ends s if it has sent no request within timeout of
// its start (daemon.initialize_timeout). A session resumed after an
// upgrade or a crash is not watched: it was in use before.
func (d *Daemon) watchFirstRequest(s *session.Session, timeout time.Duration) {
	id := s.ID()
	// Made under mu, so that the timer cannot fire before it is recorded.
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, live := d.sessions[id]; !live {
		return // it ended already
	}
	t := time.AfterFunc(timeout, func() {
		d.mu.Lock()
		_, live := d.adm.firstRequest[id]
		delete(d.adm.firstRequest, id)
		d.mu.Unlock()
		if !live || s.Stats().Requests > 0 {
			return
		}
		d.refusal("initialize_timeout")
		d.log.Warn("session ended: no request within daemon.initialize_timeout", "session", id, "timeout", timeout)
		s.Kill(fmt.Sprintf("no request within daemon.initialize_timeout (%s)", timeout))
	})
	if d.adm.firstRequest == nil {
		d.adm.firstRequest = map[uint64]*time.Timer{}
	}
	d.adm.firstRequest[id] = t
}
