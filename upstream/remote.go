package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/mcpclient/oauth"
)

// A remote server (an mcpServers entry with url, docs/upstreams.md §9) is
// an upstream whose instances are connections instead of processes: the
// same lifecycle (start is connect and probe, restart and backoff when the
// connection is lost, idle stop closes the session, health pings), one
// http.Transport per upstream so that every instance and every restart
// reuses its connections, and one oauth.Authorizer per upstream: one
// login, one token, one refresh, for every client.

// remote is an upstream's means of reaching its server, made at the first
// need and kept while the upstream lives (a reload that changes the
// entry makes a new upstream, and a new remote). One that could not be
// made (a CA file or a secret not readable yet) is tried again at the next
// need.
type remote struct {
	mu    sync.Mutex
	made  bool
	base  *http.Transport
	authz *oauth.Authorizer
	http  mcpclient.HTTP

	// elicited is the login in progress asked of clients (loginelicit.go),
	// nil when none.
	loginMu  sync.Mutex
	elicited *elicitedLogin
}

// remoteOf returns u's remote, making it once; the error says what of
// the entry could not be used (a CA file, a client secret, a key).
func (u *upstream) remoteOf() (*remote, error) {
	r := u.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.made {
		if err := r.make(u); err != nil {
			return nil, err
		}
		r.made = true
	}
	return r, nil
}

func (r *remote) make(u *upstream) error {
	cfg := u.conf()
	rc := cfg.Remote
	base, err := mcpclient.NewHTTPTransport(rc.TLSCAFile)
	if err != nil {
		return err
	}
	oc, err := oauthConfig(u.name, rc, u.m.oauthStore(), &http.Client{Transport: base})
	if err != nil {
		return err
	}
	oc.Logger = u.m.log
	authz, err := oauth.New(oc)
	if err != nil {
		return err
	}
	header := http.Header{}
	for k, v := range rc.Headers {
		header.Set(k, v)
	}
	r.base, r.authz = base, authz
	r.http = mcpclient.HTTP{URL: rc.URL, SSE: rc.SSE, Header: header, Client: &http.Client{Transport: authz.Transport(base)}}
	return nil
}

// close ends a renewal in progress and the idle connections.
func (r *remote) close() {
	r.loginMu.Lock()
	if el := r.elicited; el != nil {
		el.end(errors.New("the server's configuration was replaced, or the daemon is shutting down"))
	}
	r.loginMu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.authz != nil {
		_ = r.authz.Close()
	}
	if r.base != nil {
		r.base.CloseIdleConnections()
	}
}

// oauthConfig is the Authorizer configuration of a remote entry: its
// client's identity (the secret or the key read from their files), the
// token store, and an HTTP client of the entry's TLS roots for the
// authorization server.
func oauthConfig(name string, rc *config.Remote, store *oauth.Store, hc *http.Client) (oauth.Config, error) {
	o := rc.OAuth
	grant, err := oauth.ParseGrant(o.Grant)
	if err != nil {
		return oauth.Config{}, err
	}
	oc := oauth.Config{
		Name: name, ServerURL: rc.URL, Store: store, HTTPClient: hc,
		ClientID: o.ClientID, ClientMetadataURL: o.ClientMetadataURL, Grant: grant,
		SigningAlg: o.SigningAlg, KeyID: o.KeyID, DPoP: o.DPoP, Scopes: o.Scopes,
		RedirectPort: o.RedirectPort, AllowInsecureHTTP: rc.AllowInsecureHTTP,
	}
	if o.ClientSecretFile != "" {
		b, err := os.ReadFile(o.ClientSecretFile)
		if err != nil {
			return oauth.Config{}, fmt.Errorf("oauth.client_secret_file: %w", err)
		}
		oc.ClientSecret = strings.TrimSpace(string(b))
	}
	if o.PrivateKeyFile != "" {
		b, err := os.ReadFile(o.PrivateKeyFile)
		if err != nil {
			return oauth.Config{}, fmt.Errorf("oauth.private_key_file: %w", err)
		}
		if oc.PrivateKey, err = oauth.ParsePrivateKey(b); err != nil {
			return oauth.Config{}, fmt.Errorf("oauth.private_key_file %s: %w", o.PrivateKeyFile, err)
		}
	}
	return oc, nil
}

// oauthStore is the token store of the remote servers, StateDir/oauth
// (one file per server, mode 0600); nil (tokens in memory) without a
// state directory or when it cannot be made (logged once).
func (m *Manager) oauthStore() *oauth.Store {
	m.storeOnce.Do(func() {
		if m.opts.StateDir == "" {
			return
		}
		s, err := oauth.OpenStore(filepath.Join(m.opts.StateDir, "oauth"))
		if err != nil {
			m.log.Error("cannot open the token store of remote servers; their tokens stay in memory", "err", err)
			return
		}
		m.store = s
	})
	return m.store
}

// transport is how an instance reaches its server: the remote one, or
// its command with the upstream's stderr ring and the daemon's group
// record.
func (in *instance) transport(spawned func(pid int)) (mcpclient.Transport, error) {
	if in.u.conf().Remote != nil {
		r, err := in.u.remoteOf()
		if err != nil {
			return nil, err
		}
		return r.http, nil
	}
	cmd := in.cmd
	cmd.Stderr, cmd.Spawned = in.u.ring, spawned
	cmd.Sandboxed = func(r sandbox.Report) { // mcpclient logs what is missing
		in.mu.Lock()
		in.sandboxReport = &r
		in.mu.Unlock()
	}
	if rec := in.u.m.GroupRecord(); rec != nil { // not a nil *GroupRecord in the interface
		cmd.Record = rec
	}
	return cmd, nil
}

// isRemote reports whether u is a remote server.
func (u *upstream) isRemote() bool { return u.conf().Remote != nil }

// loginRequired reports whether err says a person must log in to the
// server first.
func loginRequired(err error) bool { return errors.Is(err, oauth.ErrLoginRequired) }

// loginHint is what a request to a server that needs a login is told.
func loginHint(name string) string {
	return fmt.Sprintf("snodod: upstream %q needs a login: run snodod login %s (a person authorizes snodod in a browser, once for every client)", name, name)
}

// remoteFailure is the failure of a call a remote server did not answer
// with a JSON-RPC message (an HTTP status, an authorization that failed):
// an isError result for tools/call, an error for other methods, with the
// state's detail.
func (in *instance) remoteFailure(err error) *failure {
	var e *mcpclient.RemoteError
	errors.As(err, &e)
	if e.LoginRequired() {
		f := in.failureNow(CodeUnavailable, loginHint(in.u.name))
		f.login = true
		return f
	}
	return in.failureNow(CodeUnavailable, fmt.Sprintf("snodod: upstream %q: %s", in.u.name, e.Message))
}

// AuthStatus is the authorization of a remote server as status shows it:
// "ok (expires in 52m)", "login required", "refresh failed: <reason>";
// "" for a server that has not asked for one, or is not remote.
func (u *upstream) authStatus() string {
	if !u.isRemote() {
		return ""
	}
	r, err := u.remoteOf()
	if err != nil {
		return "unusable: " + err.Error()
	}
	st := r.authz.Status()
	if st.State == oauth.StateNone {
		return ""
	}
	return st.String()
}

// remoteUpstream returns the remote server called name, or an error that
// says why there is none.
func (m *Manager) remoteUpstream(name string) (*upstream, *remote, error) {
	u := m.upstream(name)
	switch {
	case u == nil:
		return nil, nil, m.unknown(name)
	case !u.isRemote():
		return nil, nil, fmt.Errorf("upstream %q is not a remote server (it has no url): it needs no login", name)
	}
	r, err := u.remoteOf()
	if err != nil {
		return nil, nil, fmt.Errorf("upstream %q: %w", name, err)
	}
	return u, r, nil
}

// Login begins a login to the remote server name (snodod login): its
// authorization server found, the client identified (registered if need
// be), a loopback listener for the browser's redirect. The caller shows
// the Login's URL, waits for it or completes it with a pasted redirect,
// closes it, and then calls LoggedIn.
func (m *Manager) Login(ctx context.Context, name string) (*oauth.Login, error) {
	_, r, err := m.remoteUpstream(name)
	if err != nil {
		return nil, err
	}
	return r.authz.BeginLogin(ctx)
}

// LoggedIn takes a completed login: the instances of name that could not
// start without one start again at once.
func (m *Manager) LoggedIn(name string) {
	u := m.upstream(name)
	if u == nil {
		return
	}
	u.remote.loginDone()
	u.each(func(in *instance) {
		in.mu.Lock()
		waiting := in.loginNeeded && (in.state == StateFailed || in.state == StateBackoff)
		in.mu.Unlock()
		if waiting {
			in.send(orderRestart)
		}
	})
}

// Logout forgets the remote server's tokens, revoking them first where
// its authorization server offers it (snodod logout); revoked says
// whether it did. Its next request needs a login.
func (m *Manager) Logout(ctx context.Context, name string) (revoked bool, err error) {
	_, r, err := m.remoteUpstream(name)
	if err != nil {
		return false, err
	}
	return r.authz.Logout(ctx)
}
