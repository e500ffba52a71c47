package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeremote"
)

// serveRemote serves h on loopback until the test ends; fr's sessions end
// then too.
func serveRemote(t *testing.T, fr *fakeremote.Server, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		fr.Close()
		ts.Close()
	})
	return ts
}

// A remote server is a hosted server like a started one: listed and
// called in the aggregated view, its status row naming its URL (and no
// process), stopped when idle (its session deleted), connected again by
// the next call.
func TestRemoteHosted(t *testing.T) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless, fakeremote.ModeSSE} {
		t.Run(mode, func(t *testing.T) {
			fr := fakeremote.New("far")
			ts := serveRemote(t, fr, fr.Handler(mode))
			typ := "http"
			if mode == fakeremote.ModeSSE {
				typ = "sse"
			}
			h := newHarness(t, fmt.Sprintf(`
[mcpServers.far]
url = %q
type = %q
idle_timeout = "300ms"
[mcpServers.fake]
command = "FAKE"
`, ts.URL+"/", typ))
			c := h.connect("", "", "2025-11-25")
			got := names(t, c.call("tools/list", ""), "tools", "name")
			if !slices.Contains(got, "far__echo") || !slices.Contains(got, "fake__echo") {
				t.Fatalf("tools: %v", got)
			}
			if s := text(t, c.call("tools/call", fakeTool("far__echo", `{"text":"hi"}`))); s != "far: hi" {
				t.Errorf("far__echo: %q", s)
			}
			row := h.row("far", "")
			if row.State != StateReady || row.PID != 0 || row.URL != ts.URL+"/" || row.Share != "all" || row.Auth != "" {
				t.Errorf("status row %+v", row)
			}
			eventually.True(t, "the idle stop", func() bool { return h.row("far", "").State == StateStopped })
			if mode == fakeremote.ModeStreamable {
				eventually.True(t, "the session's DELETE", func() bool { return fr.Deletes.Load() >= 1 })
			}
			if s := text(t, c.call("tools/call", fakeTool("far__echo", `{"text":"again"}`))); s != "far: again" {
				t.Errorf("after the idle stop: %q", s)
			}
		})
	}
}

// A remote server down at the start: its calls fail naming its URL, the
// started server beside it answers; once the server is up, the next start
// connects. Down during a call: the call fails saying the connection was
// lost, and the restart reconnects.
func TestRemoteDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := newHarness(t, fmt.Sprintf(`
[mcpServers.far]
url = "http://%s/mcp"
restart = { initial_delay = "10ms", max_delay = "50ms", max_attempts = 100 }
[mcpServers.fake]
command = "FAKE"
`, addr))
	c := h.connect("", "", "2025-11-25")
	if msg := failureText(t, c.call("tools/call", fakeTool("far__echo", ""))); !strings.Contains(msg, "cannot reach http://"+addr+"/mcp") || !strings.Contains(msg, "connection refused") {
		t.Errorf("a call to a server that is down: %s", msg)
	}
	result(t, c.call("tools/call", fakeTool("fake__echo", ""))) // the other one answers

	fr := fakeremote.New("far")
	var ln2 net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln2, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	ts := httptest.NewUnstartedServer(http.StripPrefix("", fr.Handler(fakeremote.ModeStreamable)))
	ts.Listener = ln2
	ts.Start()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		fr.Close()
		ts.Close()
	})
	eventually.True(t, "the server to be connected", func() bool { return h.row("far", "").State == StateReady })
	if s := text(t, c.call("tools/call", fakeTool("far__echo", `{"text":"up"}`))); s != "far: up" {
		t.Errorf("once up: %q", s)
	}

	done := c.start("99", "tools/call", fakeTool("far__slow", `{"delay_ms":60000}`))
	eventually.True(t, "the slow call to reach the server", func() bool { return fr.Calls.Load() == 2 })
	ts.CloseClientConnections()
	fr.Close()
	res := c.wait(done)
	if !isError(t, res) || !strings.Contains(text(t, res), `upstream "far"`) {
		t.Errorf("the call in flight when the server went: %s", res["result"])
	}
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
}

// A server error fails its call, in the server's words, beside a healthy
// call; the connection stays.
func TestRemoteErrorStatus(t *testing.T) {
	fr := fakeremote.New("far")
	ts := serveRemote(t, fr, fr.Handler(fakeremote.ModeStateless))
	h := newHarness(t, fmt.Sprintf("[mcpServers.far]\nurl = %q\n", ts.URL))
	c := h.connect("", "", "2025-11-25")
	result(t, c.call("tools/call", fakeTool("far__echo", "")))
	fr.FailNext(http.StatusServiceUnavailable, 1)
	res := c.call("tools/call", fakeTool("far__echo", ""))
	if !isError(t, res) || !strings.Contains(text(t, res), ts.URL+" answered 503 Service Unavailable") {
		t.Errorf("a 503: %s", res["result"])
	}
	if s := text(t, c.call("tools/call", fakeTool("far__echo", `{"text":"ok"}`))); s != "far: ok" || h.row("far", "").State != StateReady {
		t.Errorf("after the 503: %q %s", s, h.row("far", "").State)
	}
}

// failureText is a failed call's message: its error's, or its isError
// result's text (a server never listed has no tools/call of its own to
// shape one).
func failureText(t *testing.T, res map[string]json.RawMessage) string {
	t.Helper()
	if res["error"] != nil {
		_, msg, _ := errorOf(t, res)
		return msg
	}
	if !isError(t, res) {
		t.Errorf("the call succeeded: %s", res["result"])
	}
	return text(t, res)
}

// browse follows a login's URL as a person's browser does: the fake
// authorization server sends it straight back to the login's listener.
func browse(t *testing.T, u string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("the browser: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the browser ended on %d", resp.StatusCode)
	}
}

// A remote server that needs a login: the call is told to run snodod
// login (no retries in a loop: the authorization is not asked again until
// a person acts), status says "login required", the other server answers;
// after the login the waiting instance starts at once and serves; the
// token lives in the state directory, 0600, and never in status.
func TestRemoteLogin(t *testing.T) {
	fr, auth := fakeremote.New("far"), fakeremote.NewAuth()
	ts := serveRemote(t, fr, auth.Protect("/mcp", fr.Handler(fakeremote.ModeStreamable)))
	h := newHarness(t, fmt.Sprintf("[mcpServers.far]\nurl = %q\n[mcpServers.fake]\ncommand = \"FAKE\"\n", ts.URL+"/mcp"))
	c := h.connect("", "", "2025-11-25")
	for range 3 {
		if msg := failureText(t, c.call("tools/call", fakeTool("far__echo", ""))); !strings.Contains(msg, `upstream "far" needs a login: run snodod login far`) {
			t.Errorf("a call before the login: %s", msg)
		}
	}
	row := h.row("far", "")
	if row.Auth != "login required" || row.State != StateFailed || !strings.Contains(row.Cause, "snodod login far") {
		t.Errorf("status before the login: %+v", row)
	}
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))

	login, err := h.m.Login(context.Background(), "far")
	if err != nil {
		t.Fatal(err)
	}
	defer login.Close()
	browse(t, login.URL)
	if _, err := login.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.m.LoggedIn("far")
	eventually.True(t, "the instance to start after the login", func() bool { return h.row("far", "").State == StateReady })
	if s := text(t, c.call("tools/call", fakeTool("far__echo", `{"text":"in"}`))); s != "far: in" {
		t.Errorf("after the login: %q", s)
	}
	row = h.row("far", "")
	if !strings.HasPrefix(row.Auth, "ok (expires in ") {
		t.Errorf("status after the login: %q", row.Auth)
	}
	file := filepath.Join(h.stateDir, "oauth", "far.json")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the token file: %v %v", fi, err)
	}

	// A logout revokes; the next call is told to log in again.
	revoked, err := h.m.Logout(context.Background(), "far")
	if err != nil || !revoked || auth.Revocations.Load() == 0 {
		t.Errorf("logout: revoked %v, err %v", revoked, err)
	}
	res := c.call("tools/call", fakeTool("far__echo", ""))
	if !isError(t, res) || !strings.Contains(text(t, res), "snodod login far") {
		t.Errorf("after the logout: %s", res["result"])
	}
	if _, err := h.m.Login(context.Background(), "fake"); err == nil || !strings.Contains(err.Error(), "not a remote server") {
		t.Errorf("a login to a started server: %v", err)
	}
}

// loggedIn serves a protected fake remote server far beside the fake, and
// logs in to it.
func loggedIn(t *testing.T, mode string) (*harness, *fakeremote.Server, *fakeremote.Auth, *client) {
	t.Helper()
	fr, auth := fakeremote.New("far"), fakeremote.NewAuth()
	ts := serveRemote(t, fr, auth.Protect("/mcp", fr.Handler(mode)))
	h := newHarness(t, fmt.Sprintf("[upstreams]\nmax_queued = 128\n[mcpServers.far]\nurl = %q\nstart = \"manual\"\n[mcpServers.fake]\ncommand = \"FAKE\"\n", ts.URL+"/mcp"))
	login, err := h.m.Login(context.Background(), "far")
	if err != nil {
		t.Fatal(err)
	}
	browse(t, login.URL)
	if _, err := login.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	login.Close()
	if err := h.m.Start("far"); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "far to be ready", func() bool { return h.row("far", "").State == StateReady })
	return h, fr, auth, h.connect("", "", "2025-11-25")
}

// A token that expires under 100 concurrent calls is refreshed once: the
// other 99 wait for that refresh and share it; every call succeeds.
func TestRemoteRefreshOnce(t *testing.T) {
	for _, mode := range []string{fakeremote.ModeStreamable, fakeremote.ModeStateless} {
		t.Run(mode, func(t *testing.T) {
			h, fr, auth, c := loggedIn(t, mode)
			result(t, c.call("tools/call", fakeTool("far__echo", "")))
			auth.ExpireAccess()
			var wg sync.WaitGroup
			errs := make(chan string, 100)
			for i := range 100 {
				wg.Go(func() {
					res := c.wait(c.start(fmt.Sprint(1000+i), "tools/call", fakeTool("far__echo", `{"text":"x"}`)))
					if res["error"] != nil || strings.Contains(string(res["result"]), `"isError":true`) {
						errs <- string(res["result"]) + string(res["error"])
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Errorf("a call: %s", e)
			}
			if n := auth.Refreshes.Load(); n != 1 {
				t.Errorf("%d refreshes for 100 calls on an expired token, want 1", n)
			}
			if n := fr.Calls.Load(); n != 101 {
				t.Errorf("%d calls reached the server, want 101", n)
			}
			_ = h
		})
	}
}

// A revoked refresh token puts the server in "login required": its calls
// say to log in, without asking the authorization server again; the
// other server answers.
func TestRemoteRefreshRevoked(t *testing.T) {
	h, _, auth, c := loggedIn(t, fakeremote.ModeStreamable)
	auth.RevokeRefresh()
	auth.ExpireAccess()
	for range 3 {
		res := c.call("tools/call", fakeTool("far__echo", ""))
		if !isError(t, res) || !strings.Contains(text(t, res), "snodod login far") {
			t.Errorf("after the revocation: %s", res["result"])
		}
	}
	if n := auth.Refreshes.Load(); n != 0 {
		t.Errorf("%d refreshes granted", n)
	}
	if a := h.row("far", "").Auth; a != "login required" {
		t.Errorf("auth %q", a)
	}
	result(t, c.call("tools/call", fakeTool("fake__echo", "")))
}

// An authorization server that is down or answers garbage: the refresh
// fails, status says why, the call fails naming the server; once it is
// back the next call refreshes and succeeds.
func TestRemoteAuthServerBroken(t *testing.T) {
	for _, how := range []int{fakeremote.Down, fakeremote.Garbage} {
		t.Run(fmt.Sprint(how), func(t *testing.T) {
			h, _, auth, c := loggedIn(t, fakeremote.ModeStreamable)
			auth.Break(how)
			auth.ExpireAccess()
			res := c.call("tools/call", fakeTool("far__echo", ""))
			if !isError(t, res) || !strings.Contains(text(t, res), `upstream "far"`) || !strings.Contains(text(t, res), "refresh failed") {
				t.Errorf("with the authorization server broken: %s", res["result"])
			}
			if a := h.row("far", "").Auth; !strings.HasPrefix(a, "refresh failed: ") {
				t.Errorf("auth %q", a)
			}
			result(t, c.call("tools/call", fakeTool("fake__echo", "")))
			auth.Break(fakeremote.Healthy)
			eventually.True(t, "a call to succeed once the authorization server is back", func() bool {
				res := c.call("tools/call", fakeTool("far__echo", ""))
				return !strings.Contains(string(res["result"]), `"isError":true`)
			})
			if a := h.row("far", "").Auth; !strings.HasPrefix(a, "ok") {
				t.Errorf("auth once back: %q", a)
			}
		})
	}
}

// A server that accepts connections and never answers: the start ends at
// start_timeout, and the call's failure names the server and the limit.
func TestRemoteSilent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held, never answered
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	h := newHarness(t, fmt.Sprintf("[mcpServers.far]\nurl = \"http://%s/mcp\"\nstart_timeout = \"500ms\"\n", ln.Addr()))
	c := h.connect("", "", "2025-11-25")
	msg := failureText(t, c.call("tools/call", fakeTool("far__echo", "")))
	if !strings.Contains(msg, `upstream "far"`) || !strings.Contains(msg, "within 500ms (start_timeout)") {
		t.Errorf("a silent server: %s", msg)
	}
}
