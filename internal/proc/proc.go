// Package proc starts and stops child processes as whole process groups, so
// that nothing a child spawns outlives it (upstreams.md §4: npx, uvx and
// shell wrappers leave the real server as a grandchild). It is used for
// hosted MCP servers (upstream/) and for exec tools (catalog/).
//
// Every child is the leader of a new process group (Setpgid) and gets
// SIGKILL when the thread that started it exits (Pdeathsig). Signals go to
// the group, never to the leader alone. The package never reads or writes
// the child's stdio: the caller wires exec.Cmd's Stdin, Stdout and Stderr.
//
// It is Linux-only in what it promises (Pdeathsig, /proc start times);
// elsewhere Start still makes a process group.
package proc

import (
	"os/exec"
	"syscall"
	"time"
)

// Group is one started child and its process group. Its methods may be
// called from any goroutine.
type Group struct {
	cmd *exec.Cmd
	pid int
	// startTime is field 22 of /proc/PID/stat, read right after the start.
	startTime uint64
}

// Start starts cmd as the leader of its own process group (Setpgid) with
// the parent-death signal SIGKILL (Pdeathsig), returning the running group.
// The caller supplies cmd.Stdin, cmd.Stdout and cmd.Stderr as for exec.Cmd;
// cmd.SysProcAttr is replaced.
//
// Pdeathsig caveat: Linux sends it when the *thread* that forked the child
// exits, not the process (golang/go#27505). Start therefore forks from a
// goroutine locked to its OS thread for the whole life of the child's wait,
// so the Go runtime never retires that thread while the child runs. A
// daemon killed with SIGKILL still kills its children; a daemon that exits
// normally stops them first anyway.
func Start(cmd *exec.Cmd) (*Group, error) { panic("not yet") }

// PID is the leader's process id, which is also the group id.
func (g *Group) PID() int { return g.pid }

// StartTime is the leader's start time in clock ticks since boot (field 22
// of /proc/PID/stat), 0 where /proc is unavailable. With the pid it names
// the process across a pid's reuse (orphan matching).
func (g *Group) StartTime() uint64 { return g.startTime }

// Signal sends sig to the whole group (kill(-pgid)). Once the leader has
// been reaped it returns os.ErrProcessDone and signals nothing, so a
// recycled pgid is never hit.
func (g *Group) Signal(sig syscall.Signal) error { panic("not yet") }

// Stop ends the group: SIGTERM to the group, then SIGKILL to the group after
// grace (at once when grace <= 0), then waits for the leader and returns its
// wait status as Wait does. Members of the group that outlive the leader
// get the SIGKILL too. Stop is safe to call more than once and concurrently
// with Wait; every call returns the same result.
func (g *Group) Stop(grace time.Duration) error { panic("not yet") }

// Wait waits for the leader to exit and returns its status with
// exec.Cmd.Wait's semantics (an *exec.ExitError for a non-zero status or a
// signal, including the copy of stdio when the caller gave non-*os.File
// writers). The leader is reaped once; every call returns the same result.
// After the leader is reaped, the rest of its group is killed (SIGKILL), so
// no member outlives the leader.
func (g *Group) Wait() error { panic("not yet") }

// Done is closed once the leader has been reaped.
func (g *Group) Done() <-chan struct{} { panic("not yet") }
