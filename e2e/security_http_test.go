package e2e_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The HTTP cases of the security suite (docs/security.md), against `snodod
// serve`.

// listBody is a 2026 request every endpoint serves: tools/list.
const listBody = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

// post sends a 2026 tools/list to url with the extra headers (Host among
// them) and returns the status and the JSON-RPC error message, "" when
// the answer is a result.
func post(t *testing.T, url string, headers map[string]string) (int, string) {
	t.Helper()
	status, b := postStatus(t, url, headers)
	var m struct {
		Result json.RawMessage
		Error  *rpcError
	}
	if err := json.Unmarshal([]byte(b), &m); err != nil || (m.Result == nil) == (m.Error == nil) {
		t.Fatalf("status %d: body %q is not one JSON-RPC answer", status, b)
	}
	if m.Error != nil {
		return status, m.Error.Message
	}
	return status, ""
}

// postStatus is post for answers that may not be JSON (431 is Go's): the
// status and the body.
func postStatus(t *testing.T, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(listBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Timeout: answerWithin}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPRebindingAndOrigin: on a loopback listener, a Host that is not a
// loopback name (a DNS rebinding page) and an Origin that is not a
// loopback origin (any cross-site page) are refused with 403 before
// anything is served; loopback names and origins are served.
func TestHTTPRebindingAndOrigin(t *testing.T) {
	_, url := httpURL(t)
	port := url[strings.LastIndex(url, ":")+1 : strings.LastIndex(url, "/")]
	for _, tc := range []struct {
		headers map[string]string
		status  int
		message string
	}{
		{map[string]string{"Host": "evil.example"}, 403, hostRefused("evil.example")},
		{map[string]string{"Host": "evil.example:" + port}, 403, hostRefused("evil.example:" + port)},
		{map[string]string{"Host": "localhost.evil.example:" + port}, 403, hostRefused("localhost.evil.example:" + port)},
		{map[string]string{"Host": "127.0.0.1.nip.io:" + port}, 403, hostRefused("127.0.0.1.nip.io:" + port)},
		{map[string]string{"Host": "localhost:" + port}, 200, ""},
		{map[string]string{"Host": "[::1]:" + port}, 200, ""},
		{map[string]string{"Origin": "https://evil.example"}, 403, "Origin not allowed"},
		{map[string]string{"Origin": "http://localhost.evil.example"}, 403, "Origin not allowed"},
		{map[string]string{"Origin": "null"}, 403, "Origin not allowed"},
		{map[string]string{"Origin": "file://"}, 403, "Origin not allowed"},
		{map[string]string{"Origin": "http://localhost:3000"}, 200, ""},
		{map[string]string{"Origin": "https://127.0.0.1"}, 200, ""},
	} {
		status, message := post(t, url, tc.headers)
		if status != tc.status || message != tc.message {
			t.Errorf("%v: %d %q, want %d %q", tc.headers, status, message, tc.status, tc.message)
		}
	}
}

// hostRefused is the 403's message for a Host that is not allowed: it names
// the host and the key that would allow it (docs/security.md, "Who can reach
// each listener").
func hostRefused(host string) string {
	return `Host not allowed: "` + host + `" is not a loopback name, the listener's own address, or listed in http.allowed_hosts`
}

// TestHTTPOwnAddressHost: a listener on 127.0.0.2 serves a Host naming its
// own address, which it once answered 403.
func TestHTTPOwnAddressHost(t *testing.T) {
	d := startDaemon(t, "[http]\nlisten = \"127.0.0.2:0\"\n", nil)
	st := d.statusJSON(t)
	url := "http://" + st.HTTP.Listen + st.HTTP.Path // Go sends Host: 127.0.0.2:PORT
	if status, msg := post(t, url, nil); status != 200 {
		t.Errorf("Host %s: %d %q", st.HTTP.Listen, status, msg)
	}
	if status, msg := post(t, url, map[string]string{"Host": "127.0.0.3"}); status != 403 || msg != hostRefused("127.0.0.3") {
		t.Errorf("Host 127.0.0.3: %d %q", status, msg)
	}
}

// TestHTTPLocalhostResolvedElsewhere: http.listen = "localhost:PORT" with
// an /etc/hosts that maps localhost to every address (the daemon runs in
// a mount namespace of its own with that file bound over /etc/hosts) is
// refused at start, naming the address bound (it was once judged loopback
// by its name and served every interface without a token).
func TestHTTPLocalhostResolvedElsewhere(t *testing.T) {
	if os.Geteuid() != 0 {
		skipOrFail(t, "a mount namespace with another /etc/hosts needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		skipOrFail(t, "unshare (util-linux) is not installed")
	}
	dir := publicDir(t)
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte("0.0.0.0 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	private, err := os.MkdirTemp("", "sdl") // 0700, as a socket directory must be
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(private) })
	port := freePort(t)
	cmd := exec.Command(unshare, "--mount", "--propagation", "private", "sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`,
		hosts, binary, "serve", "--demo", "--http", "localhost:"+port, "--socket", filepath.Join(private, "s.sock"))
	cmd.Env = isolatedEnv(private)
	done := make(chan struct{})
	var out []byte
	go func() {
		defer close(done)
		out, err = cmd.CombinedOutput()
	}()
	select {
	case <-done:
	case <-time.After(answerWithin):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("serve --http localhost:%s with localhost at 0.0.0.0 did not refuse to start; it served:\n%s", port, out)
	}
	want := "http.listen localhost:" + port + " bound [::]:" + port + ", which is not a loopback address"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("serve: %v\n%s\nwant a refusal saying %q", err, out, want)
	}
}

// nonLoopbackIP is an IPv4 address of this machine that is not loopback,
// or "" when it has none.
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	return ""
}

// TestHTTPTokenOnNonLoopback: a listener on every address is refused at
// start without a token file (or allow_unauthenticated); with one, a
// request without the token, with another, or with another scheme gets
// 401, and the right one is served, on loopback and on another address.
func TestHTTPTokenOnNonLoopback(t *testing.T) {
	port := freePort(t)
	cmd := exec.Command(binary, "serve", "--demo", "--http", "0.0.0.0:"+port, "--socket", filepath.Join(publicDir(t), "s.sock"))
	cmd.Env = isolatedEnv(t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "http.auth_token_file") {
		t.Errorf("serve --http 0.0.0.0:%s without a token: %v\n%s\nwant a refusal naming http.auth_token_file", port, err, out)
	}

	const token = "tok-8f7e6d5c4b3a2910-0123456789abcdef"
	dir := publicDir(t)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, fmt.Sprintf("[http]\nlisten = \"0.0.0.0:%s\"\nauth_token_file = %q\n", port, tokenFile), nil)
	hosts := []string{"127.0.0.1"}
	if ip := nonLoopbackIP(); ip != "" {
		hosts = append(hosts, ip)
	} else {
		t.Log("no non-loopback address: only loopback is tried")
	}
	for _, host := range hosts {
		url := "http://" + net.JoinHostPort(host, port) + "/mcp"
		for _, tc := range []struct {
			auth   string
			status int
		}{
			{"", 401},
			{"Bearer wrong-token", 401},
			{"Bearer " + token + "x", 401},
			{"Basic " + token, 401},
			{token, 401},
			{"Bearer " + token, 200},
			{"bearer " + token, 200},
		} {
			h := map[string]string{}
			if tc.auth != "" {
				h["Authorization"] = tc.auth
			}
			status, message := post(t, url, h)
			if status != tc.status || (status == 401) != strings.HasPrefix(message, "Unauthorized") {
				t.Errorf("%s with Authorization %q: %d %q, want %d", url, tc.auth, status, message, tc.status)
			}
		}
	}
}

// TestHTTPOversizedHeadersAndSlowBodies: headers over http.max_header_bytes
// get 431; a body that trickles in past http.read_timeout gets 408 with a
// JSON-RPC error, while other clients are served meanwhile.
func TestHTTPOversizedHeadersAndSlowBodies(t *testing.T) {
	_, url := httpURL(t, "--config", writeTemp(t, "[http]\nmax_header_bytes = 4096\nread_timeout = \"1s\"\n"))
	status, _ := postStatus(t, url, map[string]string{"X-Padding": strings.Repeat("p", 16<<10)})
	if status != 431 {
		t.Errorf("16 KiB of headers: status %d, want 431", status)
	}

	addr := strings.TrimPrefix(url[:strings.LastIndex(url, "/")], "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: %d\r\n\r\n", addr, len(listBody))
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			close(answered)
			return
		}
		answered <- resp
	}()
	var resp *http.Response
	for i := 0; resp == nil && i < len(listBody)-1; i++ {
		_, _ = c.Write([]byte{listBody[i]})
		if i == 2 { // meanwhile, another client is served at once
			if status, msg := post(t, url, nil); status != 200 {
				t.Errorf("a second client during the slow body: %d %q", status, msg)
			}
		}
		select {
		case resp = <-answered:
		case <-time.After(200 * time.Millisecond):
		}
	}
	if resp == nil {
		t.Fatal("the slow body was never answered")
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !strings.Contains(string(b), "Request body not received within the 1s read timeout") {
		t.Errorf("slow body: %d %s, want 408 with a JSON-RPC error", resp.StatusCode, b)
	}
}

// writeTemp writes a configuration file of the test's own.
func writeTemp(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
