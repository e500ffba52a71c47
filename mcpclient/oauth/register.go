package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The sources of a client identity, in the order the MCP specification
// prefers them (client registration: pre-registered, then Client ID
// Metadata Documents, then Dynamic Client Registration).
const (
	sourcePreRegistered = "pre-registered"
	sourceMetadataDoc   = "client ID metadata document"
	sourceRegistered    = "dynamically registered"
)

// identify returns the client identity to present to d's authorization
// server: the configured client when there is one (refused when it is
// bound to another issuer), else the client ID metadata document URL when
// the server supports those, else a registration this server issued
// earlier for redirectURI, else a new one (RFC 7591). redirectURI is the
// loopback redirect of the login about to start ("" when no login is: a
// refresh or the client-credentials grant, which then reuse what exists).
func (a *Authorizer) identify(ctx context.Context, d *discovery, redirectURI string) (*client, error) {
	if a.cfg.ClientID != "" {
		if a.cfg.ClientIssuer != "" && a.cfg.ClientIssuer != d.as.Issuer {
			return nil, a.fail(ErrRegistration, fmt.Sprintf("the configured client is registered with %s, but the server's authorization server is now %s: update the client configuration", a.cfg.ClientIssuer, d.as.Issuer), nil)
		}
		return a.configuredClient(d, a.cfg.ClientID, a.cfg.ClientSecret, sourcePreRegistered), nil
	}
	if a.cfg.Grant == GrantClientCredentials {
		return nil, a.fail(ErrRegistration, "the client credentials grant needs a configured client (ClientID, with a secret or a private key)", nil)
	}
	if a.cfg.ClientMetadataURL != "" && d.as.ClientIDMetadataDocumentSupported {
		return a.configuredClient(d, a.cfg.ClientMetadataURL, "", sourceMetadataDoc), nil
	}
	a.mu.Lock()
	reg := a.rec.Clients[d.as.Issuer]
	a.mu.Unlock()
	if reg != nil && (redirectURI == "" || reg.RedirectURI == redirectURI) &&
		(reg.SecretExpiresAt.IsZero() || a.now().Before(reg.SecretExpiresAt)) {
		return &client{id: reg.ClientID, secret: reg.ClientSecret, method: reg.AuthMethod, source: sourceRegistered}, nil
	}
	if d.as.RegistrationEndpoint == "" {
		return nil, a.fail(ErrRegistration, "the authorization server "+d.as.Issuer+" offers neither client ID metadata documents nor dynamic registration: configure a pre-registered client (ClientID)", nil)
	}
	if redirectURI == "" {
		return nil, a.fail(ErrRegistration, "no client is registered with "+d.as.Issuer+" yet", nil)
	}
	return a.register(ctx, d, redirectURI)
}

// configuredClient is a client whose identity the configuration gives,
// authenticating with its private key, else its secret in the way the
// server supports (client_secret_basic preferred, as RFC 8414 makes it the
// default), else not at all (a public client).
func (a *Authorizer) configuredClient(d *discovery, id, secret, source string) *client {
	cl := &client{id: id, secret: secret, source: source}
	switch {
	case a.signer != nil:
		cl.method, cl.signer, cl.alg = AuthPrivateKeyJWT, a.signer, a.alg
	case secret == "":
		cl.method = AuthNone
	case d.as.supportsAuth(AuthClientSecretBasic):
		cl.method = AuthClientSecretBasic
	case d.as.supportsAuth(AuthClientSecretPost):
		cl.method = AuthClientSecretPost
	default:
		cl.method = AuthClientSecretBasic
	}
	return cl
}

// registrationRequest is the client metadata sent to a registration
// endpoint (RFC 7591 §2), as a native application on a loopback redirect
// (RFC 8252; MCP requires application_type).
type registrationRequest struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              string   `json:"client_name"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ApplicationType         string   `json:"application_type"`
	DPoPBoundAccessTokens   bool     `json:"dpop_bound_access_tokens,omitempty"`
}

// registrationResponse is a registration endpoint's answer (RFC 7591
// §3.2.1).
type registrationResponse struct {
	ClientID                string          `json:"client_id"`
	ClientSecret            string          `json:"client_secret"`
	ClientSecretExpiresAt   json.RawMessage `json:"client_secret_expires_at"`
	TokenEndpointAuthMethod string          `json:"token_endpoint_auth_method"`
	RegistrationClientURI   string          `json:"registration_client_uri"`
	RegistrationAccessToken string          `json:"registration_access_token"`
}

// register obtains a client identity by dynamic registration (RFC 7591)
// and keeps it, by issuer, in the record.
func (a *Authorizer) register(ctx context.Context, d *discovery, redirectURI string) (*client, error) {
	method := AuthNone // a native client has no secret of its own
	if !d.as.supportsAuth(AuthNone) {
		if d.as.supportsAuth(AuthClientSecretBasic) {
			method = AuthClientSecretBasic
		} else if d.as.supportsAuth(AuthClientSecretPost) {
			method = AuthClientSecretPost
		}
	}
	body, _ := json.Marshal(registrationRequest{
		RedirectURIs:            []string{redirectURI},
		ClientName:              a.cfg.ClientName,
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: method,
		ApplicationType:         "native",
		DPoPBoundAccessTokens:   a.cfg.DPoP,
	})
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, a.fail(ErrRegistration, "", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, a.fail(ErrRegistration, "at "+d.as.RegistrationEndpoint, stripURLError(err))
	}
	data, err := a.readBody(resp)
	resp.Body.Close()
	if err != nil {
		return nil, a.fail(ErrRegistration, "at "+d.as.RegistrationEndpoint, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, a.fail(ErrRegistration, "at "+d.as.RegistrationEndpoint, parseTokenError(resp.StatusCode, data))
	}
	var rr registrationResponse
	if err := json.Unmarshal(data, &rr); err != nil || rr.ClientID == "" {
		return nil, a.fail(ErrRegistration, fmt.Sprintf("the registration endpoint %s answered %d without a client_id", d.as.RegistrationEndpoint, resp.StatusCode), nil)
	}
	reg := &registration{
		ClientID:         rr.ClientID,
		ClientSecret:     rr.ClientSecret,
		AuthMethod:       rr.TokenEndpointAuthMethod,
		RedirectURI:      redirectURI,
		RegisteredAt:     a.now(),
		RegistrationURI:  rr.RegistrationClientURI,
		RegistrationAuth: rr.RegistrationAccessToken,
	}
	if secs, err := strconv.ParseInt(string(rr.ClientSecretExpiresAt), 10, 64); err == nil && secs > 0 {
		reg.SecretExpiresAt = time.Unix(secs, 0)
	}
	if reg.AuthMethod == "" {
		// The server did not say: what was asked for, or, when it handed
		// out a secret anyway, the way it takes secrets.
		reg.AuthMethod = method
		if reg.ClientSecret != "" && method == AuthNone {
			reg.AuthMethod = AuthClientSecretBasic
			if !d.as.supportsAuth(AuthClientSecretBasic) && d.as.supportsAuth(AuthClientSecretPost) {
				reg.AuthMethod = AuthClientSecretPost
			}
		}
	}
	a.mu.Lock()
	if a.rec.Clients == nil {
		a.rec.Clients = map[string]*registration{}
	}
	a.rec.Clients[d.as.Issuer] = reg
	a.mu.Unlock()
	if err := a.persist(); err != nil {
		return nil, err
	}
	a.log.Info("oauth: registered a client", "server", a.name, "issuer", d.as.Issuer, "client_id", reg.ClientID)
	return &client{id: reg.ClientID, secret: reg.ClientSecret, method: reg.AuthMethod, source: sourceRegistered}, nil
}

// clientFor returns the identity a stored token was issued to, for
// refreshing it or revoking it; nil when that identity is gone (the
// configuration changed), and the token then cannot be refreshed.
func (a *Authorizer) clientFor(d *discovery, tok *token) *client {
	switch tok.ClientID {
	case "":
		return nil
	case a.cfg.ClientID:
		return a.configuredClient(d, a.cfg.ClientID, a.cfg.ClientSecret, sourcePreRegistered)
	case a.cfg.ClientMetadataURL:
		return a.configuredClient(d, a.cfg.ClientMetadataURL, "", sourceMetadataDoc)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if reg := a.rec.Clients[tok.Issuer]; reg != nil && reg.ClientID == tok.ClientID {
		return &client{id: reg.ClientID, secret: reg.ClientSecret, method: reg.AuthMethod, source: sourceRegistered}
	}
	return nil
}

// redirectPortFor is the loopback port a login should listen on: the
// configured one, else the one of the registration this server issued
// (its redirect URI names it, and reusing it saves a registration), else
// 0 for any.
func (a *Authorizer) redirectPortFor(d *discovery) int {
	if a.cfg.RedirectPort != 0 {
		return a.cfg.RedirectPort
	}
	if a.cfg.ClientID != "" || a.cfg.ClientMetadataURL != "" && d.as.ClientIDMetadataDocumentSupported {
		return 0
	}
	a.mu.Lock()
	reg := a.rec.Clients[d.as.Issuer]
	a.mu.Unlock()
	if reg == nil {
		return 0
	}
	u, err := url.Parse(reg.RedirectURI)
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(u.Port())
	return p
}
