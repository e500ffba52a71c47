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
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/upstream"
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
func upstreamRow(t *testing.T, control string, state upstream.State) upstream.Status {
	t.Helper()
	var last []upstream.Status
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := QueryStatus(t.Context(), control)
		if err != nil {
			t.Fatal(err)
		}
		last = st.Upstreams
		if len(last) == 1 && last[0].State == state {
			return last[0]
		}
	}
	t.Fatalf("the fake never became %s: %+v", state, last)
	return upstream.Status{}
}

func TestControlUpstreamOps(t *testing.T) {
	r := startUpstreamDaemon(t, 100)
	control := r.cfg.Daemon.ControlSocket
	ctx := t.Context()
	upstreamRow(t, control, upstream.StateStopped) // manual: not started

	if err := UpstreamAction(ctx, control, "fake", "start"); err != nil {
		t.Fatalf("start: %v", err)
	}
	first := upstreamRow(t, control, upstream.StateReady)
	if first.PID == 0 {
		t.Fatalf("started without a pid: %+v", first)
	}
	if err := UpstreamAction(ctx, control, "fake", "restart"); err != nil {
		t.Fatalf("restart: %v", err)
	}
	var second upstream.Status
	for deadline := time.Now().Add(20 * time.Second); second.PID == 0 || second.PID == first.PID; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("restart kept pid %d", first.PID)
		}
		second = upstreamRow(t, control, upstream.StateReady)
	}
	if err := UpstreamAction(ctx, control, "fake", "stop"); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if row := upstreamRow(t, control, upstream.StateStopped); row.PID != 0 {
		t.Errorf("stopped with a pid: %+v", row)
	}

	for _, tc := range []struct{ name, action, want string }{
		{"nope", "start", `no such upstream: "nope"; the configured upstreams are fake`},
		{"fake", "pause", `unknown upstream action "pause"; the actions are start, stop and restart`},
	} {
		err := UpstreamAction(ctx, control, tc.name, tc.action)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %q", tc.action, tc.name, err, tc.want)
		}
	}
}

func TestControlLogs(t *testing.T) {
	const startStderr = 1000
	r := startUpstreamDaemon(t, startStderr)
	control := r.cfg.Daemon.ControlSocket
	ctx := t.Context()
	if err := UpstreamAction(ctx, control, "fake", "start"); err != nil {
		t.Fatal(err)
	}
	upstreamRow(t, control, upstream.StateReady)

	var snapshot strings.Builder
	if err := Logs(ctx, control, "fake", false, func(s string) error { snapshot.WriteString(s); return nil }); err != nil {
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
		done <- Logs(followCtx, control, "fake", true, func(s string) error {
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
	for deadline := time.Now().Add(20 * time.Second); written() < snapshot.Len()/2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the follow never got the snapshot")
		}
	}
	before := written()
	if err := UpstreamAction(ctx, control, "fake", "restart"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); written() < before+startStderr-20; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the follow got %d bytes after the restart, want about %d", written()-before, startStderr)
		}
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

	err := Logs(ctx, control, "nope", false, func(string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `no such upstream: "nope"; the configured upstreams are fake`) {
		t.Errorf("logs of an unknown upstream: %v", err)
	}
}
