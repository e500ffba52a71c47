package oauth

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// client is the identity the client presents to one authorization server
// and how it authenticates at its token endpoint.
type client struct {
	id     string
	secret string
	method string        // AuthNone, AuthClientSecretBasic, AuthClientSecretPost, AuthPrivateKeyJWT
	signer crypto.Signer // private_key_jwt
	alg    string
	source string // "pre-registered", "client ID metadata document", "dynamically registered"
}

// tokenResponse is the successful answer of a token endpoint (RFC 6749
// §5.1).
type tokenResponse struct {
	AccessToken  string          `json:"access_token"`
	TokenType    string          `json:"token_type"`
	ExpiresIn    json.RawMessage `json:"expires_in"`
	RefreshToken string          `json:"refresh_token"`
	Scope        string          `json:"scope"`
}

// errorResponse is an OAuth error answer (RFC 6749 §5.2).
type errorResponse struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// exchangeCode trades an authorization code for tokens (RFC 6749 §4.1.3
// with PKCE, RFC 7636 §4.5, and the resource, RFC 8707 §2.2).
func (a *Authorizer) exchangeCode(ctx context.Context, d *discovery, cl *client, code, verifier, redirectURI string, scopes []string, useDPoP bool) (*token, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"code_verifier": {verifier},
		"resource":      {d.resource},
	}
	return a.tokenRequest(ctx, d, cl, form, scopes, useDPoP)
}

// refreshToken asks for a new access token with tok's refresh token
// (RFC 6749 §6), for the same resource. A response with a new refresh
// token replaces the old one (rotation, OAuth 2.1 §4.3.1); one without
// keeps it.
func (a *Authorizer) refreshToken(ctx context.Context, d *discovery, cl *client, tok *token) (*token, error) {
	form := url.Values{
		"grant_type":    {"refresh_token"},
		"refresh_token": {tok.RefreshToken},
		"resource":      {d.resource},
	}
	nt, err := a.tokenRequest(ctx, d, cl, form, tok.Scope, tok.isDPoP())
	if err != nil {
		return nil, err
	}
	if nt.RefreshToken == "" {
		nt.RefreshToken = tok.RefreshToken
	}
	return nt, nil
}

// clientCredentials asks for a token for the client itself (RFC 6749
// §4.4; MCP's client credentials extension).
func (a *Authorizer) clientCredentials(ctx context.Context, d *discovery, cl *client, scopes []string, useDPoP bool) (*token, error) {
	form := url.Values{
		"grant_type": {"client_credentials"},
		"resource":   {d.resource},
	}
	if len(scopes) > 0 {
		form.Set("scope", joinScopes(scopes))
	}
	return a.tokenRequest(ctx, d, cl, form, scopes, useDPoP)
}

// tokenRequest posts form to the token endpoint, authenticated as cl, with
// a DPoP proof when useDPoP, retrying once with the server's nonce when it
// asks for one (RFC 9449 §8). requested is the scope asked for, recorded
// as the token's scope when the server does not say what it granted.
func (a *Authorizer) tokenRequest(ctx context.Context, d *discovery, cl *client, form url.Values, requested []string, useDPoP bool) (*token, error) {
	endpoint := d.as.TokenEndpoint
	for attempt := 0; ; attempt++ {
		resp, err := a.postForm(ctx, d, endpoint, cl, form, useDPoP)
		if err != nil {
			return nil, err
		}
		body, rerr := a.readBody(resp)
		resp.Body.Close()
		if rerr != nil {
			return nil, fmt.Errorf("the token endpoint %s: %w", endpoint, rerr)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			te := parseTokenError(resp.StatusCode, body)
			if useDPoP && attempt == 0 && te.Code == "use_dpop_nonce" && resp.Header.Get("DPoP-Nonce") != "" {
				continue // noteNonce kept it: sign again with it
			}
			return nil, te
		}
		var tr tokenResponse
		if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
			return nil, fmt.Errorf("the token endpoint %s answered %d without an access token", endpoint, resp.StatusCode)
		}
		now := a.now()
		t := &token{
			Issuer:       d.as.Issuer,
			Resource:     d.resource,
			ClientID:     cl.id,
			AccessToken:  tr.AccessToken,
			TokenType:    tr.TokenType,
			RefreshToken: tr.RefreshToken,
			IssuedAt:     now,
			Scope:        strings.Fields(tr.Scope),
		}
		if t.TokenType == "" {
			t.TokenType = "Bearer"
		}
		if !strings.EqualFold(t.TokenType, "Bearer") && !strings.EqualFold(t.TokenType, "DPoP") {
			return nil, fmt.Errorf("the token endpoint %s issued a token of type %q, which this client cannot use", endpoint, t.TokenType)
		}
		if t.isDPoP() && !useDPoP {
			return nil, fmt.Errorf("the token endpoint %s issued a DPoP token to a request without a proof", endpoint)
		}
		if secs, ok := expiresIn(tr.ExpiresIn); ok && secs > 0 {
			t.Expiry = now.Add(time.Duration(secs) * time.Second)
		}
		if len(t.Scope) == 0 {
			t.Scope = requested
		}
		return t, nil
	}
}

// postForm posts form to endpoint with cl's client authentication
// (RFC 6749 §2.3, RFC 7523 §2.2) and, when useDPoP, a DPoP proof.
func (a *Authorizer) postForm(ctx context.Context, d *discovery, endpoint string, cl *client, form url.Values, useDPoP bool) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	f := url.Values{}
	for k, v := range form {
		f[k] = v
	}
	switch cl.method {
	case AuthClientSecretPost:
		f.Set("client_id", cl.id)
		f.Set("client_secret", cl.secret)
	case AuthPrivateKeyJWT:
		assertion, err := a.clientAssertion(d, cl)
		if err != nil {
			cancel()
			return nil, err
		}
		f.Set("client_id", cl.id)
		f.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		f.Set("client_assertion", assertion)
	case AuthClientSecretBasic:
		// The identity is in the Authorization header.
	default:
		f.Set("client_id", cl.id)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(f.Encode()))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cl.method == AuthClientSecretBasic {
		// RFC 6749 §2.3.1: both parts form-encoded before base64.
		req.SetBasicAuth(url.QueryEscape(cl.id), url.QueryEscape(cl.secret))
	}
	if useDPoP {
		a.mu.Lock()
		k, err := a.dpopLocked()
		a.mu.Unlock()
		if err != nil {
			cancel()
			return nil, err
		}
		proof, err := k.proof(http.MethodPost, endpoint, "", a.nonceFor(req.URL), a.now())
		if err != nil {
			cancel()
			return nil, err
		}
		req.Header.Set("DPoP", proof)
	}
	resp, err := a.http.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("the token endpoint %s: %w", endpoint, stripURLError(err))
	}
	a.noteNonce(resp)
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// clientAssertion is a private_key_jwt client assertion (RFC 7523 §3):
// the client as issuer and subject, the authorization server's issuer
// identifier as audience, valid for a minute.
func (a *Authorizer) clientAssertion(d *discovery, cl *client) (string, error) {
	now := a.now()
	claims := map[string]any{
		"iss": cl.id,
		"sub": cl.id,
		"aud": d.as.Issuer,
		"jti": randomString(16),
		"iat": now.Unix(),
		"exp": now.Add(time.Minute).Unix(),
	}
	header := map[string]any{"typ": "JWT"}
	if a.cfg.KeyID != "" {
		header["kid"] = a.cfg.KeyID
	}
	return signJWT(cl.signer, cl.alg, header, claims)
}

// parseTokenError reads an OAuth error answer; a body that is not one
// gives the status alone (the body is never quoted: it is the server's,
// and may be anything).
func parseTokenError(status int, body []byte) *TokenError {
	var er errorResponse
	_ = json.Unmarshal(body, &er)
	return &TokenError{Status: status, Code: printable(er.Error, 64), Description: printable(er.Description, 200)}
}

// printable keeps at most n runes of s, without control characters: an
// error text from a server goes into logs and terminals.
func printable(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if n == 0 {
			b.WriteString("…")
			break
		}
		if unicode.IsControl(r) {
			r = ' '
		}
		b.WriteRune(r)
		n--
	}
	return b.String()
}

// expiresIn reads expires_in, a number of seconds, or a string of one as
// some servers send.
func expiresIn(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(raw), `"`)
	if s == "" || s == "null" {
		return 0, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return int64(f), true
	}
	return 0, false
}

// cancelBody ends a request's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

// stripURLError drops the "Post \"url\": " of a *url.Error, whose URL the
// caller's message names already.
func stripURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
