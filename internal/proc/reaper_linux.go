package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The daemon is a child subreaper (PR_SET_CHILD_SUBREAPER, Subreaper): a
// process a child starts that loses its parent (a double fork, a parent
// that ran `setsid cmd &` and exited, a parent killed) is reparented to the
// daemon instead of to init, so that the stop of its group finds it
// (tree_linux.go), and its exit status is the daemon's to collect.
//
// Collecting it must not steal an exit status that os/exec waits for:
// wait4(-1) or waitid(P_ALL) would reap whichever child exited first, and
// exec.Cmd.Wait would then fail with ECHILD. So the reaper lists the
// process's exited children and reaps them one pid at a time, only those
// this process did not fork itself. Every fork of the process goes
// through StartCommand (Start uses it), which forks under forkMu's read
// lock and registers the pid before releasing it; the reaper holds the
// write lock while it looks, so a child forked and not yet registered is
// never taken for an orphan. A registered child stays registered until
// WaitCommand has reaped it; a pid is counted, so that one reused by a
// new child before the old one's registration ended stays registered.
var (
	forkMu   sync.RWMutex
	forkedMu sync.Mutex
	forked   = map[int]int{}
)

func register(pid int) {
	forkedMu.Lock()
	forked[pid]++
	forkedMu.Unlock()
}

func unregister(pid int) {
	forkedMu.Lock()
	if forked[pid]--; forked[pid] <= 0 {
		delete(forked, pid)
	}
	forkedMu.Unlock()
}

func registered(pid int) bool {
	forkedMu.Lock()
	defer forkedMu.Unlock()
	return forked[pid] > 0
}

// StartCommand starts cmd as cmd.Start does, as a child the orphan reaper
// never reaps: WaitCommand (cmd.Wait) stays its reaper. Every child a
// subreaper process starts must be started by it or by Start (the daemon's
// are: hosted servers, exec tools, an upgrade's new process).
func StartCommand(cmd *exec.Cmd) error {
	forkMu.RLock()
	defer forkMu.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	register(cmd.Process.Pid)
	return nil
}

// WaitCommand waits for cmd, started by StartCommand, as cmd.Wait does.
func WaitCommand(cmd *exec.Cmd) error {
	err := cmd.Wait()
	unregister(cmd.Process.Pid)
	return err
}

// Subreaper makes this process a child subreaper and reaps, from then on,
// each orphan reparented to it once it exits (on SIGCHLD), without ever
// taking the exit status of a child started by StartCommand or Start. A
// daemon calls it once at start, before it starts any process; the
// reaper's goroutine runs for the life of the process.
func Subreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become a child subreaper: %w", err)
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	go func() {
		for range sigchld {
			ReapOrphans()
		}
	}()
	ReapOrphans() // what exited before the signal was caught
	return nil
}

// IsSubreaper reports whether this process is a child subreaper.
func IsSubreaper() bool {
	var v int32
	err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0)
	return err == nil && v != 0
}

// ReapOrphans reaps the exited children of this process that it did not
// start (see StartCommand), and returns how many it reaped.
func ReapOrphans() int {
	forkMu.Lock()
	defer forkMu.Unlock()
	n := 0
	for _, pid := range ownChildren() {
		if registered(pid) {
			continue
		}
		if p, err := ReadProcess(pid); err != nil || !p.Exited() {
			continue
		}
		var ws syscall.WaitStatus
		for {
			got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if got == pid {
				n++
			}
			break
		}
	}
	return n
}

// ownChildren lists this process's children, alive or exited.
func ownChildren() []int {
	return childrenOf(os.Getpid())
}

// childrenOf lists the children of pid from /proc/PID/task/*/children (a
// child belongs to the thread that forked it, or, once reparented to a
// subreaper, to one of its threads); where the kernel has no such files
// (CONFIG_PROC_CHILDREN), from every process's parent.
func childrenOf(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil // gone
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/children")
		if errors.Is(err, os.ErrNotExist) {
			if _, serr := os.Stat(dir + "/" + task.Name()); serr == nil {
				return childrenByScan(pid) // the kernel does not list children
			}
			continue // the thread ended
		}
		for f := range strings.FieldsSeq(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// childrenByScan lists pid's children by reading every process's parent.
func childrenByScan(pid int) []int {
	all, _ := Processes()
	var out []int
	for _, p := range all {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}
