package oauth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

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
		if n.challenge != nil {
			a.loginCh = n.challenge
		}
		if n.stepUp {
			a.rec.Scopes = scopes // the login to come, here or in a CLI, asks for these
		}
		a.mu.Unlock()
		if n.stepUp {
			if err := a.persist(); err != nil {
				a.log.Warn("oauth: could not store the scopes to ask for", "server", a.name, "error", err)
			}
		}
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
	a.loginCh = nil
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
	pause := a.backoff
	a.mu.Unlock()
	a.log.Warn("oauth: refresh failed", "server", a.name, "error", cause, "retry_in", pause)
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
