//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// `snodod connect` when no daemon runs starts one (docs/architecture.md
// §10), as real processes.

// reapDaemon ends, when the test ends, the daemon that answers on the
// control socket path: one a connect started is nobody's child here.
func reapDaemon(t *testing.T, path string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := (&control.Client{Socket: path}).Status(ctx)
		if err != nil {
			return
		}
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		if !eventually.Within(30*time.Second, func() bool { return !proctest.Alive(st.PID) }) {
			_ = syscall.Kill(st.PID, syscall.SIGKILL)
			t.Errorf("the started daemon (pid %d) did not stop", st.PID)
		}
	})
}

// TestConnectStartsDaemon: no daemon runs; connect starts one in the
// background, with its own socket flags, serves the session through it,
// and leaves it running, its log in the state directory.
func TestConnectStartsDaemon(t *testing.T) {
	dir := sockDir(t)
	sock := filepath.Join(dir, "s.sock")
	control := filepath.Join(dir, "control.sock")
	reapDaemon(t, control)
	r := runIn(t, isolated(dir), lines(initLine), "connect", "--socket", sock)
	if r.status != 0 || !strings.HasPrefix(r.stdout, `{"jsonrpc":"2.0","id":1,"result":{`) || r.stderr != "" {
		t.Fatalf("connect: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	st := runIn(t, isolated(dir), "", "status", "--socket", sock)
	if st.status != 0 || !strings.Contains(st.stdout, "0 sessions") {
		t.Fatalf("status after connect: %d\n%s%s", st.status, st.stdout, st.stderr)
	}
	logPath := filepath.Join(dir, "state", "snodod", "daemon.log")
	log, err := os.ReadFile(logPath)
	if err != nil || !strings.Contains(string(log), "starts the daemon: ") || !strings.Contains(string(log), `msg="snodod started"`) {
		t.Errorf("the daemon's log %s: %v\n%s", logPath, err, log)
	}
	// The daemon is detached: a session of its own, and none of the
	// client's descriptors.
	pid := statusPID(t, control)
	if sid, _ := unix.Getsid(pid); sid != pid {
		t.Errorf("the started daemon's session is %d, want its own (%d)", sid, pid)
	}
	for _, fd := range []string{"0", "1"} {
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd)); err != nil || target != "/dev/null" {
			t.Errorf("the started daemon's fd %s is %q (%v), want /dev/null", fd, target, err)
		}
	}
	// A second connect finds it: nothing more is started.
	if r := runIn(t, isolated(dir), lines(initLine), "connect", "--socket", sock); r.status != 0 {
		t.Errorf("second connect: %d\n%s", r.status, r.stderr)
	}
	if got := statusPID(t, control); got != pid {
		t.Errorf("the second connect reached pid %d, want %d", got, pid)
	}
}

func statusPID(t *testing.T, path string) int {
	t.Helper()
	st, err := (&control.Client{Socket: path}).Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st.PID
}

// TestConnectStartFails: a daemon that cannot start (its configuration
// refused) makes connect say why, where it looked and where the log is.
func TestConnectStartFails(t *testing.T) {
	dir := sockDir(t)
	sock := filepath.Join(dir, "s.sock")
	file := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(file, []byte("[session]\nwrite_timeout = \"0s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, isolated(dir), lines(initLine), "connect", "--config", file, "--socket", sock)
	logPath := filepath.Join(dir, "state", "snodod", "daemon.log")
	want := fmt.Sprintf("snodod connect: no daemon answers at %s (no such file or directory); starting one failed: ", filepath.Join(dir, "control.sock"))
	// Before it, the warnings of a client, which needs only the sockets.
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if r.status != 1 || !strings.HasPrefix(last, want) || !strings.Contains(last, `session.write_timeout: must be a positive duration`) ||
		!strings.HasSuffix(last, " (its log: "+logPath+")") {
		t.Errorf("connect: %d\n%s\nwant 1 and a last line starting %q", r.status, r.stderr, want)
	}
}

// TestConnectNoDaemonDefaultPaths: with the default paths and no
// XDG_RUNTIME_DIR (an MCP client's environment), the failure names every
// directory tried and the variable, with the fix.
func TestConnectNoDaemonDefaultPaths(t *testing.T) {
	dir := sockDir(t)
	var env []string
	for _, kv := range isolated(dir) {
		if !strings.HasPrefix(kv, "XDG_RUNTIME_DIR=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	env = append(env, "TMPDIR="+dir)
	uid := os.Getuid()
	var tried []string
	if fi, err := os.Stat(fmt.Sprintf("/run/user/%d", uid)); err == nil && fi.IsDir() {
		tried = append(tried, fmt.Sprintf("/run/user/%d/snodod/control.sock", uid))
	} else {
		tried = append(tried, filepath.Join(dir, fmt.Sprintf("snodod-%d", uid), "control.sock"))
	}
	tried = append(tried, fmt.Sprintf("/tmp/snodod-%d/control.sock", uid))
	for _, p := range tried[1:] {
		if _, err := os.Stat(p); err == nil {
			t.Skipf("%s exists: a daemon of this user may answer there", p)
		}
	}
	r := runIn(t, env, "", "connect", "--no-start")
	if r.status != 1 || strings.Count(r.stderr, "\n") != 1 {
		t.Fatalf("connect --no-start: %d\n%s", r.status, r.stderr)
	}
	for _, want := range append(tried, "XDG_RUNTIME_DIR is unset", `set XDG_RUNTIME_DIR in this server's "env"`, "--control-socket PATH") {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("connect --no-start says\n%s\nwithout %q", r.stderr, want)
		}
	}
}

// TestConnectStartedDaemonOutlivesConnect: the daemon connect started outlives
// it, and stops as any daemon does.
func TestConnectStartedDaemonOutlivesConnect(t *testing.T) {
	dir := sockDir(t)
	sock := filepath.Join(dir, "s.sock")
	control := filepath.Join(dir, "control.sock")
	reapDaemon(t, control)
	cmd := exec.Command(binary, "connect", "--socket", sock)
	cmd.Env = isolated(dir)
	cmd.Stdin = strings.NewReader(lines(initLine))
	if out, err := cmd.Output(); err != nil || !strings.HasPrefix(string(out), `{"jsonrpc":"2.0","id":1,`) {
		t.Fatalf("connect: %v\n%s", err, out)
	}
	pid := statusPID(t, control)
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !eventually.Within(30*time.Second, func() bool { return !proctest.Alive(pid) }) {
		t.Fatalf("the daemon (pid %d) did not stop after SIGTERM", pid)
	}
	if _, err := os.Stat(control); err == nil {
		t.Errorf("the daemon left %s", control)
	}
}
