package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// Children are the daemon's to end, whole (docs/architecture.md §6): what
// a hosted server or an exec tool starts is stopped with it, a process
// that called setsid included, and what a daemon killed with SIGKILL left
// running is ended by the next one.

// escapeScript is an exec tool's shell script that starts a process that
// leaves the run's group and session (setsid) and writes its pid to the
// file named by $1; with wait it also starts a sleep that stays in the
// group, writing its pid to $1.group, and waits for both.
func escapeScript(wait bool) string {
	// $$$$ is the shell's $$: the configuration's expansion makes $$ a $.
	s := `setsid sh -c 'echo $$$$ > "$0"; exec sleep 300' "$1" & `
	if wait {
		s = `sleep 300 & echo $! > "$1.group"; ` + s
	}
	s += `while [ ! -s "$1" ]; do sleep 0.01; done`
	if wait {
		s += "; wait"
	}
	return s
}

func execToolConfig(name, pidfile string, wait bool) string {
	return fmt.Sprintf("[tools.%s]\ncommand = [\"/bin/sh\", \"-c\", %q, \"sh\", %q]\n", name, escapeScript(wait), pidfile)
}

// TestSetsidDescendantsStopped: a hosted server's grandchild that calls
// setsid and ignores SIGTERM is gone after `snodod upstream stop`, after a
// restart, and after the daemon's own stop; `setsid sleep 300 &` in an
// exec tool is gone when its run ends. None of them is left to the next
// daemon or to init.
func TestSetsidDescendantsStopped(t *testing.T) {
	fake := fakeUpstream(t)
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pidfile := filepath.Join(dir, "grandchild.pid")
	escapee := filepath.Join(dir, "escapee.pid")
	config := fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nargs = [\"-grandchild\", %q, \"-setsid\"]\nstart = \"eager\"\n", fake, pidfile) +
		execToolConfig("escape", escapee, false)
	d := startDaemonIn(t, dir, config, nil)
	ready := func(what string) {
		d.awaitStatus(t, what, answerWithin, func(st *control.Status) bool {
			u, _ := upstreamState(st, "fake")
			return u.State == "ready"
		})
	}
	grandchild := func() int {
		t.Helper()
		pid := awaitPIDFile(t, pidfile, "the fake did not start its grandchild")
		if err := os.Remove(pidfile); err != nil {
			t.Fatal(err)
		}
		st := d.statusJSON(t)
		u, _ := upstreamState(st, "fake")
		if p, err := proc.ReadProcess(pid); err != nil || p.PGID == u.PID {
			t.Fatalf("the grandchild %d is in its server's group (%+v, %v): nothing to test", pid, p, err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		return pid
	}
	ready("the upstream ready")
	first := grandchild()
	if out, err := d.command("upstream", "stop", "fake").CombinedOutput(); err != nil {
		t.Fatalf("upstream stop fake: %v\n%s", err, out)
	}
	if !waitGone(first, answerWithin) {
		t.Errorf("the grandchild %d that called setsid outlives `snodod upstream stop`", first)
	}
	if out, err := d.command("upstream", "start", "fake").CombinedOutput(); err != nil {
		t.Fatalf("upstream start fake: %v\n%s", err, out)
	}
	ready("the upstream ready again")
	second := grandchild()
	if out, err := d.command("upstream", "restart", "fake").CombinedOutput(); err != nil {
		t.Fatalf("upstream restart fake: %v\n%s", err, out)
	}
	if !waitGone(second, answerWithin) {
		t.Errorf("the grandchild %d that called setsid outlives `snodod upstream restart`", second)
	}
	ready("the upstream restarted")
	third := grandchild()

	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	r := call(t, s, 1, "escape", `{}`)
	if isErr, why := failed(r); isErr {
		t.Fatalf("the exec tool: %s", why)
	}
	b, err := os.ReadFile(escapee)
	run, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || run <= 0 {
		t.Fatalf("the exec tool's run wrote no pid: %q %v", b, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(run, syscall.SIGKILL) })
	if !waitGone(run, answerWithin) {
		t.Errorf("`setsid sleep 300 &` in an exec tool outlives its run (pid %d)", run)
	}
	s.Close()
	d.stop(t)
	if !waitGone(third, answerWithin) {
		t.Errorf("the grandchild %d that called setsid outlives the daemon's stop", third)
	}
}

// TestExecOrphansAfterKill9: a daemon killed with SIGKILL during a long
// exec tool run leaves what the run started (its shell dies with the
// daemon, by the parent-death signal): a sleep in the run's group and one
// that called setsid. The next daemon on the same state ends both.
func TestExecOrphansAfterKill9(t *testing.T) {
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pidfile := filepath.Join(dir, "run.pid")
	d := startDaemonIn(t, dir, execToolConfig("long", pidfile, true)+"timeout = \"10m\"\n", nil)
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := s.send(callLine(1, "long", `{}`)); err != nil {
		t.Fatal(err)
	}
	escapee := awaitPIDFile(t, pidfile, "the run did not start its escapee")
	member := awaitPIDFile(t, pidfile+".group", "the run did not start its sleep")
	// The daemon records the run's group just after it starts it.
	if !eventually.Within(answerWithin, func() bool {
		records, _ := filepath.Glob(filepath.Join(dir, "state", "snodod", "upstreams", "groups-*.*"))
		for _, r := range records {
			if b, err := os.ReadFile(r); err == nil && len(strings.Split(strings.TrimSpace(string(b)), "\n")) == 4 {
				return true
			}
		}
		return false
	}) {
		t.Fatal("the daemon did not record the run's process group")
	}
	for _, pid := range []int{escapee, member} {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	d.signal(t, syscall.SIGKILL)
	d.waitExit(t, answerWithin)
	s.Close()
	time.Sleep(100 * time.Millisecond) // the parent-death signal is asynchronous
	for _, pid := range []int{escapee, member} {
		if !proctest.Alive(pid) {
			t.Fatalf("%d died with the daemon: nothing for the next one to end", pid)
		}
	}
	d2 := startDaemonIn(t, dir, "# no tools\n", nil)
	for what, pid := range map[string]int{"the run's sleep": member, "the run's process that called setsid": escapee} {
		if !waitGone(pid, answerWithin) {
			t.Errorf("%s (%d) still runs after the next daemon started", what, pid)
		}
	}
	if !eventually.Within(answerWithin, func() bool {
		log := d2.stderr.String()
		return strings.Contains(log, "killed a process group left by a previous daemon") &&
			strings.Contains(log, "killed processes that left their groups, left by a previous daemon")
	}) {
		t.Errorf("the next daemon did not say what it killed:\n%s", d2.stderr.String())
	}
	d2.stop(t)
}
