package oauth

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// refreshMargin is how long before its expiry a refreshable token is
// renewed (half its lifetime for shorter-lived ones), so that requests
// rarely meet a 401.
const refreshMargin = time.Minute

// Authorizer holds the authorization of one MCP server: its tokens, the
// registrations and metadata behind them, and the state `status` shows.
// Requests use it through Transport; a CLI logs in with BeginLogin and out
// with Logout.
//
// An Authorizer is safe for concurrent use. However many requests need a
// new token at once, one renewal runs (a refresh, a client-credentials
// request, or an interactive login) and the others wait for it and share
// its outcome; a refresh the authorization server refuses puts the server
// in the login-required state, where requests fail at once with
// ErrLoginRequired (they never loop on the authorization server) until a
// login completes, in this process or, through the Store, in another.
// Close ends a renewal in progress.
type Authorizer struct {
	cfg    Config
	name   string
	server *url.URL
	http   *http.Client
	log    *slog.Logger
	signer crypto.Signer
	alg    string
	now    func() time.Time
	ctx    context.Context // the renewals', ended by Close
	cancel context.CancelFunc
	saveMu sync.Mutex // orders the record's writes

	mu        sync.Mutex
	rec       *record
	stamp     stamp // of the record file last read or written
	disc      *discovery
	flight    *flight
	state     State
	reason    string
	retryAt   time.Time // no refresh before, after one failed
	backoff   time.Duration
	exhausted map[string]bool // challenged scope sets a step-up could not obtain
	nonces    map[string]string
	dpopKey   *dpopKey
	sawDPoP   bool // the server challenged with the DPoP scheme
	// loginCh is the challenge of the request that found a login
	// required, for the login begun later (BeginLogin): its scope is the
	// one to ask for. nil once a token serves.
	loginCh *Challenge
}

// flight is one renewal, which every request needing it waits for.
type flight struct {
	done chan struct{}
	tok  *token
	err  error
}

// need says why a request needs a new token.
type need struct {
	used      string     // the access token the request carried, "" for none
	challenge *Challenge // of the 401 or 403; nil for a proactive refresh
	stepUp    bool       // 403 insufficient_scope: the challenge's scopes are missing
	proactive bool       // the token is about to expire
}

// New returns the Authorizer of one server, with what its Store holds.
func New(cfg Config) (*Authorizer, error) {
	cfg = cfg.withDefaults()
	server, err := url.Parse(cfg.ServerURL)
	if err != nil || !server.IsAbs() || server.Host == "" || (server.Scheme != "http" && server.Scheme != "https") {
		return nil, fmt.Errorf("oauth: the server URL %q is not an http(s) URL", cfg.ServerURL)
	}
	name := cfg.Name
	if name == "" {
		name = cfg.ServerURL
	}
	if cfg.Store != nil {
		if err := checkName(cfg.Name); err != nil {
			return nil, err
		}
	}
	if cfg.ClientMetadataURL != "" {
		u, err := url.Parse(cfg.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Path == "" || u.Path == "/" {
			return nil, fmt.Errorf("oauth: the client metadata URL %q must be an https URL with a path", cfg.ClientMetadataURL)
		}
	}
	a := &Authorizer{
		cfg:       cfg,
		name:      name,
		server:    server,
		http:      cfg.HTTPClient,
		log:       cfg.Logger,
		now:       time.Now,
		exhausted: map[string]bool{},
		nonces:    map[string]string{},
		rec:       &record{Version: 1},
	}
	if a.http == nil {
		a.http = http.DefaultClient
	}
	if cfg.PrivateKey != nil {
		a.signer, a.alg = cfg.PrivateKey, cfg.SigningAlg
		if a.alg == "" {
			if a.alg, err = defaultAlg(a.signer); err != nil {
				return nil, err
			}
		} else if err := checkAlg(a.signer, a.alg); err != nil {
			return nil, err
		}
	}
	if cfg.Grant == GrantClientCredentials && cfg.ClientID == "" {
		return nil, errors.New("oauth: the client credentials grant needs a client ID")
	}
	if cfg.Store != nil {
		rec, st, err := cfg.Store.load(cfg.Name)
		if err != nil {
			return nil, err
		}
		a.rec, a.stamp = rec, st
	}
	if a.rec.ServerURL != "" && a.rec.ServerURL != cfg.ServerURL {
		// Tokens are for a resource: another URL is another resource.
		a.rec.Token = nil
		a.rec.Scopes = nil
	}
	a.rec.ServerURL = cfg.ServerURL
	if a.rec.Token != nil {
		a.state = StateOK
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	return a, nil
}

// Close ends a renewal in progress (its waiters get an error). The
// Authorizer must not be used after.
func (a *Authorizer) Close() error {
	a.cancel()
	return nil
}

// Name is the server's name, as errors and logs say it.
func (a *Authorizer) Name() string { return a.name }

// tokenFor returns the token a request should carry, nil when there is
// none yet (the request goes without, and the server's 401 says what to
// do), renewing it first when it has expired or is about to.
func (a *Authorizer) tokenFor(ctx context.Context) (*token, error) {
	a.mu.Lock()
	tok := a.rec.Token
	if tok == nil && a.state == StateLoginRequired {
		a.reloadLocked() // a login in another process
		tok = a.rec.Token
	}
	state := a.state
	a.mu.Unlock()
	if tok == nil {
		if state == StateLoginRequired && a.cfg.Interact == nil {
			return nil, a.fail(ErrLoginRequired, a.loginReason(), nil)
		}
		return nil, nil
	}
	renewable := tok.RefreshToken != "" || a.cfg.Grant == GrantClientCredentials
	if !a.expired(tok) && !(renewable && a.expiringSoon(tok)) {
		return tok, nil
	}
	nt, err := a.renew(ctx, need{used: tok.AccessToken, proactive: true})
	if err != nil {
		if !a.expired(tok) && !errors.Is(err, ErrLoginRequired) {
			return tok, nil // still good for a while; the next request tries again
		}
		return nil, err
	}
	return nt, nil
}

// renew obtains a new token for n, or waits for the renewal already under
// way and takes its outcome.
func (a *Authorizer) renew(ctx context.Context, n need) (*token, error) {
	a.mu.Lock()
	for {
		if tok := a.servesLocked(n); tok != nil {
			a.mu.Unlock()
			return tok, nil
		}
		f := a.flight
		if f == nil {
			break
		}
		a.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if f.err != nil {
			return nil, f.err
		}
		a.mu.Lock()
	}
	f := &flight{done: make(chan struct{})}
	a.flight = f
	a.mu.Unlock()
	go func() {
		tok, err := a.doRenew(a.ctx, n)
		a.mu.Lock()
		f.tok, f.err = tok, err
		a.flight = nil
		a.mu.Unlock()
		close(f.done)
	}()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// servesLocked returns the current token when it answers n: usable, not
// the one that failed, not about to expire when that is the reason, and
// with the challenged scopes for a step-up.
func (a *Authorizer) servesLocked(n need) *token {
	tok := a.rec.Token
	switch {
	case tok == nil, a.expired(tok):
		return nil
	case n.used != "" && tok.AccessToken == n.used:
		return nil
	case n.stepUp && !hasScopes(tok.Scope, n.challenge.Scope()):
		return nil
	}
	return tok
}

// persist writes the record to the store, when there is one.
func (a *Authorizer) persist() error {
	if a.cfg.Store == nil {
		return nil
	}
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	a.mu.Lock()
	data, err := encodeRecord(a.rec)
	a.mu.Unlock()
	if err != nil {
		return a.fail(ErrRefreshFailed, "storing the tokens", err)
	}
	st, err := a.cfg.Store.save(a.cfg.Name, data)
	if err != nil {
		return a.fail(ErrRefreshFailed, "storing the tokens", err)
	}
	a.mu.Lock()
	a.stamp = st
	a.mu.Unlock()
	return nil
}

// reloadLocked reads the record again when another process replaced its
// file. Called with a.mu held.
func (a *Authorizer) reloadLocked() {
	if a.cfg.Store == nil {
		return
	}
	st, err := a.cfg.Store.stamp(a.cfg.Name)
	if err != nil || st == a.stamp {
		return
	}
	rec, st, err := a.cfg.Store.load(a.cfg.Name)
	if err != nil {
		a.log.Warn("oauth: could not read the token file again", "server", a.name, "error", err)
		return
	}
	if rec.ServerURL != "" && rec.ServerURL != a.cfg.ServerURL {
		return // not ours (yet): another configuration's
	}
	rec.ServerURL = a.cfg.ServerURL
	old := a.rec.Token
	a.rec, a.stamp = rec, st
	a.dpopKey = nil
	if rec.Token != nil && (old == nil || old.AccessToken != rec.Token.AccessToken) {
		a.state, a.reason = StateOK, ""
		a.retryAt, a.backoff = time.Time{}, 0
	}
}

// expired reports whether t's lifetime is over.
func (a *Authorizer) expired(t *token) bool {
	return !t.Expiry.IsZero() && !a.now().Before(t.Expiry)
}

// expiringSoon reports whether t expires within the refresh margin.
func (a *Authorizer) expiringSoon(t *token) bool {
	if t.Expiry.IsZero() {
		return false
	}
	margin := refreshMargin
	if life := t.Expiry.Sub(t.IssuedAt); life > 0 && life/2 < margin {
		margin = life / 2
	}
	return !a.now().Add(margin).Before(t.Expiry)
}

// fail makes an *Error of this server.
func (a *Authorizer) fail(kind error, reason string, err error) *Error {
	return &Error{Server: a.name, Kind: kind, Reason: reason, Err: err}
}

// deadGrant reports whether a refresh error means the grant is gone for
// good (RFC 6749 §5.2: a revoked or expired refresh token, a client that
// no longer exists), rather than that the server is having trouble.
func deadGrant(err error) bool {
	var te *TokenError
	if !errors.As(err, &te) {
		return false
	}
	switch te.Code {
	case "invalid_grant", "invalid_client", "unauthorized_client":
		return true
	}
	return false
}

// hasScopes reports whether granted includes every scope of want.
func hasScopes(granted, want []string) bool {
	for _, s := range want {
		if !slices.Contains(granted, s) {
			return false
		}
	}
	return true
}
