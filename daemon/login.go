package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/mcpclient/oauth"
	"github.com/snodod/snodod/session"
)

// Logins to remote servers run in the daemon (docs/upstreams.md §9): it
// holds the servers' tokens, so that one login serves every client, and
// the instances waiting for it start at once when it completes. `snodod
// login` is its front: it shows the URL, opens the browser, and passes on
// a pasted redirect; the daemon's loopback listener takes the browser's.

// loginSetup bounds a login's first step (discovery, registration) and a
// logout (a revocation).
const loginSetup = time.Minute

// ownUIDOnly refuses a login or logout from another user than the
// daemon's: it acts on the accounts of the daemon's user.
func (d *Daemon) ownUIDOnly(c *net.UnixConn, peer session.Peer, what string) bool {
	if peer.UID == d.uid {
		return true
	}
	reply(c, control.Reply{Error: fmt.Sprintf("only uid %d, the daemon's, may %s: the tokens are its user's", d.uid, what)})
	return false
}

// serveLogin runs one login: its URL to the client, then its outcome when
// the browser's redirect reaches the listener, or when the client sends
// the pasted one; a client that leaves abandons it.
func (d *Daemon) serveLogin(c *net.UnixConn, req control.Request, peer session.Peer) {
	if !d.ownUIDOnly(c, peer, "log in") {
		return
	}
	setup, cancel := context.WithTimeout(context.Background(), loginSetup)
	login, err := d.ups.Login(setup, req.Name)
	cancel()
	if err != nil {
		reply(c, control.Reply{Error: err.Error()})
		return
	}
	defer login.Close()
	d.log.Info("login started", "upstream", req.Name, "by_pid", peer.PID)
	if !reply(c, control.Reply{OK: true, URL: login.URL}) {
		return
	}
	pasted := make(chan string, 1)
	gone := make(chan struct{})
	go func() { // ends when the connection closes
		b, err := bufio.NewReader(c).ReadBytes('\n')
		var r control.Request
		if err != nil || json.Unmarshal(b, &r) != nil || r.Redirect == "" {
			close(gone)
			return
		}
		pasted <- r.Redirect
	}()
	ctx, stop := context.WithTimeout(context.Background(), oauth.DefaultLoginTimeout)
	defer stop()
	type outcome struct {
		res *oauth.LoginResult
		err error
	}
	waited := make(chan outcome, 1)
	go func() {
		res, err := login.Wait(ctx)
		waited <- outcome{res, err}
	}()
	var o outcome
	select {
	case o = <-waited:
	case s := <-pasted:
		o.res, o.err = login.Complete(ctx, s)
	case <-gone:
		d.log.Info("login abandoned by its client", "upstream", req.Name)
		return
	case <-d.draining.Done():
		reply(c, control.Reply{Error: "the daemon is shutting down"})
		return
	}
	if o.err != nil {
		d.log.Warn("login failed", "upstream", req.Name, "err", o.err)
		reply(c, control.Reply{Error: o.err.Error()})
		return
	}
	d.ups.LoggedIn(req.Name)
	reply(c, control.Reply{OK: true, Result: o.res.String()})
}

// logout answers a logout.
func (d *Daemon) logout(c *net.UnixConn, req control.Request, peer session.Peer) {
	if !d.ownUIDOnly(c, peer, "log out") {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), loginSetup)
	defer cancel()
	revoked, err := d.ups.Logout(ctx, req.Name)
	var oe *oauth.Error
	switch {
	case errors.As(err, &oe):
		// The tokens are forgotten all the same.
		reply(c, control.Reply{OK: true, Result: "the tokens are forgotten, but revoking them failed: " + oe.Error()})
	case err != nil:
		reply(c, control.Reply{Error: err.Error()})
	default:
		reply(c, control.Reply{OK: true, Revoked: revoked})
	}
}
