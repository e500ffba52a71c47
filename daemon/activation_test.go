package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
)

// helperEnv makes the test binary run activationHelper instead of the
// tests: a daemon that takes its sockets from systemd's variables.
const helperEnv = "SNODOD_DAEMON_TEST_HELPER"

// activationHelper runs a daemon whose configuration names sockets in the
// directory $SNODOD_DAEMON_TEST_HELPER (which it must not create, since
// the sockets are passed), until SIGTERM.
func activationHelper() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	dir := os.Getenv(helperEnv)
	cfg, err := loadConfig(filepath.Join(dir, "unused"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d, err := New(cfg, Options{Logger: testLogger(), Catalog: demo})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, v := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		if os.Getenv(v) != "" {
			fmt.Fprintf(os.Stderr, "%s is still set\n", v)
			return 1
		}
	}
	return 0
}

// TestSocketActivation passes two listening sockets the way systemd does
// (descriptors 3 and 4, LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID, which
// must be the daemon's own pid: a shell sets it to $$ and execs the test
// binary, keeping its pid).
func TestSocketActivation(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to set LISTEN_PID to the daemon's pid")
	}
	dir := shortDir(t)
	sessionPath, controlPath := filepath.Join(dir, "act.sock"), filepath.Join(dir, "actctl.sock")
	var files []*os.File
	for _, path := range []string{sessionPath, controlPath} {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.File()
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false) // as systemd: the socket stays
		ln.Close()
		defer f.Close()
		files = append(files, f)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `LISTEN_PID=$$; export LISTEN_PID; exec "$0"`, os.Args[0])
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, "LISTEN_FDS=2", "LISTEN_FDNAMES=session:control", "NOTIFY_SOCKET=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		f.Close() // the daemon has them now
	}

	c := dialSession(t, sessionPath)
	c.initialize()
	if got := c.call(2, "echo", `{"text":"activated"}`); !strings.Contains(got, `"text":"activated"`) {
		t.Errorf("echo: %s", got)
	}
	st, err := (&control.Client{Socket: controlPath}).Status(ctx)
	if err != nil {
		t.Fatalf("status over the passed control socket: %v\n%s", err, stderr.String())
	}
	if len(st.Sessions) != 1 || st.PID != cmd.Process.Pid {
		t.Errorf("status %+v, want one session of pid %d", st, cmd.Process.Pid)
	}
	c.c.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("daemon: %v\n%s", err, stderr.String())
	}
	// The passed sockets are systemd's: still there. The configured paths
	// were never made.
	for _, p := range []string{sessionPath, controlPath} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != os.ModeSocket {
			t.Errorf("%s after exit: %v", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "unused")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the configured socket directory was created: %v", err)
	}
}

// TestActivationIgnoredForAnotherPID: variables meant for another process
// are ignored, as sd_listen_fds(3) requires.
func TestActivationIgnoredForAnotherPID(t *testing.T) {
	t.Setenv("LISTEN_PID", "1")
	t.Setenv("LISTEN_FDS", "2")
	t.Setenv("LISTEN_FDNAMES", "session:control")
	s, c, _, err := activated()
	if s != nil || c != nil || err != nil {
		t.Errorf("activated() = %v, %v, %v; want nothing", s, c, err)
	}
}
