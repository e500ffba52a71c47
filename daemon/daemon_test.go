package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

func TestServeOneSession(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{Version: "1.2.3"})
	c := dialSession(t, r.cfg.Daemon.Socket)
	if init := c.initialize(); !strings.Contains(init, `"serverInfo":{"name":"snodod","version":"1.2.3"}`) {
		t.Errorf("initialize result %s", init)
	}
	if got, want := c.call(2, "echo", `{"text":"hi"}`), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}`; got != want {
		t.Errorf("echo: %s, want %s", got, want)
	}
	if got := c.call(3, "status", `{}`); !strings.Contains(got, `"text":"snodod 1.2.3, up `) {
		t.Errorf("status tool: %s", got)
	}
}

func TestSocketAndDirectoryModes(t *testing.T) {
	dir := filepath.Join(shortDir(t), "run", "snodod") // created by the daemon
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	for path, want := range map[string]os.FileMode{
		dir:                        os.ModeDir | 0o700,
		filepath.Dir(dir):          os.ModeDir | 0o700,
		r.cfg.Daemon.Socket:        os.ModeSocket | 0o600,
		r.cfg.Daemon.ControlSocket: os.ModeSocket | 0o600,
	} {
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode(), want)
		}
	}
	if got, want := r.cfg.Daemon.ControlSocket, filepath.Join(dir, "control.sock"); got != want {
		t.Errorf("control socket %s, want %s", got, want)
	}
	// The drain unlinks both sockets.
	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{r.cfg.Daemon.Socket, r.cfg.Daemon.ControlSocket} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after the drain: %v, want it gone", p, err)
		}
	}
}

// staleSocket leaves a socket file at path that nobody listens on, as a
// daemon killed with SIGKILL does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("the stale socket answers")
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	dir := shortDir(t)
	cfg := testConfig(t, dir, nil)
	staleSocket(t, cfg.Daemon.Socket)
	staleSocket(t, cfg.Daemon.ControlSocket)
	r := startDaemon(t, cfg, Options{})
	dialSession(t, cfg.Daemon.Socket).initialize()
	if _, err := (&control.Client{Socket: cfg.Daemon.ControlSocket}).Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = r
}

func TestLiveSocketRefused(t *testing.T) {
	dir := shortDir(t)
	cfg := testConfig(t, dir, nil)
	ln, err := net.Listen("unix", cfg.Daemon.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(t.Context())
	want := fmt.Sprintf("snodod is already running (socket %s answers); stop it or choose another daemon.socket", cfg.Daemon.Socket)
	var running *AlreadyRunningError
	if err == nil || err.Error() != want || !errors.As(err, &running) {
		t.Fatalf("Run: %v, want %q", err, want)
	}
	if _, err := os.Lstat(cfg.Daemon.ControlSocket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("control socket created anyway: %v", err)
	}
	// The other daemon's socket is left alone.
	if c, err := net.Dial("unix", cfg.Daemon.Socket); err != nil {
		t.Errorf("the live socket no longer answers: %v", err)
	} else {
		c.Close()
	}
}

// TestSecondDaemonRefused runs two daemons on one socket: the second is
// refused and the first goes on.
func TestSecondDaemonRefused(t *testing.T) {
	dir := shortDir(t)
	cfg := testConfig(t, dir, nil)
	startDaemon(t, cfg, Options{})
	d, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var running *AlreadyRunningError
	if err := d.Run(t.Context()); !errors.As(err, &running) || running.Path != cfg.Daemon.Socket {
		t.Fatalf("second Run: %v", err)
	}
	dialSession(t, cfg.Daemon.Socket).initialize()
}

func TestUnsafeDirectoryRefused(t *testing.T) {
	dir := filepath.Join(shortDir(t), "open")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(testConfig(t, dir, nil), Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(t.Context())
	want := fmt.Sprintf("socket directory %s has mode 0755, which lets other users in; run chmod 700 %s, or choose another directory for daemon.socket", dir, dir)
	if err == nil || err.Error() != want {
		t.Errorf("Run: %v\nwant %s", err, want)
	}

	if os.Geteuid() != 0 {
		t.Skip("changing a directory's owner needs root")
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 54321, 54321); err != nil {
		t.Fatal(err)
	}
	d, err = New(testConfig(t, dir, nil), Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(t.Context())
	want = fmt.Sprintf("socket directory %s is owned by uid 54321, not by snodod's uid 0; choose a directory of your own for daemon.socket, or chown 0 %s", dir, dir)
	if err == nil || err.Error() != want {
		t.Errorf("Run: %v\nwant %s", err, want)
	}
}

func TestNotASocketRefused(t *testing.T) {
	dir := shortDir(t)
	cfg := testConfig(t, dir, nil)
	if err := os.WriteFile(cfg.Daemon.Socket, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	want := cfg.Daemon.Socket + " exists and is not a socket; remove it or choose another daemon.socket"
	if err := d.Run(t.Context()); err == nil || err.Error() != want {
		t.Errorf("Run: %v, want %s", err, want)
	}
}

func TestUIDAllowed(t *testing.T) {
	tests := []struct {
		uid, self int
		allowed   []int
		want      bool
	}{
		{1000, 1000, nil, true},
		{1001, 1000, nil, false},
		{1001, 1000, []int{1001}, true},
		{1002, 1000, []int{1001, 1003}, false},
		{0, 1000, nil, false}, // root is not special
		{0, 1000, []int{0}, true},
		{0, 0, nil, true},
		{1000, 0, nil, false},
	}
	for _, tt := range tests {
		if got := uidAllowed(tt.uid, tt.self, tt.allowed); got != tt.want {
			t.Errorf("uidAllowed(%d, self %d, %v) = %v, want %v", tt.uid, tt.self, tt.allowed, got, tt.want)
		}
	}
}

func TestRefusalLines(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{string(refusalLine(uidError(1234))), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Connection refused: uid 1234 is not allowed (daemon.allowed_uids)"}}` + "\n"},
		{string(refusalLine(capacityError(7))), `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Server session capacity exhausted (daemon.max_sessions = 7)"}}` + "\n"},
	} {
		if tt.got != tt.want {
			t.Errorf("got  %s\nwant %s", tt.got, tt.want)
		}
	}
}

// TestRefuseWritesOneLine refuses a connection whose client already sent a
// request: it reads the line and then end of input, not a reset.
func TestRefuseWritesOneLine(t *testing.T) {
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.Write([]byte(initLine + "\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		refuse(a, uidError(1234))
	}()
	c := &client{t: t, c: b, r: bufio.NewReader(b)}
	if got, want := c.line(), strings.TrimSuffix(string(refusalLine(uidError(1234))), "\n"); got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	b.(*net.UnixConn).CloseWrite()
	c.eof()
	<-done
}

func TestMaxSessions(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.max_sessions": 3}), Options{})
	var clients []*client
	for range 3 {
		c := dialSession(t, r.cfg.Daemon.Socket)
		c.initialize()
		clients = append(clients, c)
	}
	// The fourth is one too many: one line, then the connection closes.
	extra := dialSession(t, r.cfg.Daemon.Socket)
	extra.send(initLine)
	if got, want := extra.line(), `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Server session capacity exhausted (daemon.max_sessions = 3)"}}`; got != want {
		t.Errorf("session 4: %s\nwant %s", got, want)
	}
	extra.eof()
	// One leaves; a new one fits again.
	clients[0].c.Close()
	eventually.True(t, "the session to end", func() bool { return len(r.d.Status().Sessions) == 2 })
	dialSession(t, r.cfg.Daemon.Socket).initialize()
	if n := len(r.d.Status().Sessions); n != 3 {
		t.Errorf("%d sessions, want 3", n)
	}
}

func TestStatusSessions(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{Version: "9.9"})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	c.call(2, "echo", `{"text":"hello"}`)
	st, err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != "9.9" || st.PID != os.Getpid() || st.MaxSessions != 1024 || len(st.Sessions) != 1 {
		t.Fatalf("status %+v", st)
	}
	s := st.Sessions[0]
	if s.ID != 1 || s.Kind != "socket" || s.PeerPID != os.Getpid() || s.PeerUID != os.Geteuid() ||
		s.Version != "2025-06-18" || s.BytesIn == 0 || s.BytesOut == 0 || time.Since(s.Started) > time.Minute {
		t.Errorf("session %+v", s)
	}
	if e := st.Executor; e.MaxConcurrency != 32 || e.MaxQueue != 256 || e.RequestTimeout != "30s" {
		t.Errorf("executor %+v", e)
	}
	// The wire form, as a script reads it.
	raw := rawControl(t, r.cfg.Daemon.ControlSocket, `{"op":"status"}`)
	if len(raw) != 1 || raw[0]["ok"] != true {
		t.Fatalf("status reply %v", raw)
	}
	sessions, _ := raw[0]["sessions"].([]any)
	if len(sessions) != 1 {
		t.Fatalf("sessions %v", raw[0]["sessions"])
	}
	row := sessions[0].(map[string]any)
	for _, key := range []string{"id", "kind", "peer_pid", "peer_uid", "started", "version", "in_flight", "subscriptions", "restarts", "bytes_in", "bytes_out"} {
		if _, ok := row[key]; !ok {
			t.Errorf("session row lacks %q: %v", key, row)
		}
	}
	exec := raw[0]["executor"].(map[string]any)
	for _, key := range []string{"running", "detached", "queued", "max_concurrency", "max_queue", "session_queue"} {
		if _, ok := exec[key]; !ok {
			t.Errorf("executor lacks %q: %v", key, exec)
		}
	}
	// The per-session places are shown, so "queued" is never read as
	// beyond its maximum (docs/transport.md §13.2).
	if got := exec["session_queue"]; got != float64(sessionQueue) {
		t.Errorf("session_queue = %v, want %d", got, sessionQueue)
	}
}

// TestShutdownDrains cancels the daemon while a call runs: the call's
// result is delivered, then the connection ends and Run returns nil.
func TestShutdownDrains(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":600},"_meta":{"progressToken":"p"}}}`)
	if got := c.line(); !strings.HasPrefix(got, `{"jsonrpc":"2.0","method":"notifications/progress"`) {
		t.Fatalf("before the signal: %s", got)
	}
	start := time.Now()
	r.stop()
	if got, want := c.answer(2), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"done"}],"isError":false}}`; got != want {
		t.Errorf("the running call: %s", got)
	}
	c.eof()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > r.cfg.Limits.ShutdownGrace+drainMargin {
		t.Errorf("drain took %v", took)
	}
	// No new sessions once draining: the socket is gone.
	if _, err := net.Dial("unix", r.cfg.Daemon.Socket); err == nil {
		t.Error("the session socket still answers after the drain")
	}
}

// TestShutdownBounded: a call that outlives the grace is cut off, and Run
// returns within grace + margin.
func TestShutdownBounded(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.shutdown_grace": 300 * time.Millisecond}), Options{})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":20000},"_meta":{"progressToken":"p"}}}`)
	c.line() // the first progress: the call runs
	start := time.Now()
	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+drainMargin {
		t.Errorf("drain took %v", took)
	}
}

func TestReload(t *testing.T) {
	dir := shortDir(t)
	next := struct {
		cfg *config.Config
		err error
	}{}
	var applied *config.Config
	r := startDaemon(t, testConfig(t, dir, map[string]any{"session.max_line_bytes": 1000}), Options{
		Reload:   func() (*config.Config, error) { return next.cfg, next.err },
		OnReload: func(c *config.Config) { applied = c },
	})
	old := dialSession(t, r.cfg.Daemon.Socket)
	old.initialize()

	// A broken configuration is refused; the running one stays.
	_, next.err = loadConfig(dir, map[string]any{"session.max_line_bytes": -1, "log.level": "loud"})
	if next.err == nil {
		t.Fatal("the broken configuration loads")
	}
	if err := r.d.Reload(); err == nil || !strings.Contains(err.Error(), "session.max_line_bytes: must be a positive integer") {
		t.Fatalf("Reload: %v", err)
	}
	if r.d.Config() != r.cfg || applied != nil {
		t.Fatal("the broken configuration was applied")
	}
	if got := problemLines(next.err); len(got) != 2 || !strings.HasPrefix(got[0], "log.level: ") {
		t.Errorf("problem lines %q", got)
	}

	// A good one applies to new sessions only.
	next.cfg, next.err = loadConfig(dir, map[string]any{"session.max_line_bytes": 300, "daemon.max_sessions": 2})
	if next.err != nil {
		t.Fatal(next.err)
	}
	if err := r.d.Reload(); err != nil {
		t.Fatal(err)
	}
	if r.d.Config() != next.cfg || applied != next.cfg {
		t.Fatal("the new configuration is not in force")
	}
	long := strings.Repeat("x", 400)
	if got := old.call(2, "echo", fmt.Sprintf(`{"text":%q}`, long)); !strings.Contains(got, long) {
		t.Errorf("the running session lost its limit: %s", got)
	}
	fresh := dialSession(t, r.cfg.Daemon.Socket)
	fresh.initialize()
	fresh.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, long))
	if got, want := fresh.line(), `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Message exceeds the 300-byte line limit"}}`; got != want {
		t.Errorf("a new session's long line: %s, want %s", got, want)
	}
	// max_sessions = 2 applies at once: a third session is refused.
	third := dialSession(t, r.cfg.Daemon.Socket)
	if got := third.line(); !strings.Contains(got, "(daemon.max_sessions = 2)") {
		t.Errorf("third session: %s", got)
	}
	if st := r.d.Status(); st.MaxSessions != 2 {
		t.Errorf("status max_sessions %d", st.MaxSessions)
	}
}

func TestReloadKeepsExecutor(t *testing.T) {
	dir := shortDir(t)
	cfg := testConfig(t, dir, nil)
	d, err := New(cfg, Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	first := d.gen.Load().exec
	same := testConfig(t, dir, map[string]any{"daemon.max_sessions": 5})
	d.opts.Reload = func() (*config.Config, error) { return same, nil }
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if d.gen.Load().exec != first {
		t.Error("unchanged executor limits made a new executor")
	}
	changed := testConfig(t, dir, map[string]any{"executor.max_concurrency": 2})
	d.opts.Reload = func() (*config.Config, error) { return changed, nil }
	if err := d.Reload(); err != nil {
		t.Fatal(err)
	}
	if e := d.gen.Load().exec; e == first || e.Limits().MaxConcurrency != 2 {
		t.Error("changed executor limits kept the old executor")
	}
	d.opts.Reload = nil
	if err := d.Reload(); err == nil {
		t.Error("Reload without a reload function succeeded")
	}
}

func TestRunTwice(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := r.d.Run(ctx); err == nil {
		t.Error("a second Run succeeded")
	}
}
