package http_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// Attacks on the handler alone (docs/security.md, "Who can reach each
// listener"; docs/protocol.md §13.1), each beside a healthy client.

// A legacy session belongs to the path it was opened on.
// Its id on the endpoint or on another view is an unknown session (404)
// for every method; on its own path it is served.
func TestSessionBelongsToItsPath(t *testing.T) {
	a, b := namedServer(t, "a"), namedServer(t, "b")
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) { o.Views = views{"a": a, "b": b} })
	r := post(t, e.url+"/a", legacyHeaders("", ""), initBody("2025-11-25"))
	id := r.header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize on /mcp/a: %d %s", r.status, r.body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	for _, path := range []string{"", "/", "/b"} {
		for _, c := range []struct{ method, body string }{
			{"POST", list},
			{"POST", `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
			{"POST", `{"jsonrpc":"2.0","id":"snodod:1","result":{}}`},
			{"GET", ""},
			{"DELETE", ""},
		} {
			h := legacyHeaders(id, "")
			r := do(t, c.method, e.url+path, h, c.body)
			if code, msg := r.errorCode(t); r.status != 404 || code != -32600 || msg != "Session not found" {
				t.Errorf("%s /mcp%s %.40s with a session of /mcp/a: %d %s", c.method, path, c.body, r.status, r.body)
			}
		}
	}
	if r := post(t, e.url+"/a", legacyHeaders(id, ""), list); r.status != 200 || !contains(r.body, `"result"`) {
		t.Fatalf("the session on its own path: %d %s", r.status, r.body)
	}
	if r := do(t, "DELETE", e.url+"/a", legacyHeaders(id, ""), ""); r.status != 204 {
		t.Fatalf("DELETE on its own path: %d %s", r.status, r.body)
	}
	e.healthy(t)
}

func namedServer(t *testing.T, name string) *server.Server {
	t.Helper()
	s, err := server.New(server.Options{Info: protocol.Implementation{Name: name}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readResponse reads one response from c within a few seconds.
func readResponse(t *testing.T, c net.Conn) (*nethttp.Response, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A body shorter than its Content-Length, then a
// half-close, is 400 with a JSON-RPC error (it was 200 with no body).
func TestShortBodyThenHalfClose(t *testing.T) {
	e := newEnv(t, nil)
	c := e.dial(t)
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: server/discover\r\nContent-Length: %d\r\n\r\n%s", len(discover)+10, discover)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, body := readResponse(t, c)
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body ended after %d of its %d bytes (Content-Length)"}}`+"\n", len(discover), len(discover)+10)
	if resp.StatusCode != 400 || body != want {
		t.Errorf("%d %q, want 400 %q", resp.StatusCode, body, want)
	}
	e.healthy(t)
}

// Every Origin header is checked, not only the first.
func TestEveryOriginChecked(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		origins []string
		status  int
	}{
		{[]string{"http://localhost:3000", "https://evil.example"}, 403},
		{[]string{"https://evil.example", "http://localhost:3000"}, 403},
		{[]string{"http://localhost:3000", "http://127.0.0.1"}, 200},
	} {
		h := modernHeaders("server/discover", "")
		h["Origin"] = c.origins
		if r := post(t, e.url, h, discover); r.status != c.status {
			t.Errorf("Origin %q: %d %s, want %d", c.origins, r.status, r.body, c.status)
		}
	}
	e.healthy(t)
}

// A 401 carries the RFC 6750 challenge, with
// error="invalid_token" when a bearer token was sent and is not the one.
func TestUnauthorizedChallenge(t *testing.T) {
	e := newEnv(t, func(o *mcphttp.Options, _ *mcphttp.ServerLimits) {
		o.AuthToken = "the-token-0123456789abcdef0123456789"
	})
	for _, c := range []struct{ auth, challenge string }{
		{"", `Bearer realm="snodod"`},
		{"Basic dXNlcjpwYXNz", `Bearer realm="snodod"`},
		{"Bearer wrong", `Bearer realm="snodod", error="invalid_token"`},
	} {
		h := modernHeaders("server/discover", "")
		if c.auth != "" {
			h.Set("Authorization", c.auth)
		}
		r := post(t, e.url, h, discover)
		if got := r.header.Values("WWW-Authenticate"); r.status != 401 || len(got) != 1 || got[0] != c.challenge {
			t.Errorf("Authorization %q: %d, WWW-Authenticate %q; want 401 %q", c.auth, r.status, got, c.challenge)
		}
	}
	h := modernHeaders("server/discover", "")
	h.Set("Authorization", "Bearer the-token-0123456789abcdef0123456789")
	if r := post(t, e.url, h, discover); r.status != 200 || r.header.Get("WWW-Authenticate") != "" {
		t.Errorf("the right token: %d %v", r.status, r.header)
	}
}

// serveOn serves a new handler with o on addr until the test ends and
// returns its endpoint's URL.
func serveOn(t *testing.T, addr string, edit func(*mcphttp.Options)) (*mcphttp.Handler, string) {
	t.Helper()
	srv := namedServer(t, "t")
	exec, err := executor.New(executor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	o := mcphttp.Options{Dispatcher: srv, Executor: exec, Logger: quiet}
	if edit != nil {
		edit(&o)
	}
	h, err := mcphttp.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return h, serveAt(t, addr, h, mcphttp.ServerLimits{}, exec) + h.Path()
}

// A listener on 127.0.0.2 serves a Host naming its own
// address; another Host is 403 with a message naming it and
// http.allowed_hosts.
func TestHostOwnAddress(t *testing.T) {
	_, url := serveOn(t, "127.0.0.2:0", nil)
	hostport := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	for _, c := range []struct {
		host    string
		status  int
		message string
	}{
		{hostport, 200, ""},
		{"127.0.0.2", 200, ""},
		{"localhost", 200, ""},
		{"127.0.0.3:80", 403, `Host not allowed: "127.0.0.3:80" is not a loopback name, the listener's own address, or listed in http.allowed_hosts`},
		{"evil.example", 403, `Host not allowed: "evil.example" is not a loopback name, the listener's own address, or listed in http.allowed_hosts`},
	} {
		h := modernHeaders("server/discover", "")
		h.Set("Host", c.host)
		r := post(t, url, h, discover)
		if r.status != c.status {
			t.Errorf("Host %s: %d %s, want %d", c.host, r.status, r.body, c.status)
			continue
		}
		if c.message != "" {
			if _, msg := r.errorCode(t); msg != c.message {
				t.Errorf("Host %s: %q, want %q", c.host, msg, c.message)
			}
		}
	}
}

// peers is an IdentifyPeer that says which uid each client address is
// (the daemon asks the kernel; a test names them), counting its calls.
type peers struct {
	uids  map[string]int // by the client's IP
	calls atomic.Int64
}

func (p *peers) identify(c net.Conn) mcphttp.Peer {
	p.calls.Add(1)
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	uid, ok := p.uids[host]
	if !ok {
		return mcphttp.Peer{Local: true, Err: errors.New("not found")}
	}
	return mcphttp.Peer{Local: true, UID: uid}
}

// clientFrom returns an HTTP client whose connections come from the
// loopback address from.
func clientFrom(t *testing.T, from string) *nethttp.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	tr := &nethttp.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &nethttp.Client{Transport: tr, Timeout: 5 * time.Second}
}

func postWith(t *testing.T, c *nethttp.Client, url string, h nethttp.Header, body string) reply {
	t.Helper()
	req, err := nethttp.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// A local peer is served without a token when its uid is
// allowed; another uid needs the token (401 with a challenge when one is
// configured, else 403 naming daemon.allowed_uids), and so does a peer
// whose uid could not be found; http.allow_unauthenticated serves every
// local peer. The peer is looked up once per connection.
func TestLocalPeers(t *testing.T) {
	const token = "tok-0123456789abcdef0123456789abcdef"
	p := &peers{uids: map[string]int{"127.0.0.5": 1000, "127.0.0.6": 65534}}
	allowed := func(uid int) bool { return uid == 1000 }
	for _, c := range []struct {
		name      string
		token     string
		unauth    bool
		from      string
		auth      string
		status    int
		message   string
		challenge bool
	}{
		{"allowed uid", "", false, "127.0.0.5", "", 200, "", false},
		{"other uid", "", false, "127.0.0.6", "", 403, "Connection refused: uid 65534 is not allowed (daemon.allowed_uids)", false},
		{"unknown peer", "", false, "127.0.0.7", "", 403, "Connection refused: the local user at the other end could not be identified (not found)", false},
		{"allowed uid, token configured", token, false, "127.0.0.5", "", 200, "", false},
		{"other uid, no token", token, false, "127.0.0.6", "", 401, "Unauthorized: send Authorization: Bearer <the token of http.auth_token_file>", true},
		{"other uid, the token", token, false, "127.0.0.6", "Bearer " + token, 200, "", false},
		{"unknown peer, the token", token, false, "127.0.0.7", "Bearer " + token, 200, "", false},
		{"other uid, allow_unauthenticated", "", true, "127.0.0.6", "", 200, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, url := serveOn(t, "127.0.0.1:0", func(o *mcphttp.Options) {
				o.IdentifyPeer, o.PeerAllowed, o.AuthToken, o.AllowUnauthenticated = p.identify, allowed, c.token, c.unauth
			})
			client := clientFrom(t, c.from)
			before := p.calls.Load()
			for range 3 { // one connection, kept alive
				hd := modernHeaders("server/discover", "")
				if c.auth != "" {
					hd.Set("Authorization", c.auth)
				}
				r := postWith(t, client, url, hd, discover)
				if r.status != c.status {
					t.Fatalf("%d %s, want %d", r.status, r.body, c.status)
				}
				if c.message != "" {
					if _, msg := r.errorCode(t); msg != c.message {
						t.Fatalf("%q, want %q", msg, c.message)
					}
				}
				if got := r.header.Get("WWW-Authenticate") != ""; got != c.challenge {
					t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
			}
			if n := p.calls.Load() - before; n != 1 {
				t.Errorf("the peer was looked up %d times for one connection, want 1", n)
			}
			if c.status != 200 && h.Stats().Refused[refusalReason(c.status)] != 3 {
				t.Errorf("refusals %v, want 3 %s", h.Stats().Refused, refusalReason(c.status))
			}
		})
	}
}

func refusalReason(status int) string {
	if status == 401 {
		return "unauthorized"
	}
	return "peer"
}

// One peer holds at most MaxSessionsPerPeer legacy
// sessions, at the exact boundary; another peer is served meanwhile. A
// local peer is its uid (two addresses, one user, share a count), others
// their address.
func TestMaxSessionsPerPeer(t *testing.T) {
	p := &peers{uids: map[string]int{"127.0.0.5": 1000, "127.0.0.6": 1000, "127.0.0.7": 1001}}
	h, url := serveOn(t, "127.0.0.1:0", func(o *mcphttp.Options) {
		o.IdentifyPeer, o.PeerAllowed = p.identify, func(int) bool { return true }
		o.MaxSessions, o.MaxSessionsPerPeer = 10, 2
	})
	init := func(from string) reply {
		return postWith(t, clientFrom(t, from), url, legacyHeaders("", ""), initBody("2025-11-25"))
	}
	var first string
	for i, from := range []string{"127.0.0.5", "127.0.0.6"} {
		r := init(from)
		if r.status != 200 {
			t.Fatalf("session %d of uid 1000: %d %s", i+1, r.status, r.body)
		}
		if i == 0 {
			first = r.header.Get("Mcp-Session-Id")
		}
	}
	r := init("127.0.0.5")
	if code, msg := r.errorCode(t); r.status != 503 || code != -32603 || msg != "Server session capacity exhausted (http.max_sessions_per_peer = 2, held by uid 1000)" {
		t.Fatalf("a third session of uid 1000: %d %s", r.status, r.body)
	}
	if r := init("127.0.0.7"); r.status != 200 {
		t.Fatalf("another uid meanwhile: %d %s", r.status, r.body)
	}
	if got := h.Stats().Refused["peer_sessions"]; got != 1 {
		t.Errorf("refused for peer_sessions: %d, want 1", got)
	}
	// A session's end gives its place back.
	hd := legacyHeaders(first, "")
	req, _ := nethttp.NewRequest("DELETE", url, nil)
	req.Header = hd
	resp, err := clientFrom(t, "127.0.0.5").Do(req)
	if err != nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	resp.Body.Close()
	if r := init("127.0.0.6"); r.status != 200 {
		t.Fatalf("after a DELETE: %d %s", r.status, r.body)
	}
}

// Without IdentifyPeer a peer is its address.
func TestMaxSessionsPerAddress(t *testing.T) {
	_, url := serveOn(t, "127.0.0.1:0", func(o *mcphttp.Options) { o.MaxSessionsPerPeer = 1 })
	if r := postWith(t, clientFrom(t, "127.0.0.5"), url, legacyHeaders("", ""), initBody("2025-11-25")); r.status != 200 {
		t.Fatalf("first: %d %s", r.status, r.body)
	}
	r := postWith(t, clientFrom(t, "127.0.0.5"), url, legacyHeaders("", ""), initBody("2025-11-25"))
	if _, msg := r.errorCode(t); r.status != 503 || msg != "Server session capacity exhausted (http.max_sessions_per_peer = 1, held by 127.0.0.5)" {
		t.Fatalf("second from one address: %d %s", r.status, r.body)
	}
	if r := postWith(t, clientFrom(t, "127.0.0.6"), url, legacyHeaders("", ""), initBody("2025-11-25")); r.status != 200 {
		t.Fatalf("another address: %d %s", r.status, r.body)
	}
}
