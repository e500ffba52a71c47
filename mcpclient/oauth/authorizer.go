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
	"strings"
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

// doRenew is one renewal: quietly (a refresh, the client-credentials
// grant) when it can be, else an interactive login.
func (a *Authorizer) doRenew(ctx context.Context, n need) (*token, error) {
	tok, done, err := a.renewQuietly(ctx, n)
	if done {
		return tok, err
	}
	return a.loginFor(ctx, n)
}

// renewQuietly renews without a person, under the store's lock: it reads
// the record again (another process may have renewed already), finds the
// authorization server again after a challenge (it may have changed:
// tokens and registrations of the old one are then not used), and
// refreshes or requests a client-credentials token. done is false when
// only a login can help.
func (a *Authorizer) renewQuietly(ctx context.Context, n need) (tok *token, done bool, err error) {
	if a.cfg.Store != nil {
		unlock, err := a.cfg.Store.lock(a.cfg.Name)
		if err != nil {
			return nil, true, err
		}
		defer unlock()
	}
	a.mu.Lock()
	a.reloadLocked()
	if t := a.servesLocked(n); t != nil {
		a.mu.Unlock()
		return t, true, nil
	}
	cur := a.rec.Token
	waiting := cur != nil && !n.stepUp && a.now().Before(a.retryAt)
	a.mu.Unlock()
	if waiting {
		return nil, true, a.fail(ErrRefreshFailed, a.Status().Reason+" (retrying shortly)", nil)
	}
	renewable := cur != nil && cur.RefreshToken != ""
	d, err := a.discoverFor(ctx, n.challenge)
	if err != nil {
		if renewable || a.cfg.Grant == GrantClientCredentials && cur != nil {
			return nil, true, a.refreshFailed(err)
		}
		return nil, true, err
	}
	if cur != nil && !renewable && a.cfg.Grant == GrantAuthorizationCode && a.expired(cur) {
		a.dropToken() // nothing can renew it: a login must
		cur = nil
	}
	if cur != nil && cur.Issuer != d.as.Issuer {
		a.log.Info("oauth: the authorization server changed; its tokens are dropped", "server", a.name, "from", cur.Issuer, "to", d.as.Issuer)
		a.dropToken()
		cur, renewable = nil, false
	}
	if a.cfg.Grant == GrantClientCredentials {
		t, err := a.obtainClientCredentials(ctx, d, n)
		return t, true, err
	}
	if renewable && !n.stepUp {
		if cl := a.clientFor(d, cur); cl != nil {
			t, err := a.refreshToken(ctx, d, cl, cur)
			if err == nil {
				a.log.Info("oauth: token refreshed", "server", a.name, "rotated", t.RefreshToken != cur.RefreshToken)
				return t, true, a.adopt(t, a.scopes())
			}
			if !deadGrant(err) {
				return nil, true, a.refreshFailed(err)
			}
			a.log.Warn("oauth: the authorization server refused the refresh token; a login is required", "server", a.name, "error", err)
			a.setReason("the authorization server refused the refresh token (" + err.Error() + ")")
		}
		a.dropToken()
	}
	return nil, false, nil
}

// obtainClientCredentials requests a token with the client's own
// credentials, for the scopes the challenge asks plus those held before.
func (a *Authorizer) obtainClientCredentials(ctx context.Context, d *discovery, n need) (*token, error) {
	cl, err := a.identify(ctx, d, "")
	if err != nil {
		return nil, err
	}
	scopes := a.selectScopes(d, n.challenge)
	t, err := a.clientCredentials(ctx, d, cl, scopes, a.useDPoP(d))
	if err != nil {
		var te *TokenError
		if errors.As(err, &te) && te.Status < 500 {
			return nil, a.fail(ErrAuthorization, "the client credentials were refused", err)
		}
		return nil, a.refreshFailed(err)
	}
	a.log.Info("oauth: client credentials token obtained", "server", a.name, "issuer", d.as.Issuer, "scope", joinScopes(t.Scope))
	return t, a.adopt(t, scopes)
}

// loginFor runs an interactive login for n through the Interact hook, or
// puts the server in the login-required state when there is none.
func (a *Authorizer) loginFor(ctx context.Context, n need) (*token, error) {
	a.mu.Lock()
	d := a.disc
	a.mu.Unlock()
	scopes := a.selectScopes(d, n.challenge)
	if a.cfg.Interact == nil {
		a.mu.Lock()
		a.state = StateLoginRequired
		if n.stepUp {
			// The login to come asks for these.
			a.rec.Scopes = scopes
		}
		a.mu.Unlock()
		return nil, a.fail(ErrLoginRequired, a.loginReason(), nil)
	}
	l, err := a.beginLogin(ctx, d, scopes)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	a.log.Info("oauth: login required; waiting for the browser", "server", a.name, "issuer", d.as.Issuer, "scope", joinScopes(scopes))
	if err := a.cfg.Interact(ctx, l.URL); err != nil {
		return nil, a.fail(ErrLoginRequired, "the login URL could not be shown", err)
	}
	wctx, cancel := context.WithTimeout(ctx, a.cfg.LoginTimeout)
	defer cancel()
	if _, err := l.Wait(wctx); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rec.Token, nil
}

// discoverFor finds the authorization server again for a challenge (the
// moment to notice that it changed), and reuses what was found otherwise.
// A challenge's resource_metadata URL is remembered for discoveries
// without one (a refresh after a restart).
func (a *Authorizer) discoverFor(ctx context.Context, ch *Challenge) (*discovery, error) {
	a.mu.Lock()
	d := a.disc
	remembered := a.rec.ResourceMetadataURL
	a.mu.Unlock()
	if ch == nil && d != nil {
		return d, nil
	}
	if ch != nil && strings.EqualFold(ch.Scheme, "DPoP") {
		a.mu.Lock()
		a.sawDPoP = true
		a.mu.Unlock()
	}
	if ch.ResourceMetadata() == "" && remembered != "" {
		ch = &Challenge{Params: map[string]string{"resource_metadata": remembered}}
	}
	d, err := a.discover(ctx, ch)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.disc = d
	if u := ch.ResourceMetadata(); u != "" {
		a.rec.ResourceMetadataURL = u
	}
	a.mu.Unlock()
	return d, nil
}

// selectScopes is MCP's scope selection strategy: the challenge's scope,
// else every scope of the resource's scopes_supported, else none; united
// with the scopes asked for before (a step-up keeps what was granted) and
// the configured ones; plus offline_access when the authorization server
// lists it, for a refresh token (SEP-2207: never when it does not).
func (a *Authorizer) selectScopes(d *discovery, ch *Challenge) []string {
	base := ch.Scope()
	if len(base) == 0 && d.prm != nil {
		base = d.prm.ScopesSupported
	}
	scopes := unionScopes(a.scopes(), base)
	scopes = unionScopes(scopes, a.cfg.Scopes)
	if a.cfg.Grant == GrantAuthorizationCode && d.as.supportsScope("offline_access") {
		scopes = unionScopes(scopes, []string{"offline_access"})
	}
	return scopes
}

// useDPoP reports whether tokens are requested DPoP-bound: when
// configured, or when the resource asks (a DPoP challenge seen, or its
// metadata requires bound tokens) and the authorization server signs them
// for ES256 proofs.
func (a *Authorizer) useDPoP(d *discovery) bool {
	if a.cfg.DPoP {
		return true
	}
	if !d.as.supportsDPoP(dpopAlg) {
		return false
	}
	a.mu.Lock()
	saw := a.sawDPoP
	a.mu.Unlock()
	return saw || d.prm != nil && d.prm.DPoPBoundAccessTokensRequired
}

// adopt makes t the current token, scopes the set last requested, the
// state ok, and stores them.
func (a *Authorizer) adopt(t *token, scopes []string) error {
	a.mu.Lock()
	a.rec.Token = t
	a.rec.Scopes = scopes
	a.state, a.reason = StateOK, ""
	a.retryAt, a.backoff = time.Time{}, 0
	a.mu.Unlock()
	return a.persist()
}

// dropToken forgets the current token (and stores that).
func (a *Authorizer) dropToken() {
	a.mu.Lock()
	a.rec.Token = nil
	a.mu.Unlock()
	if err := a.persist(); err != nil {
		a.log.Warn("oauth: could not store the token's removal", "server", a.name, "error", err)
	}
}

// refreshFailed records a refresh that failed for a reason that may pass
// (the authorization server unreachable, 5xx, garbage): the state says so,
// and refreshes pause, 1s after the first failure, doubling to a minute.
func (a *Authorizer) refreshFailed(cause error) error {
	e := a.fail(ErrRefreshFailed, "", cause)
	a.mu.Lock()
	a.state = StateRefreshFailed
	a.reason = e.Err.Error()
	a.backoff = min(max(2*a.backoff, time.Second), time.Minute)
	a.retryAt = a.now().Add(a.backoff)
	a.mu.Unlock()
	a.log.Warn("oauth: refresh failed", "server", a.name, "error", cause, "retry_in", a.backoff)
	return e
}

func (a *Authorizer) setReason(r string) {
	a.mu.Lock()
	a.reason = r
	a.mu.Unlock()
}

// loginReason says why a login is needed.
func (a *Authorizer) loginReason() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reason != "" {
		return a.reason
	}
	return "the server requires a login"
}

// scopes is the scope set last requested.
func (a *Authorizer) scopes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.rec.Scopes)
}

// persist writes the record to the store, when there is one.
func (a *Authorizer) persist() error {
	if a.cfg.Store == nil {
		return nil
	}
	a.saveMu.Lock()
	defer a.saveMu.Unlock()
	a.mu.Lock()
	snapshot := *a.rec
	a.mu.Unlock()
	st, err := a.cfg.Store.save(a.cfg.Name, &snapshot)
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
