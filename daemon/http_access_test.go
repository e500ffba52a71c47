package daemon

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/sockdiag/sockdiagtest"
)

const discover2026 = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// dialAsUID dials as uid (sockdiagtest.DialAs), for an http.Transport.
func dialAsUID(uid int) func(context.Context, string, string) (net.Conn, error) {
	return func(_ context.Context, _, addr string) (net.Conn, error) { return sockdiagtest.DialAs(uid, addr) }
}

// discoverWith posts a 2026 server/discover with client c and returns the
// status, the body and the WWW-Authenticate header.
func discoverWith(t *testing.T, c *http.Client, url string, extra ...string) (int, string, string) {
	t.Helper()
	resp := postMCPWith(t, c, url, "server/discover", discover2026, extra...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("WWW-Authenticate")
}

func clientDialing(t *testing.T, dial func(context.Context, string, string) (net.Conn, error)) *http.Client {
	tr := &http.Transport{DialContext: dial}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// On a loopback listener without a token (docs/security.md, "Who can reach
// each listener"), the daemon's own uid is served and another uid is refused
// with the session socket's words, until daemon.allowed_uids lists it (a
// reload); the refusals are in status.
func TestHTTPLocalPeers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a socket of another uid needs root")
	}
	const nobody = 65534
	dir := shortDir(t)
	next := map[string]any{"http.listen": "127.0.0.1:0"}
	r := startDaemon(t, testConfig(t, dir, next), Options{Reload: func() (*config.Config, error) {
		return loadConfig(dir, map[string]any{"http.listen": "127.0.0.1:0", "daemon.allowed_uids": []int{nobody}})
	}})
	st := r.d.Status().HTTP
	if st.Access != "loopback" {
		t.Errorf("access %q, want loopback", st.Access)
	}
	url := "http://" + st.Listen + "/mcp"
	own, other := clientDialing(t, (&net.Dialer{}).DialContext), clientDialing(t, dialAsUID(nobody))
	if status, body, _ := discoverWith(t, own, url); status != 200 {
		t.Fatalf("the daemon's own uid: %d %s", status, body)
	}
	status, body, challenge := discoverWith(t, other, url)
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Connection refused: uid 65534 is not allowed (daemon.allowed_uids)"}}` + "\n"; status != 403 || body != want || challenge != "" {
		t.Errorf("uid %d: %d %q %q, want 403 %q", nobody, status, body, challenge, want)
	}
	if status, body, _ := discoverWith(t, own, url); status != 200 {
		t.Fatalf("the daemon's own uid meanwhile: %d %s", status, body)
	}
	if got := r.d.Status().HTTP.Refused["peer"]; got != 1 {
		t.Errorf("refused for peer: %d, want 1", got)
	}
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	other = clientDialing(t, dialAsUID(nobody))
	if status, body, _ := discoverWith(t, other, url); status != 200 {
		t.Errorf("uid %d once allowed: %d %s", nobody, status, body)
	}
}

// With a token on a loopback listener, the daemon's own uid needs none;
// another uid needs it (401 with a challenge without it).
func TestHTTPLocalPeersWithToken(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a socket of another uid needs root")
	}
	dir := shortDir(t)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok-0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, testConfig(t, dir, map[string]any{"http.listen": "127.0.0.1:0", "http.auth_token_file": token}), Options{})
	url := "http://" + r.d.Status().HTTP.Listen + "/mcp"
	own, other := clientDialing(t, (&net.Dialer{}).DialContext), clientDialing(t, dialAsUID(65534))
	if status, body, _ := discoverWith(t, own, url); status != 200 {
		t.Errorf("own uid without the token: %d %s", status, body)
	}
	if status, _, challenge := discoverWith(t, other, url); status != 401 || challenge != `Bearer realm="snodod"` {
		t.Errorf("another uid without the token: %d %q", status, challenge)
	}
	if status, body, _ := discoverWith(t, other, url, "Authorization", "Bearer tok-0123456789abcdef0123456789abcdef"); status != 200 {
		t.Errorf("another uid with the token: %d %s", status, body)
	}
}

// http.listen = "unix:PATH": a socket of mode 0600 in a private
// directory, served to the daemon's uid (SO_PEERCRED), removed at the
// drain.
func TestHTTPUnixListener(t *testing.T) {
	dir := shortDir(t)
	path := filepath.Join(dir, "run", "http.sock")
	r := startDaemon(t, testConfig(t, dir, map[string]any{"http.listen": "unix:" + path}), Options{})
	st := r.d.Status().HTTP
	if st.Access != "unix" || st.Listen != path {
		t.Errorf("status: access %q, listen %q", st.Access, st.Listen)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v %v, want mode 0600", fi, err)
	}
	c := clientDialing(t, func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	})
	if status, body, _ := discoverWith(t, c, "http://localhost/mcp"); status != 200 {
		t.Fatalf("over the Unix socket: %d %s", status, body)
	}
	c.Transport.(*http.Transport).CloseIdleConnections()
	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket after the drain: %v, want it removed", err)
	}
}

// The address bound decides, not the name (docs/security.md, "Who can reach
// each listener"): "localhost" bound elsewhere without a token or
// allow_unauthenticated is refused; with either it is served as a network
// address.
func TestJudgeHTTP(t *testing.T) {
	elsewhere := &net.TCPAddr{IP: net.ParseIP("192.0.2.2"), Port: 8080}
	hc := config.HTTP{Listen: "localhost:8080"}
	_, err := judgeHTTP(hc, elsewhere, false)
	want := "http.listen localhost:8080 bound 192.0.2.2:8080, which is not a loopback address (the name resolves there): " +
		"a listener there needs http.auth_token_file, or http.allow_unauthenticated = true behind something that authenticates; " +
		"or name a loopback address, such as 127.0.0.1:8080"
	if err == nil || err.Error() != want {
		t.Errorf("localhost bound to 192.0.2.2: %v\nwant %s", err, want)
	}
	for _, c := range []struct {
		hc    config.HTTP
		addr  net.Addr
		token bool
		want  httpAccess
	}{
		{hc, elsewhere, true, accessNetwork},
		{config.HTTP{Listen: "localhost:8080", AllowUnauthenticated: true}, elsewhere, false, accessNetwork},
		{hc, &net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 1}, false, accessLoopback},
		{hc, &net.TCPAddr{IP: net.ParseIP("::ffff:127.0.0.1"), Port: 1}, false, accessLoopback},
		{hc, &net.TCPAddr{IP: net.ParseIP("::1"), Port: 1}, false, accessLoopback},
		{config.HTTP{Listen: "unix:/x"}, &net.UnixAddr{Name: "/x", Net: "unix"}, false, accessUnix},
	} {
		if got, err := judgeHTTP(c.hc, c.addr, c.token); err != nil || got != c.want {
			t.Errorf("%s bound %s (token %v): %q %v, want %q", c.hc.Listen, c.addr, c.token, got, err, c.want)
		}
	}
}
