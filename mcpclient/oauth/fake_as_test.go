package oauth

import (
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// fakeAS is an authorization server on loopback, as configurable as the
// tests need, that checks what a correct client must send (PKCE, the
// resource, the redirect URI, client authentication, DPoP proofs) and
// records what it was sent.
type fakeAS struct {
	t   *testing.T
	srv *httptest.Server

	// Configuration, set before use.
	prefix       string   // issuer path, "" or "/tenant1"
	wellKnown    string   // "oauth" (default), "openid", "openid-append"
	issuerClaim  string   // overrides the metadata's issuer
	noDCR        bool     // no registration_endpoint
	cimd         bool     // client_id_metadata_document_supported
	noPKCE       bool     // omit code_challenge_methods_supported
	authMethods  []string // token_endpoint_auth_methods_supported
	scopes       []string // scopes_supported
	issSupported bool
	issMode      string // "correct" (default), "wrong", "omit", "normalized"
	dpopAlgs     []string
	requireNonce bool
	refresh      bool // issue refresh tokens
	rotate       bool // a refresh issues a new refresh token
	expiresIn    int  // seconds, 0: 3600
	revocation   bool
	deny         bool          // the person refuses: error=access_denied
	withhold     []string      // scopes never granted
	refreshGate  chan struct{} // when set, a refresh waits for it
	garbage      bool          // the metadata document is not JSON
	refreshFail  string        // "": fine; "invalid_grant", "500", "garbage"
	clients      map[string]fakeClient
	clientKey    *ecdsa.PublicKey // verifies private_key_jwt assertions

	mu           sync.Mutex
	codes        map[string]codeGrant
	tokens       map[string]grant // access tokens
	refreshes    map[string]grant // live refresh tokens
	revoked      []string
	authRequests []url.Values
	tokenForms   []url.Values
	tokenAuth    []string // the Authorization header of each token request
	registered   []registrationRequest
	refreshCount int
	metadataHits int
}

type fakeClient struct {
	secret string
	method string
}

type codeGrant struct {
	clientID, challenge, redirect, resource, jkt string
	scopes                                       []string
}

type grant struct {
	clientID, resource, jkt string
	scopes                  []string
	expiry                  time.Time
}

func newFakeAS(t *testing.T) *fakeAS {
	as := &fakeAS{
		t:            t,
		issSupported: true,
		clients:      map[string]fakeClient{},
		codes:        map[string]codeGrant{},
		tokens:       map[string]grant{},
		refreshes:    map[string]grant{},
		authMethods:  []string{AuthNone, AuthClientSecretBasic, AuthClientSecretPost},
	}
	as.srv = httptest.NewServer(http.HandlerFunc(as.serve))
	t.Cleanup(as.srv.Close)
	return as
}

// issuer is the issuer identifier.
func (as *fakeAS) issuer() string { return as.srv.URL + as.prefix }

func (as *fakeAS) metadataPath() string {
	switch as.wellKnown {
	case "openid":
		return "/.well-known/openid-configuration" + as.prefix
	case "openid-append":
		return as.prefix + "/.well-known/openid-configuration"
	}
	return "/.well-known/oauth-authorization-server" + as.prefix
}

func (as *fakeAS) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case as.metadataPath():
		as.metadata(w)
	case as.prefix + "/authorize":
		as.authorize(w, r)
	case as.prefix + "/token":
		as.token(w, r)
	case as.prefix + "/register":
		as.register(w, r)
	case as.prefix + "/revoke":
		as.revoke(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (as *fakeAS) metadata(w http.ResponseWriter) {
	as.mu.Lock()
	as.metadataHits++
	as.mu.Unlock()
	if as.garbage {
		fmt.Fprint(w, "<html>not metadata</html>")
		return
	}
	base := as.issuer()
	m := map[string]any{
		"issuer":                                as.issuer(),
		"authorization_endpoint":                base + "/authorize",
		"token_endpoint":                        base + "/token",
		"response_types_supported":              []string{"code"},
		"token_endpoint_auth_methods_supported": as.authMethods,
	}
	if as.issuerClaim != "" {
		m["issuer"] = as.issuerClaim
	}
	if !as.noDCR {
		m["registration_endpoint"] = base + "/register"
	}
	if !as.noPKCE {
		m["code_challenge_methods_supported"] = []string{"S256"}
	}
	if as.issSupported {
		m["authorization_response_iss_parameter_supported"] = true
	}
	if as.cimd {
		m["client_id_metadata_document_supported"] = true
	}
	if as.scopes != nil {
		m["scopes_supported"] = as.scopes
	}
	if as.dpopAlgs != nil {
		m["dpop_signing_alg_values_supported"] = as.dpopAlgs
	}
	if as.revocation {
		m["revocation_endpoint"] = base + "/revoke"
	}
	writeJSON(w, 200, m)
}

func (as *fakeAS) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	as.mu.Lock()
	as.authRequests = append(as.authRequests, q)
	as.mu.Unlock()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", 400)
		return
	}
	code := randomString(12)
	as.mu.Lock()
	as.codes[code] = codeGrant{
		clientID: q.Get("client_id"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"),
		resource: q.Get("resource"), jkt: q.Get("dpop_jkt"), scopes: strings.Fields(q.Get("scope")),
	}
	as.mu.Unlock()
	v := redirect.Query()
	if as.deny {
		v.Set("error", "access_denied")
		v.Set("error_description", "the person said no")
	} else {
		v.Set("code", code)
	}
	v.Set("state", q.Get("state"))
	switch as.issMode {
	case "", "correct":
		v.Set("iss", as.issuer())
	case "wrong":
		v.Set("iss", "https://evil.example.com")
	case "normalized":
		v.Set("iss", as.issuer()+"/")
	}
	redirect.RawQuery = v.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// clientID authenticates the client of a token or revocation request as
// its registration says, returning "" (and answering) when it fails.
func (as *fakeAS) clientID(w http.ResponseWriter, r *http.Request) string {
	if id, secret, ok := r.BasicAuth(); ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
		as.mu.Lock()
		c, known := as.clients[id]
		as.mu.Unlock()
		if !known || c.method != AuthClientSecretBasic || c.secret != secret {
			writeJSON(w, 401, map[string]string{"error": "invalid_client"})
			return ""
		}
		return id
	}
	id := r.PostForm.Get("client_id")
	as.mu.Lock()
	c, known := as.clients[id]
	as.mu.Unlock()
	switch {
	case strings.HasPrefix(id, "https://") && as.cimd:
		return id
	case !known:
	case c.method == AuthClientSecretPost && r.PostForm.Get("client_secret") == c.secret:
		return id
	case c.method == AuthNone && r.PostForm.Get("client_secret") == "":
		return id
	case c.method == AuthPrivateKeyJWT && as.checkAssertion(id, r.PostForm):
		return id
	}
	writeJSON(w, 401, map[string]string{"error": "invalid_client"})
	return ""
}

// checkAssertion verifies a private_key_jwt client assertion (RFC 7523).
func (as *fakeAS) checkAssertion(id string, f url.Values) bool {
	if f.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" {
		return false
	}
	var claims map[string]any
	if !verifyES256(f.Get("client_assertion"), as.clientKey, &claims) {
		return false
	}
	return claims["iss"] == id && claims["sub"] == id && claims["aud"] == as.issuer()
}

func (as *fakeAS) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", 400)
		return
	}
	as.mu.Lock()
	as.tokenForms = append(as.tokenForms, r.PostForm)
	as.tokenAuth = append(as.tokenAuth, r.Header.Get("Authorization"))
	as.mu.Unlock()
	id := as.clientID(w, r)
	if id == "" {
		return
	}
	jkt, ok := as.dpopProof(w, r)
	if !ok {
		return
	}
	f := r.PostForm
	var g grant
	switch f.Get("grant_type") {
	case "authorization_code":
		as.mu.Lock()
		c, ok := as.codes[f.Get("code")]
		delete(as.codes, f.Get("code"))
		as.mu.Unlock()
		switch {
		case !ok, c.clientID != id, c.redirect != f.Get("redirect_uri"):
			writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
			return
		case oauth2.S256ChallengeFromVerifier(f.Get("code_verifier")) != c.challenge:
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "PKCE verifier mismatch"})
			return
		case f.Get("resource") == "" || f.Get("resource") != c.resource:
			writeJSON(w, 400, map[string]string{"error": "invalid_target"})
			return
		case c.jkt != "" && c.jkt != jkt:
			writeJSON(w, 400, map[string]string{"error": "invalid_dpop_proof"})
			return
		}
		g = grant{clientID: id, resource: c.resource, scopes: c.scopes, jkt: jkt}
	case "refresh_token":
		if as.refreshGate != nil {
			<-as.refreshGate
		}
		as.mu.Lock()
		as.refreshCount++
		old, ok := as.refreshes[f.Get("refresh_token")]
		fail := as.refreshFail
		as.mu.Unlock()
		switch {
		case fail == "500":
			http.Error(w, "down", 500)
			return
		case fail == "garbage":
			fmt.Fprint(w, "{not json")
			return
		case fail == "invalid_grant", !ok, old.clientID != id:
			writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "the refresh token was revoked"})
			return
		}
		g = old
		if as.rotate {
			as.mu.Lock()
			delete(as.refreshes, f.Get("refresh_token"))
			as.mu.Unlock()
		}
	case "client_credentials":
		g = grant{clientID: id, resource: f.Get("resource"), scopes: strings.Fields(f.Get("scope")), jkt: jkt}
	default:
		writeJSON(w, 400, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	g.scopes = slices.DeleteFunc(slices.Clone(g.scopes), func(s string) bool { return has(as.withhold, s) })
	life := as.expiresIn
	if life == 0 {
		life = 3600
	}
	g.expiry = time.Now().Add(time.Duration(life) * time.Second)
	access := "at-" + randomString(12)
	resp := map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": life}
	if len(g.scopes) > 0 || len(as.withhold) > 0 {
		resp["scope"] = joinScopes(g.scopes)
	}
	if g.jkt != "" {
		resp["token_type"] = "DPoP"
	}
	as.mu.Lock()
	as.tokens[access] = g
	if as.refresh && f.Get("grant_type") != "client_credentials" {
		if f.Get("grant_type") == "refresh_token" && !as.rotate {
			resp["refresh_token"] = f.Get("refresh_token")
		} else {
			rt := "rt-" + randomString(12)
			as.refreshes[rt] = g
			resp["refresh_token"] = rt
		}
	}
	as.mu.Unlock()
	writeJSON(w, 200, resp)
}

// dpopProof checks the DPoP proof of a token request when the server does
// DPoP, returning the key's thumbprint ("" without a proof).
func (as *fakeAS) dpopProof(w http.ResponseWriter, r *http.Request) (string, bool) {
	proof := r.Header.Get("DPoP")
	if proof == "" || as.dpopAlgs == nil {
		return "", true
	}
	jkt, claims, ok := checkProof(proof, "POST", as.issuer()+"/token", "")
	if !ok {
		writeJSON(w, 400, map[string]string{"error": "invalid_dpop_proof"})
		return "", false
	}
	if as.requireNonce && claims["nonce"] != "as-nonce" {
		w.Header().Set("DPoP-Nonce", "as-nonce")
		writeJSON(w, 400, map[string]string{"error": "use_dpop_nonce"})
		return "", false
	}
	return jkt, true
}

func (as *fakeAS) register(w http.ResponseWriter, r *http.Request) {
	var req registrationRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.RedirectURIs) == 0 {
		writeJSON(w, 400, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id := "client-" + randomString(6)
	c := fakeClient{method: req.TokenEndpointAuthMethod}
	resp := map[string]any{"client_id": id, "redirect_uris": req.RedirectURIs, "token_endpoint_auth_method": c.method}
	if c.method != AuthNone {
		c.secret = "secret-" + randomString(6)
		resp["client_secret"] = c.secret
	}
	as.mu.Lock()
	as.clients[id] = c
	as.registered = append(as.registered, req)
	as.mu.Unlock()
	writeJSON(w, 201, resp)
}

func (as *fakeAS) revoke(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || as.clientID(w, r) == "" {
		return
	}
	tok := r.PostForm.Get("token")
	as.mu.Lock()
	as.revoked = append(as.revoked, r.PostForm.Get("token_type_hint"))
	delete(as.tokens, tok)
	delete(as.refreshes, tok)
	as.mu.Unlock()
	w.WriteHeader(200)
}

// lookup returns the grant of a live access token.
func (as *fakeAS) lookup(access string) (grant, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	g, ok := as.tokens[access]
	return g, ok && time.Now().Before(g.expiry)
}

// expireAll makes every access token invalid at the server (it still
// lets the refresh tokens refresh).
func (as *fakeAS) expireAll() {
	as.mu.Lock()
	clear(as.tokens)
	as.mu.Unlock()
}

func (as *fakeAS) counts() (refreshes, tokenRequests, authRequests, registrations int) {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.refreshCount, len(as.tokenForms), len(as.authRequests), len(as.registered)
}
