package oauth

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// loggedIn is an Authorizer for rs, logged in through the browser, that
// cannot log in again by itself (no Interact): what follows shows how it
// renews, or fails to.
func loggedIn(t *testing.T, as *fakeAS, rs *fakeRS, mod func(*Config)) *Authorizer {
	t.Helper()
	a := newAuthorizer(t, rs, func(c *Config) {
		c.Interact = nil
		if mod != nil {
			mod(c)
		}
	})
	logIn(t, a)
	return a
}

// logIn logs a in through the test browser, as `snodod login` would.
func logIn(t *testing.T, a *Authorizer) {
	t.Helper()
	l, err := a.BeginLogin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := browser(t.Context(), l.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestSingleFlightRefresh: a token expiring under 100 concurrent requests
// causes exactly one refresh; every request then succeeds with the new
// token.
func TestSingleFlightRefresh(t *testing.T) {
	as := newFakeAS(t)
	as.refresh, as.rotate = true, true
	rs := newFakeRS(t, as)
	a := loggedIn(t, as, rs, nil)
	as.expireAll()
	as.refreshGate = make(chan struct{})
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if status, err := call(t.Context(), a, rs, ""); err != nil || status != 200 {
				errs <- errors.Join(err, errors.New(http.StatusText(status)))
			}
		})
	}
	// Hold the refresh until every request has met its 401.
	for {
		rs.mu.Lock()
		got := rs.unauthorized
		rs.mu.Unlock()
		if got >= n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(as.refreshGate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if refreshes, _, _, _ := as.counts(); refreshes != 1 {
		t.Errorf("%d refreshes for %d concurrent 401s, want 1", refreshes, n)
	}
}

// TestRefreshRotation: a rotated refresh token replaces the old one, which
// the server no longer accepts; the next refresh uses the new one.
func TestRefreshRotation(t *testing.T) {
	as := newFakeAS(t)
	as.refresh, as.rotate = true, true
	rs := newFakeRS(t, as)
	store, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := loggedIn(t, as, rs, func(c *Config) { c.Store = store })
	first := a.rec.Token.RefreshToken
	for i := range 3 {
		as.expireAll()
		mustCall(t, a, rs, "")
		a.mu.Lock()
		rt := a.rec.Token.RefreshToken
		a.mu.Unlock()
		if rt == first {
			t.Fatalf("refresh %d: the refresh token was not rotated", i)
		}
		first = rt
		stored, _, err := store.load("test")
		if err != nil || stored.Token.RefreshToken != rt {
			t.Fatalf("refresh %d: the store has another refresh token (%v)", i, err)
		}
	}
	if refreshes, _, auths, _ := as.counts(); refreshes != 3 || auths != 1 {
		t.Errorf("%d refreshes, %d logins", refreshes, auths)
	}
}

// TestRefreshRefusedMeansLoginRequired: invalid_grant puts the server in
// the login-required state; requests then fail at once, without a request
// to the server or its authorization server, until a login.
func TestRefreshRefusedMeansLoginRequired(t *testing.T) {
	as := newFakeAS(t)
	as.refresh = true
	rs := newFakeRS(t, as)
	a := loggedIn(t, as, rs, nil)
	as.refreshFail = "invalid_grant"
	as.expireAll()
	_, err := call(t.Context(), a, rs, "")
	if !errors.Is(err, ErrLoginRequired) || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("err %v", err)
	}
	if got := a.Status().String(); got != "login required" {
		t.Errorf("status %q", got)
	}
	rs.mu.Lock()
	sent := rs.requests
	rs.mu.Unlock()
	for range 20 {
		if _, err := call(t.Context(), a, rs, ""); !errors.Is(err, ErrLoginRequired) {
			t.Fatalf("err %v", err)
		}
	}
	rs.mu.Lock()
	again := rs.requests
	rs.mu.Unlock()
	refreshes, _, _, _ := as.counts()
	if again != sent || refreshes != 1 {
		t.Errorf("login required, yet %d requests to the server and %d refreshes", again-sent, refreshes)
	}
	// A login puts it right.
	as.refreshFail = ""
	logIn(t, a)
	mustCall(t, a, rs, "")
}

// TestRefreshFailureIsNotLoginRequired: an authorization server that is
// down, or answers garbage, makes the state "refresh failed", pauses the
// refreshes, and recovers when it is back.
func TestRefreshFailureIsNotLoginRequired(t *testing.T) {
	for _, mode := range []string{"500", "garbage"} {
		t.Run(mode, func(t *testing.T) {
			as := newFakeAS(t)
			as.refresh = true
			rs := newFakeRS(t, as)
			a := loggedIn(t, as, rs, nil)
			now := time.Now()
			a.now = func() time.Time { return now }
			as.refreshFail = mode
			as.expireAll()
			_, err := call(t.Context(), a, rs, "")
			if !errors.Is(err, ErrRefreshFailed) || errors.Is(err, ErrLoginRequired) {
				t.Fatalf("err %v", err)
			}
			if got := a.Status().String(); !strings.HasPrefix(got, "refresh failed: ") {
				t.Errorf("status %q", got)
			}
			// During the pause, no refresh.
			if _, err := call(t.Context(), a, rs, ""); !errors.Is(err, ErrRefreshFailed) {
				t.Fatalf("err %v", err)
			}
			if refreshes, _, _, _ := as.counts(); refreshes != 1 {
				t.Errorf("%d refreshes during the pause", refreshes)
			}
			as.refreshFail = ""
			now = now.Add(2 * time.Second)
			mustCall(t, a, rs, "")
			if got := a.Status().State; got != StateOK {
				t.Errorf("state %v after recovery", got)
			}
		})
	}
}

// TestRefreshBeforeExpiry: a refreshable token about to expire is renewed
// before the request, which then meets no 401.
func TestRefreshBeforeExpiry(t *testing.T) {
	as := newFakeAS(t)
	as.refresh = true
	rs := newFakeRS(t, as)
	a := loggedIn(t, as, rs, nil)
	later := time.Now().Add(59*time.Minute + 30*time.Second)
	a.now = func() time.Time { return later }
	mustCall(t, a, rs, "")
	if refreshes, _, _, _ := as.counts(); refreshes != 1 {
		t.Errorf("%d refreshes", refreshes)
	}
	if rs.unauthorized != 1 { // the first request, before the login
		t.Errorf("%d 401s", rs.unauthorized)
	}
}

// TestStepUp: a 403 insufficient_scope asks for the previously requested
// scopes plus the challenged ones, and the request then succeeds.
func TestStepUp(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	rs.challenge = []string{"mcp:basic"}
	rs.prmScopes = []string{"mcp:profile"}
	rs.need["write"] = []string{"mcp:write"}
	a := newAuthorizer(t, rs, nil)
	mustCall(t, a, rs, "list")
	mustCall(t, a, rs, "write")
	if len(as.authRequests) != 2 {
		t.Fatalf("%d authorizations", len(as.authRequests))
	}
	if got := as.authRequests[1].Get("scope"); got != "mcp:basic mcp:write" {
		t.Errorf("step-up scope %q, want the union", got)
	}
	mustCall(t, a, rs, "list")
	mustCall(t, a, rs, "write")
	if len(as.authRequests) != 2 {
		t.Errorf("%d authorizations after the step-up", len(as.authRequests))
	}
}

// TestStepUpRetryLimit: a scope the authorization server never grants
// costs at most 1+MaxStepUps authorizations, then fails, and is not asked
// for again.
func TestStepUpRetryLimit(t *testing.T) {
	as := newFakeAS(t)
	as.withhold = []string{"mcp:admin"}
	rs := newFakeRS(t, as)
	rs.challenge = []string{"mcp:basic"}
	rs.need["admin"] = []string{"mcp:admin"}
	a := newAuthorizer(t, rs, nil)
	_, err := call(t.Context(), a, rs, "admin")
	if !errors.Is(err, ErrInsufficientScope) {
		t.Fatalf("err %v", err)
	}
	if got := len(as.authRequests); got != 1+MaxStepUps {
		t.Errorf("%d authorizations, want %d", got, 1+MaxStepUps)
	}
	if _, err := call(t.Context(), a, rs, "admin"); !errors.Is(err, ErrInsufficientScope) {
		t.Fatalf("again: %v", err)
	}
	if got := len(as.authRequests); got != 1+MaxStepUps {
		t.Errorf("asked again: %d authorizations", got)
	}
	mustCall(t, a, rs, "") // other operations are fine
}

// TestFreshTokenRejected: a server that refuses a token just obtained gets
// one login, not a loop.
func TestFreshTokenRejected(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	rs.rejectAll = true
	a := newAuthorizer(t, rs, nil)
	_, err := call(t.Context(), a, rs, "")
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("err %v", err)
	}
	if _, _, auths, _ := as.counts(); auths != 1 {
		t.Errorf("%d logins", auths)
	}
}

// TestTokenStaysOnItsOrigin: the transport never puts the token on a
// request to another origin.
func TestTokenStaysOnItsOrigin(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	a := newAuthorizer(t, rs, nil)
	mustCall(t, a, rs, "")
	var got string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Authorization") }))
	defer other.Close()
	resp, err := (&http.Client{Transport: a.Transport(nil)}).Get(other.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got != "" {
		t.Errorf("the token went to another origin: %q", got)
	}
}

// TestNoSecretInErrorsOrLogs: the errors and logs of every failure path
// hold no token, refresh token, client secret or code.
func TestNoSecretInErrorsOrLogs(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	as := newFakeAS(t)
	as.refresh = true
	as.authMethods = []string{AuthClientSecretBasic}
	rs := newFakeRS(t, as)
	rs.need["admin"] = []string{"mcp:admin"}
	as.withhold = []string{"mcp:admin"}
	a := loggedIn(t, as, rs, func(c *Config) { c.Logger = logger })
	var errs []error
	record := func(_ int, err error) { errs = append(errs, err) }
	record(call(t.Context(), a, rs, "admin")) // step-up without a way to log in
	as.refreshFail = "500"
	as.expireAll()
	record(call(t.Context(), a, rs, ""))
	a.now = func() time.Time { return time.Now().Add(time.Hour) }
	as.refreshFail = "invalid_grant"
	record(call(t.Context(), a, rs, ""))
	rs.rejectAll = true
	record(call(t.Context(), newAuthorizer(t, rs, func(c *Config) { c.Logger = logger }), rs, ""))
	_, revokeErr := a.Logout(t.Context())
	errs = append(errs, revokeErr)

	as.mu.Lock()
	var secrets []string
	for k := range as.tokens {
		secrets = append(secrets, k)
	}
	for k := range as.refreshes {
		secrets = append(secrets, k)
	}
	for _, c := range as.clients {
		if c.secret != "" {
			secrets = append(secrets, c.secret)
		}
	}
	for _, f := range as.tokenForms {
		for _, k := range []string{"code", "refresh_token", "code_verifier"} {
			if v := f.Get(k); v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	as.mu.Unlock()
	if len(secrets) < 4 {
		t.Fatalf("only %d secrets to look for", len(secrets))
	}
	for _, err := range errs {
		if err == nil {
			continue
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q holds a secret", err)
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the log holds a secret:\n%s", logs.String())
		}
	}
}

// TestRevokedRefreshTokenOthersFine: one server's revoked refresh token
// makes it login-required; another server, on the same store, is fine.
func TestRevokedRefreshTokenOthersFine(t *testing.T) {
	store, _ := OpenStore(t.TempDir())
	as := newFakeAS(t)
	as.refresh = true
	rs1, rs2 := newFakeRS(t, as), newFakeRS(t, as)
	a1 := loggedIn(t, as, rs1, func(c *Config) { c.Name, c.Store = "one", store })
	a2 := loggedIn(t, as, rs2, func(c *Config) { c.Name, c.Store = "two", store })
	as.mu.Lock()
	for rt, g := range as.refreshes {
		if g.resource == rs1.url() {
			delete(as.refreshes, rt) // revoked
		}
	}
	as.mu.Unlock()
	as.expireAll()
	if _, err := call(t.Context(), a1, rs1, ""); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("server one: %v", err)
	}
	mustCall(t, a2, rs2, "")
	if s1, s2 := a1.Status().String(), a2.Status().String(); s1 != "login required" || !strings.HasPrefix(s2, "ok") {
		t.Errorf("statuses %q, %q", s1, s2)
	}
}

// TestLoginTakesTheRequestsChallenge: a login begun after a request found
// one required (snodod login, or a login asked of a client) asks for the
// scope that request was challenged with, not what a probe of its own
// would be told (here: nothing).
func TestLoginTakesTheRequestsChallenge(t *testing.T) {
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	rs.challenge = []string{"mcp:tools"}
	a := newAuthorizer(t, rs, func(c *Config) { c.Interact = nil })
	if _, err := call(t.Context(), a, rs, ""); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("a request without a login: %v", err)
	}
	rs.mu.Lock()
	rs.challenge = nil
	rs.mu.Unlock()
	l, err := a.BeginLogin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	if scope := u.Query().Get("scope"); !slices.Contains(strings.Fields(scope), "mcp:tools") {
		t.Errorf("the login asks for scope %q, want the request's mcp:tools", scope)
	}
}
