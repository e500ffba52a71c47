package proc

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotChild is the wait status of an adopted group (Adopt): its leader
// is not this process's child, so its exit status is its parent's to
// collect, not this process's.
var ErrNotChild = errors.New("exit status unknown: the process was handed over by the daemon an upgrade replaced, and is not this daemon's child")

// Adopt takes over the group of pid, started (StartKept) by the daemon an
// upgrade replaced, with the leader's start time and marker as that
// daemon's Group had them. The leader is not this process's child: it is
// watched through a pidfd (pidfd_open works on any process; it becomes
// readable when the process exits), never reaped (its parent, or once
// that daemon has exited the subreaper or init it was reparented to,
// reaps it), and Wait returns ErrNotChild. The pidfd is opened before the
// start time is checked, so a pid reused meanwhile is refused, never
// watched or signalled.
//
// Signal and Stop work as for a started group while the leader runs (the
// leader, alive, holds the group id; the moment between its exit and the
// check is not covered by a zombie of this process's, as a started
// group's is); once it has exited, what is left of its tree is killed by
// its marker, wherever it was reparented, never by the group id.
func Adopt(pid int, startTime uint64, marker string) (*Group, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("adopt process %d: %w", pid, err)
	}
	p, err := ReadProcess(pid)
	switch {
	case err != nil, p.StartTime != startTime, p.Exited():
		unix.Close(fd)
		return nil, fmt.Errorf("adopt process %d: it has exited", pid)
	case p.PGID != pid:
		unix.Close(fd)
		return nil, fmt.Errorf("adopt process %d: not the leader of its process group (%d)", pid, p.PGID)
	}
	g := &Group{pid: pid, startTime: startTime, marker: marker, adopted: true, pidfd: fd, done: make(chan struct{})}
	go g.watch()
	return g, nil
}

// watch waits for an adopted leader's exit, then ends what is left of its
// tree.
func (g *Group) watch() {
	fds := []unix.PollFd{{Fd: int32(g.pidfd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, -1)
		if errors.Is(err, syscall.EINTR) || (err == nil && n == 0) {
			continue
		}
		break // readable (exited), or a pidfd poll cannot fail otherwise
	}
	g.mu.Lock()
	g.exited = true
	unix.Close(g.pidfd)
	g.pidfd = -1
	g.mu.Unlock()
	g.killTree()
	g.err = ErrNotChild
	close(g.done)
}

// CanAdopt reports whether this kernel lets Adopt watch a process that is
// not this one's child (pidfd_open, Linux 5.3).
func CanAdopt() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}
