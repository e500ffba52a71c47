package daemon

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// startViewsNode runs a daemon serving HTTP on loopback with three views
// (docs/views.md): ro, opened by the token of ro.token; ci, bound to uid
// 65534 (allowed_uids); and other, bound to nobody in particular; and
// http.auth_token_file, the token of every view. It returns the daemon
// and its endpoint's URL.
func startViewsNode(t *testing.T) (*running, string) {
	t.Helper()
	dir := shortDir(t)
	tokenFile := filepath.Join(dir, "ro.token")
	if err := os.WriteFile(tokenFile, []byte("token = \"ro-0123456789abcdef0123456789abcdef\"\nviews = [\"ro\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mainToken := filepath.Join(dir, "main.token")
	if err := os.WriteFile(mainToken, []byte("main-0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`
[daemon]
socket = %q
shutdown_grace = "2s"

[http]
listen = "127.0.0.1:0"
tokens = [%q]
auth_token_file = %q

[views.ro]
[views.ci]
allowed_uids = [65534]
[views.other]
`, filepath.Join(dir, "s.sock"), tokenFile, mainToken)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, cfg, Options{StateDir: filepath.Join(dir, "state")})
	return r, "http://" + r.d.Status().HTTP.Listen + "/mcp"
}

// Who may open which view over HTTP (docs/security.md, "Who may open
// which view"): the daemon's own uid every one; another uid the views
// whose allowed_uids name it, and, with a token of http.tokens, the views
// the token names, and nothing else (not the aggregated view); the token
// of http.auth_token_file opens every view.
func TestViewHTTPAccess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a socket of another uid needs root")
	}
	const nobody = 65534
	const roToken = "Bearer ro-0123456789abcdef0123456789abcdef"
	const mainToken = "Bearer main-0123456789abcdef0123456789abcdef"
	r, url := startViewsNode(t)
	own, other := clientDialing(t, (&net.Dialer{}).DialContext), clientDialing(t, dialAsUID(nobody))
	for _, view := range []string{"", "/@ro", "/@ci", "/@other"} {
		if status, body, _ := discoverWith(t, own, url+view); status != 200 {
			t.Errorf("the daemon's own uid at %q: %d %s", view, status, body)
		}
	}
	cases := []struct {
		name, path, auth string
		status           int
		body             string // a part of the answer
	}{
		{"uid bound to ci, no token", "/@ci", "", 200, `"result"`},
		{"uid bound to ci, at ro", "/@ro", "", 401, "Connection refused: uid 65534 may not open view ro"},
		{"uid bound to ci, at the aggregated view", "", "", 401, "Unauthorized: send Authorization: Bearer"},
		{"ro's token at ro", "/@ro", roToken, 200, `"result"`},
		{"ro's token at other", "/@other", roToken, 403, "this token does not open view other"},
		{"ro's token at the aggregated view", "", roToken, 401, "Unauthorized"},
		{"the main token at ci", "/@ci", mainToken, 200, `"result"`},
		{"the main token at other", "/@other", mainToken, 200, `"result"`},
		{"the main token at the aggregated view", "", mainToken, 200, `"result"`},
		{"a wrong token at ro", "/@ro", "Bearer nope-0123456789abcdef0123456789abcdef", 403, "the token opens no view ro"},
	}
	for _, c := range cases {
		var extra []string
		if c.auth != "" {
			extra = []string{"Authorization", c.auth}
		}
		status, body, challenge := discoverWith(t, other, url+c.path, extra...)
		if status != c.status || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, status, body, c.status, c.body)
		}
		if status == 401 && challenge == "" {
			t.Errorf("%s: 401 without a challenge", c.name)
		}
	}
	if got := r.d.Status().HTTP.Refused["view"]; got != 3 {
		t.Errorf("refused for a view: %d, want 3", got)
	}
}

// asUID runs f on a thread of its own whose effective uid is uid (the
// thread's only: x/sys/unix's raw setresuid, not the process-wide
// syscall.Setresuid), so that the sockets f connects carry uid as their
// SO_PEERCRED. The thread ends with f's goroutine, never reused.
func asUID(t *testing.T, uid int, f func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, ^uintptr(0), uintptr(uid), ^uintptr(0)); e != 0 {
			done <- e
			return
		}
		f()
		done <- nil
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A view's allowed_uids over the control socket (docs/security.md, "Who
// may open which view"): a uid only view ci names may connect to ci, and
// to nothing else (another view, the aggregated view, status).
func TestViewConnectAllowedUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a peer of another uid needs root")
	}
	const nobody = 65534
	r, _ := startViewsNode(t)
	sock := r.cfg.Daemon.ControlSocket
	// Let nobody reach the socket; the daemon judges who connected.
	for _, p := range []string{filepath.Dir(sock), sock} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	connect := func(view string) (*control.Handover, error) {
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { inR.Close(); inW.Close(); outR.Close(); outW.Close() })
		var h *control.Handover
		asUID(t, nobody, func() {
			h, err = (&control.Client{Socket: sock}).Connect(t.Context(), inR, outW, control.ConnectOptions{View: view})
		})
		return h, err
	}
	h, err := connect("@ci")
	if err != nil {
		t.Fatalf("uid %d at view ci: %v", nobody, err)
	}
	eventually.True(t, "the session of view ci in status", func() bool {
		for _, s := range r.d.Status().Sessions {
			if s.View == "@ci" && s.PeerUID == nobody {
				return true
			}
		}
		return false
	})
	h.Close()
	for view, want := range map[string]string{
		"@ro": "Connection refused: uid 65534 may not open view ro (daemon.allowed_uids)",
		"":    "Connection refused: uid 65534 is not allowed (daemon.allowed_uids)",
	} {
		if _, err := connect(view); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("uid %d at view %q: %v, want %q", nobody, view, err, want)
		}
	}
	asUID(t, nobody, func() {
		_, err = (&control.Client{Socket: sock}).Status(t.Context())
	})
	if err == nil || !strings.Contains(err.Error(), "is not allowed") {
		t.Errorf("status of uid %d: %v", nobody, err)
	}
}
