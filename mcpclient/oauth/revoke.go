package oauth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
)

// Logout forgets the server's tokens, having first revoked them at its
// authorization server (RFC 7009: the refresh token, which ends the grant,
// then the access token) when it offers revocation. revoked says whether
// it did; a revocation that fails is reported in err, and the tokens are
// forgotten all the same. Client registrations are kept, for the next
// login. The server is then in the login-required state.
func (a *Authorizer) Logout(ctx context.Context) (revoked bool, err error) {
	if a.cfg.Store != nil {
		unlock, err := a.cfg.Store.lock(a.cfg.Name)
		if err != nil {
			return false, err
		}
		defer unlock()
	}
	a.mu.Lock()
	a.reloadLocked()
	tok := a.rec.Token
	a.mu.Unlock()
	if tok != nil {
		revoked, err = a.revoke(ctx, tok)
	}
	a.mu.Lock()
	a.rec.Token = nil
	a.state, a.reason = StateLoginRequired, "logged out"
	a.mu.Unlock()
	if perr := a.persist(); perr != nil {
		return revoked, perr
	}
	a.log.Info("oauth: logged out", "server", a.name, "revoked", revoked)
	return revoked, err
}

// revoke revokes tok's refresh token and access token, when the
// authorization server has a revocation endpoint.
func (a *Authorizer) revoke(ctx context.Context, tok *token) (bool, error) {
	d, err := a.discoverFor(ctx, nil)
	if err != nil {
		return false, err
	}
	if d.as.Issuer != tok.Issuer || d.as.RevocationEndpoint == "" {
		return false, nil
	}
	cl := a.clientFor(d, tok)
	if cl == nil {
		return false, a.fail(ErrAuthorization, "the client the token was issued to is no longer configured: it cannot be revoked", nil)
	}
	var errs []error
	for _, t := range []struct{ value, hint string }{{tok.RefreshToken, "refresh_token"}, {tok.AccessToken, "access_token"}} {
		if t.value == "" {
			continue
		}
		resp, err := a.postForm(ctx, d, d.as.RevocationEndpoint, cl, url.Values{"token": {t.value}, "token_type_hint": {t.hint}}, false)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		body, _ := a.readBody(resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			errs = append(errs, parseTokenError(resp.StatusCode, body))
		}
	}
	if len(errs) > 0 {
		return false, a.fail(ErrAuthorization, "revoking at "+d.as.RevocationEndpoint, errors.Join(errs...))
	}
	return true, nil
}
