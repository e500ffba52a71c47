package daemon

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const modernListen = `{"jsonrpc":"2.0","id":"s1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`

func postMCP(t *testing.T, url, method, body string, extra ...string) *http.Response {
	t.Helper()
	return postMCPWith(t, http.DefaultClient, url, method, body, extra...)
}

// postMCPWith is postMCP with client c.
func postMCPWith(t *testing.T, c *http.Client, url, method, body string, extra ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestHTTPListener: http.listen serves the endpoint, status shows it, and
// a drain ends an open listen stream with notifications/cancelled.
func TestHTTPListener(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"http.listen": "127.0.0.1:0", "http.node_id": "n1"}), Options{})
	st := r.d.Status()
	if st.HTTP == nil || st.HTTP.State != "serving" || st.HTTP.NodeID != "n1" || st.HTTP.Path != "/mcp" {
		t.Fatalf("status: %+v", st.HTTP)
	}
	url := "http://" + st.HTTP.Listen + "/mcp"
	resp := postMCP(t, url, "subscriptions/listen", modernListen)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("listen: %d %v", resp.StatusCode, resp.Header)
	}
	lines := bufio.NewReader(resp.Body)
	readData := func() string {
		for {
			line, err := lines.ReadString('\n')
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				return data
			}
		}
	}
	if ack := readData(); !strings.Contains(ack, "notifications/subscriptions/acknowledged") {
		t.Fatalf("first event: %s", ack)
	}
	if st := r.d.Status().HTTP; st.Listens != 1 || st.Requests2026 != 1 {
		t.Fatalf("status with a listen open: %+v", st)
	}
	r.stop()
	if ev := readData(); !strings.Contains(ev, `"method":"notifications/cancelled"`) || !strings.Contains(ev, `"requestId":"s1"`) {
		t.Fatalf("on drain: %s", ev)
	}
	rest, _ := io.ReadAll(lines)
	resp.Body.Close()
	if strings.Contains(string(rest), "data:") {
		t.Fatalf("written after the cancellation: %s", rest)
	}
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", st.HTTP.Listen, time.Second); err == nil {
		t.Fatal("the HTTP listener still accepts after the drain")
	}
}

// A busy http.listen fails the start with a message naming the key; so
// does a missing token file in a Config made by hand (config.Load refuses
// one already).
func TestHTTPListenRefused(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := shortDir(t)
	for over, want := range map[string]map[string]any{
		"http.listen " + busy.Addr().String() + ": listen tcp": {"http.listen": busy.Addr().String()},
		"http.auth_token_file: open":                           {"http.listen": "127.0.0.1:0", "http.auth_token_file": filepath.Join(dir, "absent")},
	} {
		token, _ := want["http.auth_token_file"].(string)
		delete(want, "http.auth_token_file")
		cfg := testConfig(t, dir, want)
		cfg.HTTP.AuthTokenFile = token
		d, err := New(cfg, Options{Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = d.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), over) {
			t.Fatalf("Run: %v, want %q", err, over)
		}
	}
}

// With http.auth_token_file on a network address, a request without the
// token gets 401, a JSON-RPC error and a challenge, over loopback too (no
// peer is identified there); with it, the answer.
func TestHTTPToken(t *testing.T) {
	dir := shortDir(t)
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("s3cret-token-of-at-least-32-bytes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, testConfig(t, dir, map[string]any{"http.listen": "0.0.0.0:0", "http.auth_token_file": token}), Options{})
	st := r.d.Status().HTTP
	_, port, _ := net.SplitHostPort(st.Listen)
	if st.Access != "network" {
		t.Errorf("access %q, want network", st.Access)
	}
	url := "http://127.0.0.1:" + port + "/mcp"
	discover := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, c := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer wrong", 401}, {"Basic s3cret-token-of-at-least-32-bytes", 401}, {"Bearer s3cret-token-of-at-least-32-bytes", 200}} {
		resp := postMCP(t, url, "server/discover", discover, "Authorization", c.auth)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || c.status == 401 && (!strings.Contains(string(b), `"code":-32600`) || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer realm="snodod"`)) {
			t.Fatalf("Authorization %q: %d %v %s", c.auth, resp.StatusCode, resp.Header, b)
		}
	}
}
