package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDPoP: the server challenges with DPoP; the token is requested with a
// proof (and the code bound with dpop_jkt), issued bound, and presented
// with the DPoP scheme and a fresh proof per request; the authorization
// server's and the resource server's nonces are honoured.
func TestDPoP(t *testing.T) {
	for _, nonce := range []bool{false, true} {
		name := "without nonces"
		if nonce {
			name = "with nonces"
		}
		t.Run(name, func(t *testing.T) {
			as := newFakeAS(t)
			as.dpopAlgs = []string{"ES256"}
			as.requireNonce = nonce
			as.refresh = true
			rs := newFakeRS(t, as)
			rs.dpop, rs.rsNonce = true, nonce
			a := newAuthorizer(t, rs, nil)
			mustCall(t, a, rs, "")
			mustCall(t, a, rs, "")
			if as.authRequests[0].Get("dpop_jkt") == "" {
				t.Error("no dpop_jkt in the authorization request")
			}
			for _, h := range rs.seen[1:] {
				if !strings.HasPrefix(h, "DPoP ") {
					t.Errorf("Authorization %q", h)
				}
			}
			if len(rs.proofs) < 2 || rs.proofs[0] == rs.proofs[1] {
				t.Error("a proof was reused")
			}
			// A bound refresh.
			as.expireAll()
			mustCall(t, a, rs, "")
			if refreshes, _, _, _ := as.counts(); refreshes != 1 {
				t.Errorf("%d refreshes", refreshes)
			}
			if !a.rec.Token.isDPoP() {
				t.Error("the refreshed token is not DPoP-bound")
			}
		})
	}
}

// TestClientCredentials: the client credentials grant, with a secret and
// with a private-key JWT, needs no person.
func TestClientCredentials(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	for _, c := range []struct {
		name   string
		method string
		set    func(*Config)
	}{
		{"secret", AuthClientSecretBasic, func(c *Config) { c.ClientSecret = "m2m-secret" }},
		{"private key JWT", AuthPrivateKeyJWT, func(c *Config) { c.PrivateKey = key }},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := newFakeAS(t)
			as.clients["m2m"] = fakeClient{secret: "m2m-secret", method: c.method}
			as.clientKey = &key.PublicKey
			as.authMethods = []string{c.method}
			rs := newFakeRS(t, as)
			rs.challenge = []string{"mcp:tools"}
			rs.need["write"] = []string{"mcp:write"}
			a := newAuthorizer(t, rs, func(cfg *Config) {
				cfg.Interact, cfg.Grant, cfg.ClientID = nil, GrantClientCredentials, "m2m"
				c.set(cfg)
			})
			mustCall(t, a, rs, "")
			if _, _, auths, _ := as.counts(); auths != 0 {
				t.Errorf("%d authorization requests", auths)
			}
			f := as.tokenForms[0]
			if f.Get("grant_type") != "client_credentials" || f.Get("resource") != rs.url() || f.Get("scope") != "mcp:tools" {
				t.Errorf("token request %v", f)
			}
			// An expired token is requested again, a step-up too.
			as.expireAll()
			mustCall(t, a, rs, "write")
			if got := as.tokenForms[len(as.tokenForms)-1].Get("scope"); got != "mcp:tools mcp:write" {
				t.Errorf("step-up scope %q", got)
			}
			if _, err := a.BeginLogin(t.Context()); err == nil {
				t.Error("BeginLogin with the client credentials grant")
			}
		})
	}
}

// TestAuthorizationServerMigration: when the resource's metadata names a
// new authorization server, the client registers there and never shows it
// the old server's client or tokens.
func TestAuthorizationServerMigration(t *testing.T) {
	as1, as2 := newFakeAS(t), newFakeAS(t)
	as1.refresh = true
	rs := newFakeRS(t, as1)
	a := newAuthorizer(t, rs, nil)
	mustCall(t, a, rs, "")
	old := as1.authRequests[0].Get("client_id")
	rs.mu.Lock()
	rs.as = as2
	rs.mu.Unlock()
	mustCall(t, a, rs, "")
	if len(as2.registered) != 1 {
		t.Errorf("%d registrations at the new server", len(as2.registered))
	}
	for _, q := range as2.authRequests {
		if q.Get("client_id") == old {
			t.Error("the old server's client_id was shown to the new one")
		}
	}
	for _, f := range as2.tokenForms {
		if f.Get("client_id") == old || f.Get("grant_type") == "refresh_token" {
			t.Errorf("the old server's client or refresh token went to the new one: %v", f)
		}
	}
	if refreshes, _, _, _ := as1.counts(); refreshes != 0 {
		t.Errorf("%d refreshes at the old server", refreshes)
	}
}

// TestBodyWithoutGetBody: a body the transport cannot ask for again is
// kept, and sent whole with the retry after the login.
func TestBodyWithoutGetBody(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	var got []string
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/mcp" {
			body, _ := io.ReadAll(r.Body)
			got = append(got, string(body))
		}
		rs.serve(w, r)
	}))
	defer echo.Close()
	rs.srv.Config.Handler = echo.Config.Handler
	a := newAuthorizer(t, rs, nil)
	req, _ := http.NewRequest(http.MethodPost, rs.url(), io.NopCloser(strings.NewReader("the body")))
	if req.GetBody != nil {
		t.Fatal("the request has GetBody")
	}
	resp, err := (&http.Client{Transport: a.Transport(nil)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || len(got) != 2 || got[0] != "the body" || got[1] != "the body" {
		t.Errorf("status %d, bodies %q", resp.StatusCode, got)
	}
}

// TestConfiguredScopes are asked for on top of the selected ones.
func TestConfiguredScopes(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	rs.challenge = []string{"mcp:basic"}
	a := newAuthorizer(t, rs, func(c *Config) { c.Scopes = []string{"extra", "mcp:basic"} })
	mustCall(t, a, rs, "")
	if got := as.authRequests[0].Get("scope"); got != "mcp:basic extra" {
		t.Errorf("scope %q", got)
	}
}

// TestLoginTimeout: a login whose redirect never comes fails after
// LoginTimeout, and the next request may try again.
func TestLoginTimeout(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	shown := 0
	a := newAuthorizer(t, rs, func(c *Config) {
		c.LoginTimeout = 50 * time.Millisecond
		c.Interact = func(context.Context, string) error { shown++; return nil }
	})
	for range 2 {
		_, err := call(t.Context(), a, rs, "")
		if !errors.Is(err, ErrAuthorization) || !strings.Contains(err.Error(), "no redirect from the browser") {
			t.Fatalf("err %v", err)
		}
	}
	if shown != 2 {
		t.Errorf("the login URL was shown %d times", shown)
	}
}
