package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snodod/snodod/daemon/control"
)

// Who may use the HTTP listener (docs/security.md, "Who can reach each
// listener"), against the built daemon. Another user's client is this test
// binary run as nobody (setpriv), in the mode httpClientMain below.

// httpClientEnv, when set, makes this test binary one HTTP client: it
// posts listBody to the URL the variable holds ("unix:PATH" for a Unix
// socket), with httpAuthEnv as Authorization when set, prints the answer
// as one JSON object and exits.
const (
	httpClientEnv = "SNODOD_E2E_HTTP_CLIENT"
	httpAuthEnv   = "SNODOD_E2E_HTTP_AUTH"
)

// httpAnswer is what httpClientMain prints.
type httpAnswer struct {
	Status    int    `json:"status"`
	Body      string `json:"body"`
	Challenge string `json:"challenge"`
	Error     string `json:"error"`
}

func httpClientMain() int {
	target := os.Getenv(httpClientEnv)
	client := &http.Client{}
	url := target
	if path, ok := strings.CutPrefix(target, "unix:"); ok {
		client.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}
		url = "http://localhost/mcp"
	}
	var a httpAnswer
	req, _ := http.NewRequest("POST", url, strings.NewReader(listBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	if auth := os.Getenv(httpAuthEnv); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := client.Do(req)
	if err != nil {
		a.Error = err.Error()
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a.Status, a.Body, a.Challenge = resp.StatusCode, string(b), resp.Header.Get("WWW-Authenticate")
	}
	out, _ := json.Marshal(a)
	fmt.Println(string(out))
	return 0
}

// nobodyClient returns a copy of this test binary that uid nobody can run.
func nobodyClient(t *testing.T) string {
	t.Helper()
	nobodyBinary(t) // the same preconditions: root, setpriv
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(publicDir(t), "e2e.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// postAsNobody posts listBody to target as uid nobody.
func postAsNobody(t *testing.T, bin, target, auth string) httpAnswer {
	t.Helper()
	cmd := asNobody(bin)
	cmd.Env = append(cmd.Env, httpClientEnv+"="+target)
	if auth != "" {
		cmd.Env = append(cmd.Env, httpAuthEnv+"="+auth)
	}
	out, err := cmd.Output()
	var a httpAnswer
	if err != nil || json.Unmarshal(out, &a) != nil {
		t.Fatalf("the client as nobody: %v\n%s", err, out)
	}
	return a
}

// refusedMessage is the JSON-RPC error message of an answer's body.
func refusedMessage(body string) string {
	var m struct{ Error *rpcError }
	if json.Unmarshal([]byte(body), &m) != nil || m.Error == nil {
		return ""
	}
	return m.Error.Message
}

const nobodyRefused = "Connection refused: uid 65534 is not allowed (daemon.allowed_uids)"

// TestHTTPOtherUserOnLoopback: on a loopback listener without a token,
// another local user gets 403 with the session socket's refusal, while
// the daemon's own user is served beside it without a token; once
// daemon.allowed_uids lists the uid (a reload), it is served too. The
// refusals are in status. (It was served: every local user could run
// every tool as the daemon's user.)
func TestHTTPOtherUserOnLoopback(t *testing.T) {
	bin := nobodyClient(t)
	d := startDaemon(t, "[http]\nlisten = \"127.0.0.1:0\"\n", nil)
	st := d.statusJSON(t)
	url := "http://" + st.HTTP.Listen + st.HTTP.Path
	if st.HTTP.Access != "loopback" {
		t.Errorf("status access %q, want loopback", st.HTTP.Access)
	}
	if status, msg := post(t, url, nil); status != 200 {
		t.Fatalf("the daemon's own user: %d %q", status, msg)
	}
	a := postAsNobody(t, bin, url, "")
	if a.Status != 403 || refusedMessage(a.Body) != nobodyRefused {
		t.Errorf("uid 65534 on loopback: %+v, want 403 %q", a, nobodyRefused)
	}
	if status, msg := post(t, url, nil); status != 200 {
		t.Fatalf("the daemon's own user beside it: %d %q", status, msg)
	}
	if got := d.statusJSON(t).HTTP.Refused["peer"]; got != 1 {
		t.Errorf("status: %d refused for peer, want 1", got)
	}
	d.writeConfig(t, "[http]\nlisten = \"127.0.0.1:0\"\n[daemon]\nallowed_uids = [65534]\n")
	d.signal(t, syscall.SIGHUP)
	d.awaitStatus(t, "the reload", answerWithin, func(*control.Status) bool {
		return strings.Contains(d.stderr.String(), "configuration reloaded")
	})
	if a := postAsNobody(t, bin, url, ""); a.Status != 200 {
		t.Errorf("uid 65534 once listed in daemon.allowed_uids: %+v", a)
	}
}

// TestHTTPOtherUserNeedsToken: with http.auth_token_file on loopback,
// another user needs the token (401 with a Bearer challenge without it),
// the daemon's own user does not.
func TestHTTPOtherUserNeedsToken(t *testing.T) {
	bin := nobodyClient(t)
	const token = "tok-5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d"
	tokenFile := filepath.Join(publicDir(t), "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, fmt.Sprintf("[http]\nlisten = \"127.0.0.1:0\"\nauth_token_file = %q\n", tokenFile), nil)
	st := d.statusJSON(t)
	url := "http://" + st.HTTP.Listen + st.HTTP.Path
	if status, msg := post(t, url, nil); status != 200 {
		t.Errorf("the daemon's own user without the token: %d %q", status, msg)
	}
	if a := postAsNobody(t, bin, url, ""); a.Status != 401 || a.Challenge != `Bearer realm="snodod"` || !strings.HasPrefix(refusedMessage(a.Body), "Unauthorized") {
		t.Errorf("uid 65534 without the token: %+v", a)
	}
	if a := postAsNobody(t, bin, url, "Bearer wrong"); a.Status != 401 || a.Challenge != `Bearer realm="snodod", error="invalid_token"` {
		t.Errorf("uid 65534 with another token: %+v", a)
	}
	if a := postAsNobody(t, bin, url, "Bearer "+token); a.Status != 200 {
		t.Errorf("uid 65534 with the token: %+v", a)
	}
}

// TestHTTPUnixSocket: http.listen = "unix:PATH" makes a socket of mode
// 0600 that the daemon's user is served on; another user who can reach it
// (its modes opened up, as a careless unit might) is refused by
// SO_PEERCRED; the socket is removed at the drain.
func TestHTTPUnixSocket(t *testing.T) {
	bin := nobodyClient(t)
	dir, err := os.MkdirTemp("", "sdh") // short: a socket path fits in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "private", "http.sock") // the daemon makes private/, 0700
	d := startDaemon(t, fmt.Sprintf("[http]\nlisten = %q\n", "unix:"+path), nil)
	fi, err := os.Stat(path)
	if dfi, derr := os.Stat(filepath.Dir(path)); derr != nil || dfi.Mode().Perm() != 0o700 {
		t.Errorf("the socket's directory: %v %v, want mode 0700", dfi, derr)
	}
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the socket: %v %v, want mode 0600", fi, err)
	}
	if st := d.statusJSON(t); st.HTTP.Access != "unix" || st.HTTP.Listen != path {
		t.Errorf("status %+v", st.HTTP)
	}
	own := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer own.CloseIdleConnections()
	req, _ := http.NewRequest("POST", "http://localhost/mcp", strings.NewReader(listBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := own.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"tools"`) {
		t.Fatalf("the daemon's own user over the socket: %d %s", resp.StatusCode, b)
	}
	if a := postAsNobody(t, bin, "unix:"+path, ""); a.Error == "" || !strings.Contains(a.Error, "permission denied") {
		t.Errorf("uid 65534 through the private directory: %+v, want permission denied", a)
	}
	for _, p := range []string{dir, filepath.Dir(path)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if a := postAsNobody(t, bin, "unix:"+path, ""); a.Status != 403 || refusedMessage(a.Body) != nobodyRefused {
		t.Errorf("uid 65534 on an open socket: %+v, want 403 %q", a, nobodyRefused)
	}
	d.stop(t)
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the socket after the drain: %v", err)
	}
}

// TestOneUserCannotHoldEverySession (docs/security.md, "What one client
// cannot do to the others"): one uid's clients fill
// daemon.max_sessions_per_uid, the next one of that uid is refused with one
// line, and another allowed uid is served meanwhile; a connection that sends
// nothing is ended after daemon.initialize_timeout, giving its place back.
// Both show in status.
func TestOneUserCannotHoldEverySession(t *testing.T) {
	bin := nobodyBinary(t)
	d := startDaemon(t, "[daemon]\nmax_sessions_per_uid = 3\ninitialize_timeout = \"2s\"\nallowed_uids = [65534]\n", nil)
	var held []*sessionConn
	for i := range 3 {
		s := mustDial(t, d.socket)
		if err := s.initialize("2025-06-18"); err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
		held = append(held, s)
	}
	extra := mustDial(t, d.socket)
	r, line, err := extra.next(answerWithin)
	want := fmt.Sprintf("Server session capacity exhausted (daemon.max_sessions_per_uid = 3, held by uid %d)", os.Geteuid())
	if err != nil || r.Error == nil || r.Error.Message != want {
		t.Errorf("a fourth session of uid %d: %q %v, want %q", os.Geteuid(), line, err, want)
	}
	// Let the other user reach the socket (its directories are private),
	// as a system unit's group would.
	for _, p := range []string{d.dir, filepath.Join(d.dir, "run"), filepath.Dir(d.socket)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(d.socket, 0o666); err != nil {
		t.Fatal(err)
	}
	relay := asNobody(bin, "connect", "--relay", "--socket", d.socket, "--control-socket", d.control)
	relay.Stdin = strings.NewReader(initializeLine(1, "2025-06-18") + "\n" + initializedLine + "\n" + echoLine(2, "another user") + "\n")
	if got, err := relay.Output(); err != nil || !strings.Contains(string(got), `"text":"another user"`) {
		t.Errorf("uid 65534 while uid %d is at its cap: %v\n%s", os.Geteuid(), err, got)
	}
	// An idle connection of its own is ended, and its place is free again.
	held[2].Close()
	d.awaitStatus(t, "the third session's end", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 2 })
	idle := mustDial(t, d.socket)
	if err := idle.drainToEOF(answerWithin); err != nil {
		t.Errorf("a connection that sent nothing: %v, want it ended", err)
	}
	st := d.awaitStatus(t, "the idle session's end", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 2 })
	if st.Refused["uid_capacity"] != 1 || st.Refused["initialize_timeout"] != 1 {
		t.Errorf("status refusals %v, want uid_capacity 1 and initialize_timeout 1", st.Refused)
	}
	if err := mustDial(t, d.socket).initialize("2025-11-25"); err != nil {
		t.Errorf("a session in the freed place: %v", err)
	}
}

// TestRelayIdleSessionSaysWhy: `snodod connect --relay` whose client sends
// nothing is ended after daemon.initialize_timeout, and says why on its
// standard error, exiting 1 (it exited 0 in silence).
func TestRelayIdleSessionSaysWhy(t *testing.T) {
	d := startDaemon(t, "[daemon]\ninitialize_timeout = \"1s\"\n", nil)
	relay := d.command("connect", "--relay")
	stdin, err := relay.StdinPipe() // held open, silent
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := relay.CombinedOutput()
	if relay.ProcessState == nil || relay.ProcessState.ExitCode() != 1 ||
		!strings.Contains(string(out), "the daemon ended the session before any request was sent (a session must send its first request within daemon.initialize_timeout") {
		t.Errorf("connect --relay, silent: %v\n%s", err, out)
	}
}
