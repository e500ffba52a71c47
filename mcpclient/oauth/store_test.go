package oauth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStoreFiles: one file per server, mode 0600, in a directory of mode
// 0700, replaced atomically (nothing left beside it), readable again.
func TestStoreFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "oauth")
	store, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	as := newFakeAS(t)
	as.refresh = true
	rs := newFakeRS(t, as)
	a := loggedIn(t, as, rs, func(c *Config) { c.Store = store })
	for range 3 {
		as.expireAll()
		mustCall(t, a, rs, "")
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory: %v %v", fi.Mode(), err)
	}
	fi, err := os.Stat(store.Path("test"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v", fi.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "test.json test.lock" {
		t.Errorf("the store holds %q", names)
	}
	// A new Authorizer (a restart) uses the stored token: no login.
	b := newAuthorizer(t, rs, func(c *Config) { c.Store, c.Interact = store, nil })
	mustCall(t, b, rs, "")
	if _, _, auths, regs := as.counts(); auths != 1 || regs != 1 {
		t.Errorf("%d logins and %d registrations across a restart", auths, regs)
	}
	if err := store.Remove("test"); err != nil {
		t.Fatal(err)
	}
	if err := store.Remove("test"); err != nil {
		t.Errorf("removing twice: %v", err)
	}
}

// TestStoreRefusesOddNames: a name is a file name in the store's
// directory, nothing else.
func TestStoreRefusesOddNames(t *testing.T) {
	for _, name := range []string{"", "../x", "a/b", ".hidden", "x y", strings.Repeat("a", 201)} {
		if err := checkName(name); err == nil {
			t.Errorf("%q accepted", name)
		}
	}
	for _, name := range []string{"github", "my-server_2", "x.y", "a@b"} {
		if err := checkName(name); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestStoreUnreadable: a damaged file is reported by name, without its
// contents.
func TestStoreUnreadable(t *testing.T) {
	store, _ := OpenStore(t.TempDir())
	os.WriteFile(store.Path("x"), []byte(`{"token":{"access_token":"sekrit"`), 0o600)
	_, err := New(Config{Name: "x", ServerURL: "https://mcp.example.com/mcp", Store: store})
	if err == nil || !strings.Contains(err.Error(), store.Path("x")) || strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("err %v", err)
	}
}

// TestTwoProcessesOneRefresh: two Authorizers on one store (two
// processes, say the daemon and a CLI) with a rotating refresh token
// refresh it once between them: the second, having waited for the lock,
// reads the first's new token.
func TestTwoProcessesOneRefresh(t *testing.T) {
	store, _ := OpenStore(t.TempDir())
	as := newFakeAS(t)
	as.refresh, as.rotate = true, true
	rs := newFakeRS(t, as)
	a := loggedIn(t, as, rs, func(c *Config) { c.Store = store })
	b := newAuthorizer(t, rs, func(c *Config) { c.Store, c.Interact = store, nil })
	as.expireAll()
	var wg sync.WaitGroup
	for _, x := range []*Authorizer{a, b, a, b, a, b} {
		wg.Go(func() {
			if status, err := call(t.Context(), x, rs, ""); err != nil || status != 200 {
				t.Error(status, err)
			}
		})
	}
	wg.Wait()
	if refreshes, _, _, _ := as.counts(); refreshes != 1 {
		t.Errorf("%d refreshes", refreshes)
	}
}

// TestLoginElsewhereIsNoticed: a server in the login-required state
// notices a login made by another process through the store.
func TestLoginElsewhereIsNoticed(t *testing.T) {
	store, _ := OpenStore(t.TempDir())
	as := newFakeAS(t)
	rs := newFakeRS(t, as)
	daemon := newAuthorizer(t, rs, func(c *Config) { c.Store, c.Interact = store, nil })
	if _, err := call(t.Context(), daemon, rs, ""); !errors.Is(err, ErrLoginRequired) {
		t.Fatalf("err %v", err)
	}
	// `snodod login` in another process.
	cli := loggedIn(t, as, rs, func(c *Config) { c.Store = store })
	_ = cli
	if got := daemon.Status().State; got != StateOK {
		t.Errorf("state %v after the login elsewhere", got)
	}
	mustCall(t, daemon, rs, "")
}

// TestLogout: the refresh token and the access token are revoked where
// the server offers it, the tokens forgotten, the registration kept.
func TestLogout(t *testing.T) {
	store, _ := OpenStore(t.TempDir())
	as := newFakeAS(t)
	as.refresh, as.revocation = true, true
	rs := newFakeRS(t, as)
	a := loggedIn(t, as, rs, func(c *Config) { c.Store = store })
	revoked, err := a.Logout(t.Context())
	if err != nil || !revoked {
		t.Fatalf("revoked %v, err %v", revoked, err)
	}
	if strings.Join(as.revoked, " ") != "refresh_token access_token" {
		t.Errorf("revoked %q", as.revoked)
	}
	if got := a.Status().String(); got != "login required" {
		t.Errorf("status %q", got)
	}
	rec, _, _ := store.load("test")
	if rec.Token != nil || len(rec.Clients) != 1 {
		t.Errorf("after logout the store has token %v and %d clients", rec.Token != nil, len(rec.Clients))
	}
	// Without a revocation endpoint: forgotten, not revoked.
	as2 := newFakeAS(t)
	rs2 := newFakeRS(t, as2)
	b := loggedIn(t, as2, rs2, nil)
	if revoked, err := b.Logout(t.Context()); err != nil || revoked {
		t.Errorf("revoked %v, err %v", revoked, err)
	}
}

// TestStatusFormat pins the strings `status` shows.
func TestStatusFormat(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		st   Status
		want string
	}{
		{Status{State: StateOK, Expiry: now.Add(52*time.Minute + 10*time.Second)}, "ok (expires in 52m)"},
		{Status{State: StateOK, Expiry: now.Add(30 * time.Second)}, "ok (expires in 30s)"},
		{Status{State: StateOK, Expiry: now.Add(3*time.Hour + 5*time.Minute)}, "ok (expires in 3h5m)"},
		{Status{State: StateOK, Expiry: now.Add(50 * time.Hour)}, "ok (expires in 2d2h)"},
		{Status{State: StateOK}, "ok"},
		{Status{State: StateOK, Expiry: now.Add(-time.Minute), Refreshable: true}, "ok (expired, renewed at the next request)"},
		{Status{State: StateOK, Expiry: now.Add(-time.Minute)}, "login required (the token expired)"},
		{Status{State: StateLoginRequired, Reason: "x"}, "login required"},
		{Status{State: StateRefreshFailed, Reason: "connection refused"}, "refresh failed: connection refused"},
		{Status{}, "none"},
	} {
		if got := c.st.Format(now); got != c.want {
			t.Errorf("%+v: %q, want %q", c.st, got, c.want)
		}
	}
}
