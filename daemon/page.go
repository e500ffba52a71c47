package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/daemon/statuspage"
	"github.com/snodod/snodod/mcpclient/oauth"
	"github.com/snodod/snodod/session"
)

// The status page on the admin listener (docs/observability.md, "Status
// page"): daemon/statuspage renders it from what `snodod status` shows,
// the metrics and the log ring; its buttons are the control ops of
// `snodod upstream restart`, `snodod kill`, `snodod approve` and `snodod
// login` (the browser sent on to the authorization URL; the loopback
// listener takes its redirect, as for the command).

// newPage makes the admin listener's status page; access is the
// listener's kind (its peers' uids found as the gate finds them), logins
// the page's logins under way.
func (d *Daemon) newPage(ac config.Admin, token string, access httpAccess, logins *pageLogins) *statuspage.Page {
	identify := identifier(access)
	return statuspage.New(statuspage.Options{
		Status: d.Status,
		Tools:  d.metrics.Tools,
		Logs:   d.logs.last,
		Restart: func(name string) error {
			r := d.upstreamOp(control.Request{Op: control.OpUpstream, Action: control.ActionRestart, Name: name})
			if !r.OK {
				return errors.New(r.Error)
			}
			return nil
		},
		Kill: func(id uint64) error {
			r := d.endSession(id, "by the status page", "status page")
			if !r.OK {
				return errors.New(r.Error)
			}
			return nil
		},
		Approve: func(name, tool string) ([]string, bool, error) {
			// The page checked who asks (Owner, or the token): the op's
			// own check is for the daemon's uid, which it stands for.
			r := d.approve(control.Request{Op: control.OpApprove, Name: name, Tool: tool}, session.Peer{UID: d.uid})
			if !r.OK {
				return nil, false, errors.New(r.Error)
			}
			return r.Approved, r.Released, nil
		},
		Diff: func(name string) (string, error) {
			r := d.diff(control.Request{Op: control.OpDiff, Name: name})
			if !r.OK {
				return "", errors.New(r.Error)
			}
			return r.Diff, nil
		},
		Login: func(name string) (string, error) { return d.pageLogin(logins, name) },
		Owner: func(r *http.Request) bool {
			c, _ := r.Context().Value(adminConnKey{}).(net.Conn)
			if c == nil || identify == nil {
				return false
			}
			p := identify(c)
			return p.Local && p.Err == nil && p.UID == d.uid
		},
		Token:        token,
		MaxViewers:   ac.MaxViewers,
		WriteTimeout: ac.ViewerWriteTimeout,
		Log:          d.log,
	})
}

// adminConnKey is the admin listener's connection in a request's
// context (serveAdmin's ConnContext), for Owner to find its peer's uid.
type adminConnKey struct{}

// pageLogin begins a login to remote server name for the status page, as
// the login op does, and returns its authorization URL; the login waits
// in the background for the browser's redirect to the loopback listener.
func (d *Daemon) pageLogin(logins *pageLogins, name string) (string, error) {
	setup, cancel := context.WithTimeout(d.draining, loginSetup)
	login, err := d.ups.Login(setup, name)
	cancel()
	if err != nil {
		return "", err
	}
	if err := logins.wait(name, login, d); err != nil {
		login.Close()
		return "", err
	}
	d.log.Info("login started", "upstream", name, "by", "status page")
	return login.URL, nil
}

// pageLogins are the logins the status page began and that wait for
// their redirect: one per server at most (a new one replaces it), each
// for oauth.DefaultLoginTimeout at most, all ended by close.
type pageLogins struct {
	mu      sync.Mutex
	pending map[string]*pendingLogin
	closed  bool
	wg      sync.WaitGroup
}

type pendingLogin struct {
	cancel   context.CancelFunc
	replaced bool // by a newer login to the same server (under mu)
}

// wait waits, on a goroutine of its own, for login's redirect, and takes
// the outcome as the login op does; it closes login when done.
func (l *pageLogins) wait(name string, login *oauth.Login, d *Daemon) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("the daemon is shutting down")
	}
	if l.pending == nil {
		l.pending = map[string]*pendingLogin{}
	}
	if old := l.pending[name]; old != nil {
		old.replaced = true // its URL is no longer the one shown
		old.cancel()
	}
	ctx, cancel := context.WithTimeout(d.draining, oauth.DefaultLoginTimeout)
	pl := &pendingLogin{cancel: cancel}
	l.pending[name] = pl
	l.wg.Go(func() {
		defer cancel()
		res, err := login.Wait(ctx)
		login.Close()
		l.mu.Lock()
		if l.pending[name] == pl {
			delete(l.pending, name)
		}
		replaced := pl.replaced
		l.mu.Unlock()
		switch {
		case err != nil && replaced:
			d.log.Info("login replaced by a newer one", "upstream", name, "by", "status page")
			return
		case err != nil:
			d.log.Warn("login failed", "upstream", name, "by", "status page", "err", err)
			return
		}
		d.ups.LoggedIn(name)
		d.log.Info("logged in", "upstream", name, "by", "status page", "result", res.String())
	})
	return nil
}

// count is the logins under way (tests).
func (l *pageLogins) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.pending)
}

// close ends the logins under way and waits for them.
func (l *pageLogins) close() {
	l.mu.Lock()
	l.closed = true
	for _, pl := range l.pending {
		pl.cancel()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// last returns the newest n lines of the ring, oldest first, without
// their line ends.
func (r *logRing) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	held := r.lines[r.head:]
	held = held[max(0, len(held)-n):]
	out := make([]string, len(held))
	for i, l := range held {
		out[i] = strings.TrimRight(string(l), "\n")
	}
	return out
}

// endSession ends session id, as `snodod kill` does, for reason (logged
// as by).
func (d *Daemon) endSession(id uint64, reason, by string) control.Reply {
	s := d.sessions.session(id)
	if s == nil {
		return control.Reply{Error: fmt.Sprintf("no session %d; 'snodod status' lists the sessions", id)}
	}
	d.log.Info("killing a session", "session", id, "by", by)
	s.Kill(reason)
	select {
	case <-s.Done():
		return control.Reply{OK: true, Session: id}
	case <-time.After(killWait):
		return control.Reply{Error: fmt.Sprintf("session %d is still ending after %v", id, killWait)}
	}
}
