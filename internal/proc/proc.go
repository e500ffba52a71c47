// Package proc starts and stops child processes as whole trees, so that
// nothing a child spawns outlives it (docs/upstreams.md §4: npx, uvx and
// shell wrappers leave the real server as a grandchild; gpg-agent and
// language servers call setsid). It is used for hosted MCP servers
// (upstream/) and for exec tools (catalog/).
//
// Every child is the leader of a new process group (Setpgid), gets SIGKILL
// when the thread that started it exits (Pdeathsig), and carries its
// group's marker in its environment (MarkerEnv). Signals go to the group
// and to every descendant, those that left the group with setsid included
// (tree_linux.go), never to the leader alone. A daemon is a child
// subreaper (Subreaper), so that what a child leaves behind is
// reparented to it, to be found and reaped (reaper_linux.go); its groups
// are recorded (GroupRecord) for the next daemon to end after a crash
// (KillOrphans). The package never reads or writes the child's stdio: the
// caller wires exec.Cmd's Stdin, Stdout and Stderr.
//
// It is Linux-only (Pdeathsig, waitid WNOWAIT, /proc start times and
// children, pidfds).
package proc

import (
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Group is one started child and its process group. Its methods may be
// called from any goroutine.
type Group struct {
	cmd       *exec.Cmd
	pid       int
	startTime uint64 // field 22 of /proc/PID/stat, read while the child is ours
	marker    string // MarkerEnv's value in the tree

	// adopted is set for a group this process did not start (Adopt):
	// another process is the leader's parent and reaps it.
	adopted bool
	pidfd   int // an adopted leader's pidfd, until it has exited

	mu     sync.Mutex
	exited bool // the leader has exited: the group is signalled no more

	done chan struct{}
	err  error // the leader's wait status, set before done is closed
}

// Start starts cmd as the leader of its own process group (Setpgid) with
// the parent-death signal SIGKILL (Pdeathsig), returning the running group.
// The caller supplies cmd.Stdin, cmd.Stdout and cmd.Stderr as for exec.Cmd;
// cmd.SysProcAttr is replaced, except its namespace fields (Cloneflags, the
// id maps, AmbientCaps: internal/sandbox.Wrap sets them), and cmd.Env gets
// MarkerEnv (a nil Env is the daemon's environment, as for exec.Cmd, with
// it). Start reaps the leader itself (see Wait): the caller must not call
// cmd.Wait. Since exec.Cmd.Wait closes the pipes of
// cmd.StdoutPipe and friends as soon as the child exits, callers that read
// a child's output after its exit pass the write end of an os.Pipe instead
// (or an io.Writer, which Wait finishes copying).
//
// Pdeathsig caveat: Linux sends it when the *thread* that forked the child
// exits, not the process (golang/go#27505). Start therefore forks from a
// goroutine locked to its OS thread until the leader is reaped, so the Go
// runtime never retires that thread while the child runs (one thread per
// running child, blocked in waitid). A daemon killed with SIGKILL thus kills
// its direct children; their own children are not covered by Pdeathsig,
// which is why the daemon records groups (KillOrphans).
func Start(cmd *exec.Cmd) (*Group, error) {
	return start(cmd, true)
}

// StartKept is Start without the parent-death signal: the child outlives
// this process, so that an upgrade can hand it over to the daemon that
// follows (Adopt). A daemon killed with SIGKILL leaves it running, with
// the end of its stdin (the daemon held the only write end) as the hint
// to exit; the next daemon ends it from the record (KillOrphans), as it
// ends what the leader started.
func StartKept(cmd *exec.Cmd) (*Group, error) {
	return start(cmd, false)
}

func start(cmd *exec.Cmd, pdeathsig bool) (*Group, error) {
	cmd.SysProcAttr = sysProcAttr(cmd.SysProcAttr)
	if !pdeathsig {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	g := &Group{cmd: cmd, marker: newMarker(), done: make(chan struct{})}
	cmd.Env = withMarker(cmd.Env, g.marker)
	started := make(chan error, 1)
	go g.run(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return g, nil
}

// run starts the child and reaps it, on one locked thread (see Start).
func (g *Group) run(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := StartCommand(g.cmd); err != nil {
		started <- err
		return
	}
	g.pid = g.cmd.Process.Pid
	g.startTime, _ = StartTime(g.pid)
	started <- nil

	// Wait for the leader's exit without reaping it: while it is a zombie
	// its pid, and so the group id, cannot be reused, so what is left of
	// the group can be killed without hitting a stranger. Its children
	// were reparented when it exited; those that left the group are found
	// by their marker (killTree).
	waitExited(g.pid)
	g.mu.Lock()
	_ = syscall.Kill(-g.pid, syscall.SIGKILL)
	g.exited = true
	g.mu.Unlock()
	g.killTree()
	g.err = WaitCommand(g.cmd)
	close(g.done)
}

// PID is the leader's process id, which is also the group id.
func (g *Group) PID() int { return g.pid }

// StartTime is the leader's start time in clock ticks since boot (field 22
// of /proc/PID/stat), 0 where /proc is unavailable. With the pid it names
// the process across a pid's reuse (orphan matching).
func (g *Group) StartTime() uint64 { return g.startTime }

// Marker is MarkerEnv's value in the group's tree.
func (g *Group) Marker() string { return g.marker }

// Signal sends sig to the whole group (kill(-pgid)) and to every process of
// its tree outside it (the leader's descendants that called setsid, and
// the orphans that carry its marker: tree_linux.go). Once the leader has
// exited it returns os.ErrProcessDone and signals nothing, so a recycled
// pgid is never hit (what is left of the tree is killed then: Wait).
func (g *Group) Signal(sig syscall.Signal) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exited {
		return os.ErrProcessDone
	}
	err := syscall.Kill(-g.pid, sig)
	g.signalTree(sig)
	return err
}

// Stop ends the group: SIGTERM to the group and its tree (Signal), then
// SIGKILL to them after grace (at once when grace <= 0), then waits for the
// leader and returns its wait status as Wait does. What outlives the
// leader gets SIGKILL as soon as it exits (see Wait). Stop is safe to call
// more than once and concurrently with Wait; every call returns the same
// result.
func (g *Group) Stop(grace time.Duration) error {
	if grace > 0 {
		_ = g.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		select {
		case <-g.done:
			t.Stop()
			return g.err
		case <-t.C:
		}
	}
	_ = g.Signal(syscall.SIGKILL)
	<-g.done
	return g.err
}

// Wait waits for the leader to exit and returns its status with
// exec.Cmd.Wait's semantics (an *exec.ExitError for a non-zero status or a
// signal; with non-*os.File stdio it also waits for the copying, bounded by
// cmd.WaitDelay). The leader is reaped once, by the Group; every call
// returns the same result. When the leader exits, the rest of its group and
// of its tree is killed (SIGKILL) before the leader is reaped, so nothing
// it started outlives it and nothing keeps the child's pipes open.
func (g *Group) Wait() error {
	<-g.done
	return g.err
}

// Done is closed once the leader has been reaped.
func (g *Group) Done() <-chan struct{} { return g.done }
