package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
)

// The control socket's upstream and logs ops (docs/upstreams.md §8), through
// the socket, on a daemon hosting the fake upstream.

// startUpstreamDaemon runs a daemon whose one mcpServers entry, "fake",
// is the fake upstream started manually, writing startStderr bytes of
// stderr whenever it starts.
func startUpstreamDaemon(t *testing.T, startStderr int) *running {
	t.Helper()
	dir := shortDir(t)
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`
[daemon]
socket = %q
shutdown_grace = "2s"

[mcpServers.fake]
command = %q
args = ["-stderr-at-start", "%d"]
start = "manual"
`, filepath.Join(dir, "s.sock"), fakebuild.Build(t), startStderr)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	return startDaemon(t, cfg, Options{StateDir: filepath.Join(dir, "state")})
}

// upstreamRow waits until the control socket's status shows the fake in
// state, and returns its row.
func upstreamRow(t *testing.T, sock string, state string) control.Upstream {
	t.Helper()
	var last []control.Upstream
	if !eventually.Within(20*time.Second, func() bool {
		st, err := (&control.Client{Socket: sock}).Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		last = st.Upstreams
		return len(last) == 1 && last[0].State == state
	}) {
		t.Fatalf("the fake never became %s: %+v", state, last)
	}
	return last[0]
}

// upstreamAction is the control client's, for the one instance of the
// fake: its state and pid once the action is done.
func upstreamAction(ctx context.Context, sock, name, action string) (control.Instance, error) {
	got, err := (&control.Client{Socket: sock}).UpstreamAction(ctx, name, action)
	if err != nil {
		return control.Instance{}, err
	}
	if len(got) != 1 {
		return control.Instance{}, fmt.Errorf("%s %s: instances %+v, want one", action, name, got)
	}
	return got[0], nil
}

// An upstream action answers once it is done, with what it did
// (docs/upstreams.md §8: "upstream restart memory" says "memory restarted
// (pid 24758)").
func TestControlUpstreamOps(t *testing.T) {
	r := startUpstreamDaemon(t, 100)
	sock := r.cfg.Daemon.ControlSocket
	ctx := t.Context()
	upstreamRow(t, sock, control.StateStopped) // manual: not started

	first, err := upstreamAction(ctx, sock, "fake", "start")
	if err != nil || first.State != control.StateReady || first.PID == 0 || first.Instance != "all" {
		t.Fatalf("start: %+v, %v; want ready with a pid", first, err)
	}
	if row := upstreamRow(t, sock, control.StateReady); row.PID != first.PID {
		t.Errorf("status says pid %d, the start %d", row.PID, first.PID)
	}
	second, err := upstreamAction(ctx, sock, "fake", "restart")
	if err != nil || second.State != control.StateReady || second.PID == 0 || second.PID == first.PID {
		t.Fatalf("restart: %+v, %v; want ready with a pid other than %d", second, err, first.PID)
	}
	stopped, err := upstreamAction(ctx, sock, "fake", "stop")
	if err != nil || stopped.State != control.StateStopped || stopped.PID != 0 {
		t.Fatalf("stop: %+v, %v; want stopped", stopped, err)
	}

	for _, tc := range []struct{ name, action, want string }{
		{"nope", "start", `no such upstream: "nope"; the configured upstreams are fake`},
		{"fake", "pause", `unknown upstream action "pause"; the actions are start, stop and restart`},
	} {
		_, err := upstreamAction(ctx, sock, tc.name, tc.action)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.action, tc.name, err, tc.want)
		}
	}
}

func TestControlLogs(t *testing.T) {
	const startStderr = 1000
	r := startUpstreamDaemon(t, startStderr)
	sock := r.cfg.Daemon.ControlSocket
	ctx := t.Context()
	if _, err := upstreamAction(ctx, sock, "fake", "start"); err != nil {
		t.Fatal(err)
	}
	upstreamRow(t, sock, control.StateReady)

	var snapshot strings.Builder
	if err := (&control.Client{Socket: sock}).Logs(ctx, "fake", false, func(s string) error { snapshot.WriteString(s); return nil }); err != nil {
		t.Fatalf("logs: %v", err)
	}
	if n := strings.Count(snapshot.String(), "w"); n < startStderr-20 {
		t.Errorf("logs: %d bytes of the start's stderr, want about %d:\n%q", n, startStderr, snapshot.String())
	}

	// -f: the snapshot, then what the restarted process writes.
	var mu sync.Mutex
	var followed strings.Builder
	followCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- (&control.Client{Socket: sock}).Logs(followCtx, "fake", true, func(s string) error {
			mu.Lock()
			defer mu.Unlock()
			followed.WriteString(s)
			return nil
		})
	}()
	written := func() int {
		mu.Lock()
		defer mu.Unlock()
		return strings.Count(followed.String(), "w")
	}
	if !eventually.Within(20*time.Second, func() bool { return written() >= snapshot.Len()/2 }) {
		t.Fatal("the follow never got the snapshot")
	}
	before := written()
	if _, err := upstreamAction(ctx, sock, "fake", "restart"); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(20*time.Second, func() bool { return written() >= before+startStderr-20 }) {
		t.Fatalf("the follow got %d bytes after the restart, want about %d", written()-before, startStderr)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("follow ended with %v, want nil when its context ends", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the follow did not end with its context")
	}

	err := (&control.Client{Socket: sock}).Logs(ctx, "nope", false, func(string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `no such upstream: "nope"; the configured upstreams are fake`) {
		t.Errorf("logs of an unknown upstream: %v", err)
	}
}
