package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/server"
)

// get fetches url with c, with extra headers in pairs.
func get(t *testing.T, c *http.Client, url string, extra ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The admin listener serves /metrics to the daemon's own uid, counts a
// session's tools/call there, and serves nothing of MCP.
func TestAdminMetrics(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"admin.listen": "127.0.0.1:0"}), Options{})
	addr := r.d.adminAddr()
	if addr == "" {
		t.Fatal("no admin listener")
	}
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	if got := c.call(2, "echo", `{"text":"hi"}`); !strings.Contains(got, `"result"`) {
		t.Fatalf("echo: %s", got)
	}
	own := clientDialing(t, (&net.Dialer{}).DialContext)
	status, body := get(t, own, "http://"+addr+"/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d %s", status, body)
	}
	for _, want := range []string{
		`snodod_requests_total{code="",method="tools/call",outcome="ok",tool="echo",upstream=""} 1`,
		`snodod_sessions{era="legacy",kind="socket"} 1`,
		`snodod_executor_slots `,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if status, _ := get(t, own, "http://"+addr+"/mcp"); status != 404 {
		t.Errorf("/mcp on the admin listener: %d, want 404", status)
	}
}

// Without admin.listen there are no metrics: only the audit log's sink
// observes the runtime (a reload may turn the log on).
func TestAdminOff(t *testing.T) {
	r := startDaemon(t, testConfig(t, shortDir(t), nil), Options{})
	if r.d.metrics != nil || r.d.observer() != server.Observer(&r.d.audit) || r.d.adminAddr() != "" {
		t.Error("metrics without admin.listen")
	}
}

// The admin listener's peers are the HTTP listener's (docs/security.md):
// on loopback another uid is refused with the session socket's words,
// and served with admin.auth_token_file's token.
func TestAdminPeers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a socket of another uid needs root")
	}
	const nobody = 65534
	dir := shortDir(t)
	token := strings.Repeat("a", 40)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, testConfig(t, dir, map[string]any{"admin.listen": "127.0.0.1:0", "admin.auth_token_file": tokenFile}), Options{})
	url := "http://" + r.d.adminAddr() + "/metrics"
	other := clientDialing(t, dialAsUID(nobody))
	if status, body := get(t, other, url); status != 401 || !strings.Contains(body, "Unauthorized") {
		t.Errorf("uid %d without the token: %d %s", nobody, status, body)
	}
	if status, body := get(t, other, url, "Authorization", "Bearer "+token); status != 200 || !strings.Contains(body, "snodod_refused_connections_total{listener=\"admin\",reason=\"unauthorized\"} 1") {
		t.Errorf("uid %d with the token: %d, or its refusal not counted:\n%.2000s", nobody, status, body)
	}

}

// admin.listen = "unix:PATH" serves the daemon's own uid on a socket of
// mode 0600 (its peer judged by SO_PEERCRED, as the HTTP listener's).
func TestAdminUnixSocket(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "run", "admin.sock")
	r := startDaemon(t, testConfig(t, dir, map[string]any{"admin.listen": "unix:" + sock}), Options{})
	if got := r.d.adminAddr(); got != sock {
		t.Fatalf("admin address %q, want %s", got, sock)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket: %v, %v; want mode 0600", fi.Mode(), err)
	}
	c := clientDialing(t, func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	})
	if status, body := get(t, c, "http://admin/metrics"); status != 200 || !strings.Contains(body, "snodod_build_info") {
		t.Errorf("own uid over the socket: %d %.500s", status, body)
	}
}
