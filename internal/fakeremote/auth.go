package fakeremote

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Auth is a TEST-ONLY OAuth authorization server and the protection of
// one MCP endpoint by it, on the endpoint's own origin: protected resource
// metadata (RFC 9728), authorization server metadata (RFC 8414), dynamic
// registration (RFC 7591), the authorization code grant with PKCE S256
// (its authorize endpoint redirects at once, as a person who logged in
// would), refresh with rotation, and revocation (RFC 7009). Its methods
// may be called from any goroutine.
type Auth struct {
	// TokenTTL is the lifetime of the access tokens it issues; 0 is an
	// hour.
	TokenTTL time.Duration

	// Logins counts the authorization codes exchanged; Refreshes the
	// refreshes granted; Revocations the tokens revoked.
	Logins, Refreshes, Revocations atomic.Int64

	// broken, when not 0, makes the token endpoint answer garbage (1) or
	// 503 (2).
	broken atomic.Int64

	mu      sync.Mutex
	clients int
	codes   map[string]string    // code → its PKCE challenge
	access  map[string]time.Time // access token → expiry
	refresh map[string]bool      // refresh tokens still good
}

// NewAuth returns an authorization server with no client and no token.
func NewAuth() *Auth {
	return &Auth{codes: map[string]string{}, access: map[string]time.Time{}, refresh: map[string]bool{}}
}

// The breakages of Break.
const (
	Healthy = iota
	Garbage // the token endpoint answers something that is not JSON
	Down    // it answers 503
)

// Break makes the token endpoint misbehave (Garbage, Down) or heals it
// (Healthy).
func (a *Auth) Break(how int) { a.broken.Store(int64(how)) }

// ExpireAccess makes every access token issued so far invalid, as their
// expiry does: the next request with one gets 401.
func (a *Auth) ExpireAccess() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.access)
}

// RevokeRefresh makes every refresh token issued so far invalid (the user
// revoked the grant): a refresh gets invalid_grant.
func (a *Auth) RevokeRefresh() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.refresh)
}

// Protect serves the authorization server's endpoints beside mcp, the
// MCP endpoint at path (such as "/mcp"), which needs a bearer token.
func (a *Auth) Protect(path string, mcp http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/oauth-protected-resource", func(w http.ResponseWriter, r *http.Request) {
		base := origin(r)
		writeJSON(w, map[string]any{"resource": base + path, "authorization_servers": []string{base}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		base := origin(r)
		writeJSON(w, map[string]any{
			"issuer":                                base,
			"authorization_endpoint":                base + "/authorize",
			"token_endpoint":                        base + "/token",
			"registration_endpoint":                 base + "/register",
			"revocation_endpoint":                   base + "/revoke",
			"response_types_supported":              []string{"code"},
			"grant_types_supported":                 []string{"authorization_code", "refresh_token"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"none"},
		})
	})
	mux.HandleFunc("/register", func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		_ = json.NewDecoder(r.Body).Decode(&req)
		a.mu.Lock()
		a.clients++
		req["client_id"] = fmt.Sprintf("client-%d", a.clients)
		a.mu.Unlock()
		req["token_endpoint_auth_method"] = "none"
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, req)
	})
	mux.HandleFunc("/authorize", a.authorize)
	mux.HandleFunc("/token", a.token)
	mux.HandleFunc("/revoke", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		tok := r.PostForm.Get("token")
		a.mu.Lock()
		delete(a.access, tok)
		delete(a.refresh, tok)
		a.mu.Unlock()
		a.Revocations.Add(1)
	})
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		a.mu.Lock()
		exp, known := a.access[tok]
		a.mu.Unlock()
		if !ok || !known || time.Now().After(exp) {
			challenge := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource"`, origin(r))
			if ok {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mcp.ServeHTTP(w, r)
	}))
	return mux
}

// authorize grants a code at once and sends the browser back to the
// client's redirect URI.
func (a *Auth) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" {
		http.Error(w, "bad authorization request", http.StatusBadRequest)
		return
	}
	code := randomToken()
	a.mu.Lock()
	a.codes[code] = q.Get("code_challenge")
	a.mu.Unlock()
	back := redirect.Query()
	back.Set("code", code)
	back.Set("state", q.Get("state"))
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

// token exchanges a code (its PKCE verifier checked) or a refresh token
// (rotated) for tokens.
func (a *Auth) token(w http.ResponseWriter, r *http.Request) {
	switch a.broken.Load() {
	case Garbage:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "<html>not json")
		return
	case Down:
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	_ = r.ParseForm()
	f := r.PostForm
	a.mu.Lock()
	defer a.mu.Unlock()
	switch f.Get("grant_type") {
	case "authorization_code":
		challenge, ok := a.codes[f.Get("code")]
		delete(a.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
			tokenError(w, "invalid_grant")
			return
		}
		a.Logins.Add(1)
	case "refresh_token":
		if !a.refresh[f.Get("refresh_token")] {
			tokenError(w, "invalid_grant")
			return
		}
		delete(a.refresh, f.Get("refresh_token"))
		a.Refreshes.Add(1)
	default:
		tokenError(w, "unsupported_grant_type")
		return
	}
	ttl := a.TokenTTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	access, refresh := randomToken(), randomToken()
	a.access[access] = time.Now().Add(ttl)
	a.refresh[refresh] = true
	writeJSON(w, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": int(ttl / time.Second), "refresh_token": refresh})
}

func tokenError(w http.ResponseWriter, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"error":%q}`, code)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
