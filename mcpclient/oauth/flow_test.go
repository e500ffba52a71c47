package oauth

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestLoginThroughTransport: a request without a token gets a 401; the
// transport finds the authorization server from the challenge, registers
// a native client on a 127.0.0.1 redirect, logs in through the browser
// with PKCE S256, state and the resource, and sends the request again.
func TestLoginThroughTransport(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	a := newAuthorizer(t, rs, nil)
	if got := a.Status().State; got != StateNone {
		t.Fatalf("before: %v", got)
	}
	mustCall(t, a, rs, "")

	if len(as.registered) != 1 {
		t.Fatalf("%d registrations", len(as.registered))
	}
	reg := as.registered[0]
	if reg.ApplicationType != "native" || !has(reg.GrantTypes, "refresh_token") || reg.TokenEndpointAuthMethod != AuthNone {
		t.Errorf("registration %+v", reg)
	}
	redirect, err := url.Parse(reg.RedirectURIs[0])
	if err != nil || redirect.Scheme != "http" || redirect.Hostname() != "127.0.0.1" || redirect.Port() == "" {
		t.Errorf("redirect URI %q is not a 127.0.0.1 loopback one", reg.RedirectURIs[0])
	}
	q := as.authRequests[0]
	if q.Get("resource") != rs.url() || q.Get("code_challenge_method") != "S256" || len(q.Get("state")) < 32 {
		t.Errorf("authorization request %v", q)
	}
	if q.Has("scope") {
		t.Errorf("a scope was asked for although nothing defines one: %q", q.Get("scope"))
	}
	form := as.tokenForms[0]
	if form.Get("resource") != rs.url() || form.Get("grant_type") != "authorization_code" {
		t.Errorf("token request %v", form)
	}
	st := a.Status()
	if st.State != StateOK || st.Issuer != as.issuer() || !strings.HasPrefix(st.String(), "ok (expires in 59m") {
		t.Errorf("status %+v %q", st, st)
	}
	// The next request carries the token: no new login.
	mustCall(t, a, rs, "")
	if _, _, auths, _ := as.counts(); auths != 1 {
		t.Errorf("%d authorization requests, want 1", auths)
	}
}

// TestDiscoveryLocations: the protected resource metadata and the
// authorization server metadata are found at each location MCP allows,
// tried in its order, and never at the issuer's root when it has a path.
func TestDiscoveryLocations(t *testing.T) {
	for _, c := range []struct {
		name      string
		prmPath   string
		inHeader  bool
		prefix    string
		wellKnown string
	}{
		{"path-aware PRM in the challenge, RFC 8414", "/.well-known/oauth-protected-resource/mcp", true, "", "oauth"},
		{"path-aware PRM by probing, OpenID", "/.well-known/oauth-protected-resource/mcp", false, "", "openid"},
		{"root PRM by probing, RFC 8414 with the path inserted", "/.well-known/oauth-protected-resource", false, "/tenant1", "oauth"},
		{"custom PRM in the challenge, OpenID with the path appended", "/custom/metadata/location.json", true, "/tenant1", "openid-append"},
		{"OpenID with the path inserted", "/.well-known/oauth-protected-resource/mcp", true, "/tenant1", "openid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := newFakeAS(t)
			as.prefix, as.wellKnown = c.prefix, c.wellKnown
			rs := newFakeRS(t, as)
			rs.prmPath, rs.inHeader = c.prmPath, c.inHeader
			a := newAuthorizer(t, rs, nil)
			mustCall(t, a, rs, "")
			wantResource := rs.url()
			if c.prmPath == "/.well-known/oauth-protected-resource" {
				wantResource = rs.srv.URL
			}
			if got := as.authRequests[0].Get("resource"); got != wantResource {
				t.Errorf("resource %q, want %q", got, wantResource)
			}
		})
	}
}

// TestMetadataURLOrder pins the well-known URLs, in order.
func TestMetadataURLOrder(t *testing.T) {
	u, _ := url.Parse("https://auth.example.com/tenant1")
	want := []string{
		"https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
		"https://auth.example.com/.well-known/openid-configuration/tenant1",
		"https://auth.example.com/tenant1/.well-known/openid-configuration",
	}
	if got := serverMetadataURLs(u); !slices.Equal(got, want) {
		t.Errorf("%q", got)
	}
	u, _ = url.Parse("https://auth.example.com/")
	want = []string{"https://auth.example.com/.well-known/oauth-authorization-server", "https://auth.example.com/.well-known/openid-configuration"}
	if got := serverMetadataURLs(u); !slices.Equal(got, want) {
		t.Errorf("%q", got)
	}
	u, _ = url.Parse("https://example.com/public/mcp")
	want = []string{"https://example.com/.well-known/oauth-protected-resource/public/mcp", "https://example.com/.well-known/oauth-protected-resource"}
	if got := resourceMetadataURLs(u); !slices.Equal(got, want) {
		t.Errorf("%q", got)
	}
	u, _ = url.Parse("https://example.com")
	if got := resourceMetadataURLs(u); !slices.Equal(got, want[1:]) {
		t.Errorf("%q", got)
	}
}

// TestRefusals: what the specification says to refuse is refused before
// anything is sent to the authorization server it would trust.
func TestRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*fakeAS, *fakeRS)
		want string
	}{
		{"resource mismatch", func(as *fakeAS, rs *fakeRS) { rs.resource = "https://evil.example.com/mcp" }, "resource mismatch"},
		{"resource on another port", func(as *fakeAS, rs *fakeRS) { rs.resource = "http://127.0.0.1:1/mcp" }, "resource mismatch"},
		{"resource for a sibling path", func(as *fakeAS, rs *fakeRS) { rs.resource = rs.srv.URL + "/mc" }, "resource mismatch"},
		{"issuer mismatch", func(as *fakeAS, rs *fakeRS) { as.issuerClaim = "https://attacker.example.com" }, "issuer mismatch"},
		{"issuer differing by a trailing slash", func(as *fakeAS, rs *fakeRS) { as.issuerClaim = as.issuer() + "/" }, "issuer mismatch"},
		{"no PKCE", func(as *fakeAS, rs *fakeRS) { as.noPKCE = true }, "PKCE S256"},
		{"garbage metadata", func(as *fakeAS, rs *fakeRS) { as.garbage = true }, "not a JSON object"},
		{"no way to identify", func(as *fakeAS, rs *fakeRS) { as.noDCR = true }, "neither client ID metadata documents nor dynamic registration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := newFakeAS(t)
			rs := newFakeRS(t, as)
			c.set(as, rs)
			a := newAuthorizer(t, rs, nil)
			_, err := call(t.Context(), a, rs, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want %q", err, c.want)
			}
			if _, tokens, auths, regs := as.counts(); tokens+auths+regs != 0 {
				t.Errorf("the client still used the authorization server: %d token, %d authorization, %d registration requests", tokens, auths, regs)
			}
		})
	}
}

// TestUnreachableAuthorizationServer: the error says discovery failed and
// where; nothing hangs.
func TestUnreachableAuthorizationServer(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	a := newAuthorizer(t, rs, nil)
	as.srv.Close()
	_, err := call(t.Context(), a, rs, "")
	if !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "authorization server metadata") {
		t.Fatalf("err %v", err)
	}
}

// TestInsecureAuthorizationServer: plain HTTP outside loopback is refused
// unless allowed.
func TestInsecureAuthorizationServer(t *testing.T) {
	a := &Authorizer{cfg: Config{}.withDefaults(), name: "x"}
	for _, c := range []struct {
		u  string
		ok bool
	}{
		{"https://as.example.com", true},
		{"http://localhost:8080", true},
		{"http://127.0.0.1:8080", true},
		{"http://[::1]:8080", true},
		{"http://as.example.com", false},
		{"http://10.0.0.1", false},
		{"ftp://as.example.com", false},
	} {
		u, _ := url.Parse(c.u)
		if err := a.checkSecure(u); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.u, err)
		}
	}
	a.cfg.AllowInsecureHTTP = true
	u, _ := url.Parse("http://as.example.com")
	if err := a.checkSecure(u); err != nil {
		t.Errorf("allowed: %v", err)
	}
}

// TestScopeSelection: the challenge's scope, else every scope of
// scopes_supported, else none; offline_access only when the authorization
// server lists it.
func TestScopeSelection(t *testing.T) {
	for _, c := range []struct {
		name      string
		challenge []string
		prm       []string
		asScopes  []string
		want      string
		present   bool
	}{
		{"from the challenge", []string{"mcp:basic"}, []string{"mcp:a", "mcp:b"}, nil, "mcp:basic", true},
		{"from scopes_supported", nil, []string{"mcp:basic", "mcp:read", "mcp:write"}, nil, "mcp:basic mcp:read mcp:write", true},
		{"omitted", nil, nil, nil, "", false},
		{"offline_access when listed", nil, []string{"mcp:basic"}, []string{"mcp:basic", "offline_access"}, "mcp:basic offline_access", true},
		{"no offline_access when not listed", nil, []string{"mcp:basic", "mcp:read"}, []string{"mcp:basic", "mcp:read"}, "mcp:basic mcp:read", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := newFakeAS(t)
			as.scopes = c.asScopes
			rs := newFakeRS(t, as)
			rs.challenge, rs.prmScopes = c.challenge, c.prm
			a := newAuthorizer(t, rs, nil)
			mustCall(t, a, rs, "")
			q := as.authRequests[0]
			if q.Has("scope") != c.present || q.Get("scope") != c.want {
				t.Errorf("scope %q (present %v), want %q", q.Get("scope"), q.Has("scope"), c.want)
			}
		})
	}
}

// TestIssuerParameter: RFC 9207 as MCP applies it. A rejected response is
// never exchanged.
func TestIssuerParameter(t *testing.T) {
	for _, c := range []struct {
		name      string
		supported bool
		mode      string
		ok        bool
	}{
		{"advertised and correct", true, "correct", true},
		{"not advertised, absent", false, "omit", true},
		{"advertised, absent", true, "omit", false},
		{"advertised, wrong", true, "wrong", false},
		{"not advertised, wrong", false, "wrong", false},
		{"advertised, normalized variant", true, "normalized", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			as := newFakeAS(t)
			as.issSupported, as.issMode = c.supported, c.mode
			rs := newFakeRS(t, as)
			a := newAuthorizer(t, rs, nil)
			_, err := call(t.Context(), a, rs, "")
			if (err == nil) != c.ok {
				t.Fatalf("err %v", err)
			}
			_, tokens, auths, _ := as.counts()
			if auths != 1 {
				t.Errorf("%d authorization requests", auths)
			}
			if (tokens == 1) != c.ok {
				t.Errorf("%d token requests", tokens)
			}
			if !c.ok && !errors.Is(err, ErrAuthorization) {
				t.Errorf("err %v is not ErrAuthorization", err)
			}
		})
	}
}

// TestAuthorizationDenied: the authorization server's error is reported
// (its iss being right).
func TestAuthorizationDenied(t *testing.T) {
	as := newFakeAS(t)
	as.deny = true
	rs := newFakeRS(t, as)
	a := newAuthorizer(t, rs, nil)
	_, err := call(t.Context(), a, rs, "")
	if !errors.Is(err, ErrAuthorization) || !strings.Contains(err.Error(), "access_denied: the person said no") {
		t.Fatalf("err %v", err)
	}
}

// TestTokenEndpointAuth: a pre-registered client authenticates as the
// server supports; a registered public one sends its client_id alone.
func TestTokenEndpointAuth(t *testing.T) {
	for _, c := range []struct {
		methods []string
		secret  string
		want    string
	}{
		{[]string{AuthClientSecretBasic}, "s3cret:/+", AuthClientSecretBasic},
		{[]string{AuthClientSecretPost}, "s3cret", AuthClientSecretPost},
		{[]string{AuthClientSecretPost, AuthClientSecretBasic}, "s3cret", AuthClientSecretBasic},
		{nil, "s3cret", AuthClientSecretBasic}, // absent: basic (RFC 8414)
		{[]string{AuthNone}, "", AuthNone},
	} {
		t.Run(c.want, func(t *testing.T) {
			as := newFakeAS(t)
			as.authMethods, as.noDCR = c.methods, true
			as.clients["pre"] = fakeClient{secret: c.secret, method: c.want}
			rs := newFakeRS(t, as)
			a := newAuthorizer(t, rs, func(cfg *Config) { cfg.ClientID, cfg.ClientSecret = "pre", c.secret })
			mustCall(t, a, rs, "")
			form, auth := as.tokenForms[0], as.tokenAuth[0]
			switch c.want {
			case AuthClientSecretBasic:
				if !strings.HasPrefix(auth, "Basic ") || form.Has("client_secret") {
					t.Errorf("auth %q form %v", auth, form)
				}
			case AuthClientSecretPost:
				if auth != "" || form.Get("client_secret") != c.secret || form.Get("client_id") != "pre" {
					t.Errorf("auth %q form %v", auth, form)
				}
			case AuthNone:
				if auth != "" || form.Has("client_secret") || form.Get("client_id") != "pre" {
					t.Errorf("auth %q form %v", auth, form)
				}
			}
		})
	}
}

// TestClientIDMetadataDocument: with an authorization server that supports
// them, the metadata document URL is the client_id and nothing registers.
func TestClientIDMetadataDocument(t *testing.T) {
	as := newFakeAS(t)
	as.cimd = true
	rs := newFakeRS(t, as)
	const doc = "https://client.example.com/metadata.json"
	a := newAuthorizer(t, rs, func(c *Config) { c.ClientMetadataURL = doc })
	mustCall(t, a, rs, "")
	if got := as.authRequests[0].Get("client_id"); got != doc {
		t.Errorf("client_id %q", got)
	}
	if len(as.registered) != 0 {
		t.Errorf("registered although CIMD is supported")
	}
	// Without CIMD support, the same configuration registers.
	as2 := newFakeAS(t)
	rs2 := newFakeRS(t, as2)
	mustCall(t, newAuthorizer(t, rs2, func(c *Config) { c.ClientMetadataURL = doc }), rs2, "")
	if len(as2.registered) != 1 {
		t.Errorf("%d registrations without CIMD support", len(as2.registered))
	}
}

// TestPreRegisteredClientBoundToIssuer: a pre-registered client bound to
// one issuer is never shown to another.
func TestPreRegisteredClientBoundToIssuer(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	a := newAuthorizer(t, rs, func(c *Config) { c.ClientID, c.ClientIssuer = "pre", "https://other.example.com" })
	_, err := call(t.Context(), a, rs, "")
	if !errors.Is(err, ErrRegistration) || !strings.Contains(err.Error(), "registered with https://other.example.com") {
		t.Fatalf("err %v", err)
	}
	if _, _, auths, _ := as.counts(); auths != 0 {
		t.Error("the client was shown to the other authorization server")
	}
}

// TestPastedRedirect: BeginLogin and a pasted redirect URL (an SSH
// session's browser elsewhere); a URL from another login is refused.
func TestPastedRedirect(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	a := newAuthorizer(t, rs, func(c *Config) { c.Interact = nil })
	if _, err := call(t.Context(), a, rs, ""); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("err %v", err)
	}
	if got := a.Status().String(); got != "login required" {
		t.Fatalf("status %q", got)
	}
	l, err := a.BeginLogin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// The browser is elsewhere: it cannot reach the redirect; the person
	// copies its address.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	other := strings.Replace(loc, "state=", "state=x", 1)
	if _, err := l.Complete(t.Context(), other); err == nil || !strings.Contains(err.Error(), "not from this login") {
		t.Fatalf("another login's URL: %v", err)
	}
	res, err := l.Complete(t.Context(), "  "+loc+"\n")
	if err != nil {
		t.Fatal(err)
	}
	if res.Issuer != as.issuer() || !strings.Contains(res.String(), "logged in at "+as.issuer()) {
		t.Errorf("result %+v", res)
	}
	mustCall(t, a, rs, "")
	// The loopback listener answers a second completion with the first's
	// outcome, and a stranger's redirect (another state) with 400.
	stray, _ := http.Get(strings.Replace(loc, "state=", "state=x", 1))
	stray.Body.Close()
	if stray.StatusCode != 400 {
		t.Errorf("stray redirect: %d", stray.StatusCode)
	}
}
