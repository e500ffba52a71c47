package oauth

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Login is an authorization-code login in progress (RFC 6749 §4.1 with
// PKCE S256, RFC 7636; the resource, RFC 8707; a loopback redirect,
// RFC 8252 §7.3): a listener on 127.0.0.1 waiting for the browser's
// redirect, and what checking that redirect needs: the state, the PKCE
// verifier and the issuer recorded before the browser was sent away
// (RFC 9207).
//
// Open URL in a browser (OpenBrowser), then Wait for the redirect; or,
// when the browser runs on another machine (an SSH session), have the
// person paste the URL the browser was sent to and give it to Complete.
// Close ends the listener; a Login is for one use.
type Login struct {
	// URL is the authorization URL to open.
	URL string
	// RedirectURI is where the authorization server sends the browser
	// back: http://127.0.0.1:PORT/callback.
	RedirectURI string

	a        *Authorizer
	d        *discovery
	cl       *client
	state    string
	verifier string
	scopes   []string
	dpop     bool
	srv      *http.Server

	once      sync.Once
	done      chan struct{}
	res       *LoginResult
	err       error
	closeOnce sync.Once
}

// LoginResult is what a login obtained. It holds no secret.
type LoginResult struct {
	Issuer      string
	Scopes      []string
	Expiry      time.Time
	Refreshable bool
	DPoP        bool
	Client      string // how the client identified itself: pre-registered, ...
}

func (r *LoginResult) String() string {
	s := "logged in at " + r.Issuer
	if len(r.Scopes) > 0 {
		s += ", scope " + joinScopes(r.Scopes)
	}
	if !r.Expiry.IsZero() {
		s += ", token valid for " + shortDuration(time.Until(r.Expiry))
	}
	if r.Refreshable {
		s += ", refreshable"
	} else {
		s += ", no refresh token"
	}
	if r.DPoP {
		s += ", DPoP-bound"
	}
	return s
}

// callbackPath is the loopback redirect's path.
const callbackPath = "/callback"

// BeginLogin starts a login: it takes the challenge of the request that
// found a login required (its scope, a step-up's included), else asks the
// server for one (a request without a token), finds its authorization
// server, identifies the client (registering it if need be), listens on
// 127.0.0.1 and returns the Login whose URL a person opens.
func (a *Authorizer) BeginLogin(ctx context.Context) (*Login, error) {
	if a.cfg.Grant == GrantClientCredentials {
		return nil, a.fail(ErrAuthorization, "this server uses the client credentials grant: there is nothing to log in to", nil)
	}
	a.mu.Lock()
	ch := a.loginCh
	a.mu.Unlock()
	if ch == nil {
		ch = a.probe(ctx)
	}
	d, err := a.discoverFor(ctx, ch)
	if err != nil {
		return nil, err
	}
	return a.beginLogin(ctx, d, a.selectScopes(d, ch))
}

// probe sends the server a request without a token and returns its
// challenge, nil when it does not answer 401 with one.
func (a *Authorizer) probe(ctx context.Context) *Challenge {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.server.String(), nil)
	if err != nil {
		return nil
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := a.http.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusUnauthorized {
		return nil
	}
	cs := ParseChallenges(resp.Header)
	if c := findChallenge(cs, "DPoP", "Bearer"); c != nil {
		return c
	}
	return nil
}

// beginLogin listens for the redirect, identifies the client for that
// redirect URI and builds the authorization URL.
func (a *Authorizer) beginLogin(ctx context.Context, d *discovery, scopes []string) (*Login, error) {
	ln, err := listenLoopback(a.redirectPortFor(d), a.cfg.RedirectPort != 0)
	if err != nil {
		return nil, a.fail(ErrAuthorization, "listening for the browser's redirect", err)
	}
	l := &Login{
		a:           a,
		d:           d,
		RedirectURI: "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port) + callbackPath,
		state:       randomString(32),
		verifier:    oauth2.GenerateVerifier(),
		scopes:      scopes,
		dpop:        a.useDPoP(d),
		done:        make(chan struct{}),
	}
	l.srv = &http.Server{Handler: l, ReadHeaderTimeout: 10 * time.Second}
	if l.cl, err = a.identify(ctx, d, l.RedirectURI); err != nil {
		ln.Close()
		return nil, err
	}
	cfg := oauth2.Config{
		ClientID:    l.cl.id,
		Endpoint:    oauth2.Endpoint{AuthURL: d.as.AuthorizationEndpoint},
		RedirectURL: l.RedirectURI,
		Scopes:      scopes,
	}
	opts := []oauth2.AuthCodeOption{
		oauth2.S256ChallengeOption(l.verifier),
		oauth2.SetAuthURLParam("resource", d.resource),
	}
	if l.dpop {
		a.mu.Lock()
		k, err := a.dpopLocked()
		a.mu.Unlock()
		if err != nil {
			ln.Close()
			return nil, a.fail(ErrAuthorization, "making a DPoP key", err)
		}
		// RFC 9449 §10: bind the code to the key.
		opts = append(opts, oauth2.SetAuthURLParam("dpop_jkt", k.jkt))
	}
	l.URL = cfg.AuthCodeURL(l.state, opts...)
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// listenLoopback listens on 127.0.0.1:port, or on any free port when port
// is busy and not required.
func listenLoopback(port int, required bool) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil && port != 0 && !required {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	return ln, err
}

// ServeHTTP answers the browser's redirect: a redirect for another login
// (another state) is refused and the wait goes on; this one completes the
// login, and the page says how it went.
func (l *Login) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != callbackPath {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	if q.Get("state") != l.state {
		http.Error(w, "This is not the login in progress (its state does not match).", http.StatusBadRequest)
		return
	}
	res, err := l.finish(q)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "<!doctype html><title>Login failed</title><p>The login to %s failed: %s</p>", html.EscapeString(l.a.name), html.EscapeString(err.Error()))
		return
	}
	fmt.Fprintf(w, "<!doctype html><title>Logged in</title><p>%s: %s. You can close this page.</p>", html.EscapeString(l.a.name), html.EscapeString(res.String()))
}

// Wait waits for the browser's redirect and returns the login's outcome.
func (l *Login) Wait(ctx context.Context) (*LoginResult, error) {
	select {
	case <-l.done:
		return l.res, l.err
	case <-ctx.Done():
		return nil, l.a.fail(ErrAuthorization, "no redirect from the browser", ctx.Err())
	}
}

// Complete completes the login with the URL the browser was redirected
// to, pasted by a person (or its query alone).
func (l *Login) Complete(ctx context.Context, redirected string) (*LoginResult, error) {
	redirected = strings.TrimSpace(redirected)
	q, err := redirectQuery(redirected)
	if err != nil {
		return nil, l.a.fail(ErrAuthorization, "the pasted text is not the redirect URL", nil)
	}
	if q.Get("state") != l.state {
		return nil, l.a.fail(ErrAuthorization, "the pasted URL is not from this login (its state does not match)", nil)
	}
	res, err := l.finish(q)
	if err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	default:
		return res, nil
	}
}

// redirectQuery reads the query of a pasted redirect URL.
func redirectQuery(s string) (url.Values, error) {
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexByte(s, '#'); i >= 0 {
		s = s[:i]
	}
	q, err := url.ParseQuery(s)
	if err != nil || (q.Get("code") == "" && q.Get("error") == "") {
		return nil, errors.New("no code or error")
	}
	return q, nil
}

// Close stops listening for the redirect, letting the page that answers
// a redirect in progress reach the browser (for up to a few seconds).
func (l *Login) Close() error {
	l.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if l.srv.Shutdown(ctx) != nil {
			_ = l.srv.Close()
		}
	})
	return nil
}

// finish completes the login once, whichever of the loopback redirect and
// a pasted URL comes first; a second completion gets the first's outcome.
func (l *Login) finish(q url.Values) (*LoginResult, error) {
	l.once.Do(func() {
		l.res, l.err = l.complete(q)
		close(l.done)
	})
	return l.res, l.err
}

// complete checks the authorization response and exchanges its code.
func (l *Login) complete(q url.Values) (*LoginResult, error) {
	a, as := l.a, l.d.as
	// RFC 9207 §2.4 as MCP applies it: a present iss must be the issuer
	// recorded, by simple string comparison and without normalization;
	// an absent one is refused when the server said it sends iss. On a
	// mismatch nothing of the response is acted on or shown, not even
	// its error.
	if q.Has("iss") {
		if iss := q.Get("iss"); iss != as.Issuer {
			return nil, a.fail(ErrAuthorization, fmt.Sprintf("the authorization response comes from issuer %q, not %q (RFC 9207): refused", iss, as.Issuer), nil)
		}
	} else if as.AuthorizationResponseIssParameterSupported {
		return nil, a.fail(ErrAuthorization, "the authorization response has no iss although "+as.Issuer+" says it sends one (RFC 9207): refused", nil)
	}
	if e := q.Get("error"); e != "" {
		reason := "the authorization server refused: " + printable(e, 64)
		if d := q.Get("error_description"); d != "" {
			reason += ": " + printable(d, 200)
		}
		return nil, a.fail(ErrAuthorization, reason, nil)
	}
	code := q.Get("code")
	if code == "" {
		return nil, a.fail(ErrAuthorization, "the authorization response has no code", nil)
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.cfg.RequestTimeout)
	defer cancel()
	t, err := a.exchangeCode(ctx, l.d, l.cl, code, l.verifier, l.RedirectURI, l.scopes, l.dpop)
	if err != nil {
		return nil, a.fail(ErrAuthorization, "exchanging the authorization code", err)
	}
	a.mu.Lock()
	clear(a.exhausted) // a new authorization: scopes may be obtainable now
	a.mu.Unlock()
	if err := a.adopt(t, l.scopes); err != nil {
		return nil, err
	}
	a.log.Info("oauth: logged in", "server", a.name, "issuer", as.Issuer, "client", l.cl.source, "scope", joinScopes(t.Scope), "refreshable", t.RefreshToken != "", "dpop", t.isDPoP())
	return &LoginResult{
		Issuer:      as.Issuer,
		Scopes:      t.Scope,
		Expiry:      t.Expiry,
		Refreshable: t.RefreshToken != "",
		DPoP:        t.isDPoP(),
		Client:      l.cl.source,
	}, nil
}
