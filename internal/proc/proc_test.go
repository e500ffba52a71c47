package proc_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// roleEnv makes the test binary play a helper process instead of running
// tests (see helperMain).
const roleEnv = "PROC_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(helperMain(role))
	}
	if err := proctest.Subreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "subreaper:", err)
		os.Exit(2)
	}
	goleak.VerifyTestMain(m)
}

// helperMain is a daemon stand-in: it starts "sleep" with Start, prints the
// child's pid, and then waits for stdin to end (the test kills it first).
// Role "thread-exit" starts it from a goroutine whose locked thread then
// exits, which would fire Pdeathsig had Start forked on that thread.
func helperMain(role string) int {
	if role == "reaper" {
		return reaperMain()
	}
	start := func() (*proc.Group, error) { return proc.Start(exec.Command("sleep", "1000")) }
	var g *proc.Group
	var err error
	switch role {
	case "start":
		g, err = start()
	case "kept":
		g, err = proc.StartKept(exec.Command("sleep", "1000"))
	case "thread-exit":
		done := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			g, err = start()
		}()
		<-done
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println(g.PID())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// shell starts sh -c script in a group, with its stdout readable line by
// line.
func shell(t *testing.T, script string) (*proc.Group, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	cmd.Stdout = w
	g, err := proc.Start(cmd)
	_ = w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return g, bufio.NewReader(r)
}

func readPID(t *testing.T, r *bufio.Reader) int {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read pid: %v (got %q)", err, line)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("read pid: %v", err)
	}
	return pid
}

func exitSignal(err error) syscall.Signal {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0
	}
	ws := ee.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		return 0
	}
	return ws.Signal()
}

func TestWaitStatus(t *testing.T) {
	proctest.Cleanup(t)
	tests := []struct {
		script string
		code   int // -1: killed by a signal
		sig    syscall.Signal
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"kill -KILL $$", -1, syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			g, err := proc.Start(exec.Command("sh", "-c", tt.script))
			if err != nil {
				t.Fatal(err)
			}
			err = g.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if code != tt.code || exitSignal(err) != tt.sig {
				t.Errorf("Wait = %v: code %d signal %v, want %d %v", err, code, exitSignal(err), tt.code, tt.sig)
			}
			if err2 := g.Wait(); err2 != err {
				t.Errorf("second Wait = %v, want the same %v", err2, err)
			}
			if err := g.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
				t.Errorf("Signal after exit = %v, want os.ErrProcessDone", err)
			}
			if proctest.Alive(g.PID()) || state(g.PID()) == 'Z' {
				t.Errorf("leader %d not reaped", g.PID())
			}
		})
	}
}

// state is the process state letter of pid, 0 when there is no such
// process.
func state(pid int) byte {
	p, err := proc.ReadProcess(pid)
	if err != nil {
		return 0
	}
	return p.State
}

func TestStartError(t *testing.T) {
	proctest.Cleanup(t)
	_, err := proc.Start(exec.Command("/nonexistent/snodod-test-binary"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Start = %v, want a not-exist error", err)
	}
}

func TestGroupAndStartTime(t *testing.T) {
	proctest.Cleanup(t)
	g, out := shell(t, "echo ready; exec sleep 1000")
	if _, err := out.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	p, err := proc.ReadProcess(g.PID())
	if err != nil {
		t.Fatal(err)
	}
	if p.PGID != g.PID() {
		t.Errorf("pgid = %d, want the leader's pid %d (own group)", p.PGID, g.PID())
	}
	if p.PGID == syscall.Getpgrp() {
		t.Errorf("child shares the test's process group")
	}
	if p.PPID != os.Getpid() {
		t.Errorf("ppid = %d, want the test's pid %d", p.PPID, os.Getpid())
	}
	if g.StartTime() == 0 || g.StartTime() != p.StartTime {
		t.Errorf("StartTime = %d, /proc says %d", g.StartTime(), p.StartTime)
	}
	if sig := exitSignal(g.Stop(time.Minute)); sig != syscall.SIGTERM {
		t.Errorf("Stop: killed by %v, want SIGTERM", sig)
	}
}

// A grandchild that ignores SIGTERM dies with its group once the leader
// has gone, whether the leader went on SIGTERM or needed SIGKILL.
func TestStopKillsGrandchildIgnoringTERM(t *testing.T) {
	const grandchild = `sh -c 'trap "" TERM; echo $$; exec sleep 1000' & wait`
	tests := []struct {
		name   string
		script string
		grace  time.Duration
		want   syscall.Signal // what ended the leader
	}{
		{"leader obeys TERM", grandchild, time.Minute, syscall.SIGTERM},
		{"leader ignores TERM", `trap "" TERM; ` + grandchild, 20 * time.Millisecond, syscall.SIGKILL},
		{"no grace", grandchild, 0, syscall.SIGKILL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proctest.Cleanup(t)
			g, out := shell(t, tt.script)
			gc := readPID(t, out)
			if !proctest.Alive(gc) {
				t.Fatalf("grandchild %d not running", gc)
			}
			if sig := exitSignal(g.Stop(tt.grace)); sig != tt.want {
				t.Errorf("leader ended by %v, want %v", sig, tt.want)
			}
			waitDead(t, gc)
		})
	}
}

// A grandchild left running when the leader exits on its own is killed too.
func TestLeaderExitKillsGroup(t *testing.T) {
	proctest.Cleanup(t)
	g, out := shell(t, `sleep 1000 & echo $!; exit 7`)
	gc := readPID(t, out)
	var ee *exec.ExitError
	if err := g.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("Wait = %v, want exit status 7", err)
	}
	waitDead(t, gc)
}

// waitDead waits until pid has exited (a zombie counts: proctest reaps it).
func waitDead(t *testing.T, pid int) {
	t.Helper()
	eventually.True(t, fmt.Sprintf("process %d to exit", pid), func() bool { return !proctest.Alive(pid) })
}

func TestStopConcurrent(t *testing.T) {
	proctest.Cleanup(t)
	g, _ := shell(t, "exec sleep 1000")
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() {
			if i == 0 {
				errs[i] = g.Wait()
				return
			}
			errs[i] = g.Stop(time.Duration(i) * time.Millisecond)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != errs[0] {
			t.Errorf("call %d = %v, want the same error as the others (%v)", i, err, errs[0])
		}
	}
	if exitSignal(errs[0]) == 0 {
		t.Errorf("Stop = %v, want killed by a signal", errs[0])
	}
}

// helper starts the test binary in role, returning it and its child's pid.
func helper(t *testing.T, role string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close() })
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, readPID(t, bufio.NewReader(out))
}

// The parent-death signal kills the child when its parent is killed with
// SIGKILL, and not before: the thread that called Start may exit (run
// forks on a thread of its own), only the parent's death counts.
func TestPdeathsig(t *testing.T) {
	for _, role := range []string{"start", "thread-exit"} {
		t.Run(role, func(t *testing.T) {
			proctest.Cleanup(t)
			parent, child := helper(t, role)
			if !proctest.Alive(child) {
				t.Fatalf("child %d died while its parent lives", child)
			}
			if err := parent.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = parent.Wait()
			waitDead(t, child)
		})
	}
}

// A descendant that called setsid (it left the group and its session) and
// ignores SIGTERM is stopped with its group, whether the leader obeys
// SIGTERM or needs SIGKILL (docs/architecture.md §6).
func TestStopKillsSetsidDescendant(t *testing.T) {
	const escapee = `setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' & wait`
	tests := []struct {
		name   string
		script string
		grace  time.Duration
	}{
		{"leader obeys TERM", escapee, time.Minute},
		{"leader ignores TERM", `trap "" TERM; ` + escapee, 20 * time.Millisecond},
		{"no grace", escapee, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proctest.Cleanup(t)
			g, out := shell(t, tt.script)
			gc := readPID(t, out)
			if p, err := proc.ReadProcess(gc); err != nil || p.PGID == g.PID() {
				t.Fatalf("the escapee %d is in the group (%+v, %v): nothing to test", gc, p, err)
			}
			_ = g.Stop(tt.grace)
			waitDead(t, gc)
		})
	}
}

// A process that left the group with setsid, and whose parent exited
// first, is reparented to the subreaper (the test, as the daemon): found
// by its marker, it is killed when the leader exits, or stopped with a
// leader that still runs (a double fork).
func TestOrphanLeftBehindIsKilled(t *testing.T) {
	t.Run("leader exits", func(t *testing.T) {
		proctest.Cleanup(t)
		// The leader exits once the orphan has left the group.
		f := filepath.Join(t.TempDir(), "pid")
		g, out := shell(t, `setsid sh -c 'echo $$ > `+f+`; exec sleep 1000' & while [ ! -s `+f+` ]; do sleep 0.01; done; cat `+f)
		orphan := readPID(t, out)
		if err := g.Wait(); err != nil {
			t.Fatalf("Wait = %v", err)
		}
		waitDead(t, orphan)
	})
	t.Run("double fork", func(t *testing.T) {
		proctest.Cleanup(t)
		g, out := shell(t, `(setsid sh -c 'trap "" TERM; echo $$; exec sleep 1000' &); exec sleep 1000`)
		orphan := readPID(t, out)
		eventually.True(t, "the orphan's reparenting", func() bool { p, _ := proc.ReadProcess(orphan); return p.PPID == os.Getpid() })
		if !proctest.Alive(orphan) {
			t.Fatal("the orphan died before the stop: nothing to test")
		}
		_ = g.Stop(20 * time.Millisecond)
		waitDead(t, orphan)
	})
}

// A process of another origin, reparented to the subreaper too, is never
// touched by a group's stop: it carries no marker of that group.
func TestStopSparesOthers(t *testing.T) {
	proctest.Cleanup(t)
	other := exec.Command("sh", "-c", `setsid sleep 1000 >/dev/null 2>&1 & echo $!`)
	b, err := other.Output()
	if err != nil {
		t.Fatal(err)
	}
	stranger, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(stranger, syscall.SIGKILL) })
	g, out := shell(t, `setsid sleep 1000 & echo $!; exec sleep 1000`)
	ours := readPID(t, out)
	_ = g.Stop(0)
	waitDead(t, ours)
	if !proctest.Alive(stranger) {
		t.Fatal("a stop killed a process of another origin")
	}
}

// Every child carries its group's marker, which its descendants inherit.
func TestMarkerInEnvironment(t *testing.T) {
	proctest.Cleanup(t)
	for _, env := range [][]string{nil, {"A=1", proc.MarkerEnv + "=forged"}} {
		cmd := exec.Command("sh", "-c", `echo "$`+proc.MarkerEnv+` $A"; sh -c 'echo $`+proc.MarkerEnv+`'`)
		cmd.Env = env
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = w
		g, err := proc.Start(cmd)
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		_ = g.Wait()
		wantA := ""
		if env != nil {
			wantA = "1"
		}
		if want := g.Marker() + " " + wantA + "\n" + g.Marker() + "\n"; string(b) != want || !strings.HasPrefix(g.Marker(), strconv.Itoa(os.Getpid())+".") {
			t.Errorf("env %q: the child and its own child see %q, want %q", env, b, want)
		}
	}
}

// reaperMain is a subreaper daemon stand-in (role "reaper"): while orphans
// are reparented to it and exit, the children it started itself keep
// their exit status for WaitCommand, among them one that exited long
// before it was waited for, and no zombie is left. It prints "ok" or what
// went wrong.
func reaperMain() int {
	fail := func(format string, args ...any) int {
		fmt.Printf(format+"\n", args...)
		return 1
	}
	if err := proc.Subreaper(); err != nil {
		return fail("%v", err)
	}
	if !proc.IsSubreaper() {
		return fail("not a subreaper after Subreaper")
	}
	code := func(err error) int {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err == nil {
			return 0
		}
		return -1
	}
	late := exec.Command("sh", "-c", "exit 7")
	if err := proc.StartCommand(late); err != nil {
		return fail("%v", err)
	}
	for i := range 100 {
		// The inner sh outlives the outer one: reparented here, it exits.
		orphaner := exec.Command("sh", "-c", "sh -c 'sleep 0.01' & exit 0")
		own := exec.Command("sh", "-c", "exit 3")
		if err := proc.StartCommand(orphaner); err != nil {
			return fail("%v", err)
		}
		if err := proc.StartCommand(own); err != nil {
			return fail("%v", err)
		}
		if err := proc.WaitCommand(orphaner); err != nil {
			return fail("round %d: the orphaner: %v", i, err)
		}
		if err := proc.WaitCommand(own); code(err) != 3 {
			return fail("round %d: a child's exit status was taken: %v", i, err)
		}
	}
	if err := proc.WaitCommand(late); code(err) != 7 {
		return fail("the child waited for last: %v, want exit status 7", err)
	}
	zombies := 0
	if !eventually.Within(eventually.Timeout, func() bool {
		zombies = 0
		for _, c := range proctest.Children() {
			if !proctest.Alive(c) {
				zombies++
			}
		}
		return zombies == 0 && len(proctest.Children()) == 0
	}) {
		return fail("%d children left, %d of them zombies", len(proctest.Children()), zombies)
	}
	fmt.Println("ok")
	return 0
}

// TestReaper: the orphans reparented to a subreaper are reaped, and its
// own children's exit statuses are never taken (reaperMain).
func TestReaper(t *testing.T) {
	proctest.Cleanup(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"=reaper")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "ok\n" {
		t.Fatalf("the subreaper: %v\n%s", err, out)
	}
}
