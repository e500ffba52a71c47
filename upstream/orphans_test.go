package upstream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/mcpclient"
)

// roleEnv makes the test binary a helper process; helperEnv passes it what
// it needs.
const (
	roleEnv   = "UPSTREAM_TEST_ROLE"
	helperEnv = "UPSTREAM_TEST_ARGS"
)

// helperMain plays a daemon ("daemon" role): it records its instances in
// the group record named by helperEnv's first field and starts one Conn on
// the fake upstream (helperEnv's second field) whose grandchild ignores
// SIGTERM (pid file: the third field), prints "ready", and waits for stdin
// to end. The test kills it with SIGKILL instead.
func helperMain(role string) int {
	if role != "daemon" {
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
	}
	args := strings.Split(os.Getenv(helperEnv), "\n")
	rec, err := proc.OpenGroupRecord(args[0], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cmd := mcpclient.Command{Path: args[1], Args: []string{"-grandchild", args[2], "-ignore-term"}, Record: rec}
	c, err := mcpclient.Connect(context.Background(), cmd, mcpclient.Options{Name: "orphan"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready", c.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// A daemon killed with SIGKILL leaves its upstream's grandchild (its
// leader died by the parent-death signal); the next daemon's KillOrphans
// kills it.
func TestKillOrphansAfterDaemonCrash(t *testing.T) {
	proctest.Cleanup(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "state", "groups")
	pidfile := filepath.Join(dir, "grandchild.pid")
	daemon := exec.Command(os.Args[0], "-test.run=^$")
	daemon.Env = append(os.Environ(), roleEnv+"=daemon", helperEnv+"="+record+"\n"+fakePath+"\n"+pidfile)
	stdin, err := daemon.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	daemon.Stderr = os.Stderr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ready ") {
		_ = daemon.Process.Kill()
		_ = daemon.Wait()
		t.Fatalf("daemon helper: %q, %v", line, err)
	}
	leader, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready ")))
	grandchild := proctest.ReadPIDFile(t, pidfile)

	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	eventually.True(t, "the leader's parent-death signal", func() bool { return !proctest.Alive(leader) })
	if !proctest.Alive(grandchild) {
		t.Fatalf("grandchild %d died with the daemon: nothing left to test", grandchild)
	}

	n, err := proc.KillOrphans(record, quiet)
	if err != nil || n != 1 {
		t.Fatalf("KillOrphans = %d, %v; want 1 group killed", n, err)
	}
	eventually.True(t, "the orphaned grandchild's death", func() bool { return !proctest.Alive(grandchild) })
	if n, err := proc.KillOrphans(record, quiet); err != nil || n != 0 {
		t.Errorf("second KillOrphans = %d, %v; want 0 (the record was emptied)", n, err)
	}
}

// The Conn records its group from the spawn to the reap.
func TestConnRecordsGroup(t *testing.T) {
	rec, err := proc.OpenGroupRecord(filepath.Join(t.TempDir(), "groups"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	path := rec.Path()
	c := startFake(t, mcpclient.Command{Record: rec})
	start, err := proc.StartTime(c.PID())
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf("\n%d %d\n", c.PID(), start)
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), entry) {
		t.Errorf("record while running = %q, want it to hold %q", b, entry)
	}
	stop(c)
	if b, _ := os.ReadFile(path); strings.Contains(string(b), entry) {
		t.Errorf("record after Stop = %q, still holding the group", b)
	}
}

var quiet = slog.New(slog.DiscardHandler)
