// Package proctest helps tests that start real processes prove they leave
// none behind. Main makes the test process a child subreaper
// (PR_SET_CHILD_SUBREAPER), so that every descendant whose parent dies is
// reparented to the test process instead of init: a grandchild that
// outlives its group is then a child of the test, where Check finds it.
//
// Only tests use it. Check reaps zombie children by pid, so it must run when
// the test has waited for every process it started itself (after Stop or
// Wait), never while another test starts processes in parallel.
package proctest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/internal/proc"
)

// Subreaper makes the calling process a child subreaper. Call it from
// TestMain before any test starts a process.
func Subreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// settle is how long Check waits for killed children to finish dying: a
// SIGKILL is delivered asynchronously, so a group killed just before Check
// may still be running for a moment.
const settle = 10 * time.Second

// Check fails t for every child of the test process still alive, kills it
// (SIGKILL), and reaps every zombie child, so that one test's leak does not
// fail the next. Register it with t.Cleanup(func() { proctest.Check(t) })
// or use Cleanup.
func Check(t testing.TB) {
	t.Helper()
	for _, leak := range Leftovers() {
		t.Errorf("process leak: %s", leak)
	}
}

// Leftovers waits up to a few seconds for the test process's children to
// end, reaping zombies; it kills (SIGKILL) those still alive then and
// describes each ("child PID (COMMAND LINE) still running after the
// test"). For a TestMain, where there is no testing.TB.
func Leftovers() []string {
	deadline := time.Now().Add(settle)
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		live := reapZombies()
		if len(live) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var out []string
			for _, c := range live {
				out = append(out, "child "+strconv.Itoa(c.pid)+" ("+c.cmdline+") still running after the test")
				_ = syscall.Kill(c.pid, syscall.SIGKILL)
			}
			return out
		}
		time.Sleep(delay)
	}
}

// Cleanup registers Check for the end of t.
func Cleanup(t testing.TB) {
	t.Cleanup(func() { Check(t) })
}

type child struct {
	pid     int
	cmdline string
}

// reapZombies reaps the zombie children and returns the live ones.
func reapZombies() []child {
	var live []child
	for _, c := range Children() {
		if !Alive(c) {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(c, &ws, syscall.WNOHANG, nil)
			continue
		}
		live = append(live, child{pid: c, cmdline: cmdline(c)})
	}
	return live
}

// Children returns the pids of the test process's children, alive or
// zombie.
func Children() []int {
	self := os.Getpid()
	all, _ := proc.Processes()
	var out []int
	for _, p := range all {
		if p.PPID == self {
			out = append(out, p.PID)
		}
	}
	return out
}

// Alive reports whether pid is a process that has not exited (a zombie has).
func Alive(pid int) bool {
	p, err := proc.ReadProcess(pid)
	return err == nil && !p.Exited()
}

// ReadPIDFile returns the pid written in the file at path (a test's
// program writes its child's there), failing t when there is none.
func ReadPIDFile(t testing.TB, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}

func cmdline(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
