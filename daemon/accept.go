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
	if !a.d.sessions.beginHandshake() {
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
	defer d.sessions.endHandshake()
	peer, err := peerCred(c)
	if err != nil {
		d.log.Warn("connection refused", "error", err)
		c.Close()
		return
	}
	e, g, refusal := d.admit(peer, place{via: "socket"})
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
		d.sessions.reap(e)
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
	if err := d.startSession(e, g, dev, nil); err != nil {
		d.log.Error("connection dropped", "error", err)
		return
	}
	d.log.Info("session started", "session", e.id, "via", "socket", "peer_pid", peer.PID, "peer_uid", peer.UID)
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

// Bounds on what one client can hold (docs/security.md, "What one client
// cannot do to the others"): at most daemon.max_sessions_per_uid sessions
// per uid, and a new session that sends no request within
// daemon.initialize_timeout is ended, so that idle connections cannot keep
// session places from others. Every refusal is counted by reason for `snodod
// status`.

// refusals counts, by reason, the clients refused and the sessions ended
// unused.
type refusals struct {
	mu     sync.Mutex
	counts map[string]int64
}

// refusal counts a client refused (or a session ended unused) for reason.
func (d *Daemon) refusal(reason string) {
	r := &d.refusedBy
	r.mu.Lock()
	if r.counts == nil {
		r.counts = map[string]int64{}
	}
	r.counts[reason]++
	r.mu.Unlock()
}

// refusals returns the counts by reason since the start.
func (d *Daemon) refusals() map[string]int64 {
	r := &d.refusedBy
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.counts) // nil until the first refusal
}

// watchFirstRequest ends s, e's session, if it has sent no request within
// timeout of its start (daemon.initialize_timeout). A session resumed
// after an upgrade or a crash is not watched: it was in use before.
func (d *Daemon) watchFirstRequest(e *entry, s *session.Session, timeout time.Duration) {
	d.sessions.arm(e, timeout, func() {
		if !d.sessions.disarm(e) || s.Stats().Requests > 0 {
			return // it ended, or was used
		}
		d.refusal("initialize_timeout")
		d.log.Warn("session ended: no request within daemon.initialize_timeout", "session", e.id, "timeout", timeout)
		s.Kill(fmt.Sprintf("no request within daemon.initialize_timeout (%s)", timeout))
	})
}
