//go:build unix

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// takeStdout reserves standard output for protocol frames (docs/transport.md
// §3.4, case 74). It returns a new descriptor for what fd 1 was, and points
// fd 1 at standard error, so that anything else in the process that writes
// to standard output (a library's fmt.Println, a C library) lands on
// standard error instead of corrupting the stream. The caller calls restore
// and then closes out.
//
// Write deadlines need the runtime's poller, and the poller needs
// O_NONBLOCK. The mode belongs to the open file description, which other
// processes may share, so it is set only on pipes and sockets, whose other
// holders are the client, and restore clears it again. A terminal stays
// blocking: the shell shares it and would inherit the mode after exit. The
// transport then bounds a blocked write by waiting instead.
func takeStdout() (out *os.File, restore func(), err error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, nil, fmt.Errorf("duplicate standard output: %w", err)
	}
	unix.CloseOnExec(fd)
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("point standard output at standard error: %w", err)
	}
	restore = pollable(fd) // first: os.NewFile looks at the mode
	return os.NewFile(uintptr(fd), "standard output"), restore, nil
}

// pollable puts fd into O_NONBLOCK when it is a pipe or a socket and
// returns what restores its mode.
func pollable(fd int) (restore func()) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return func() {}
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK != 0 || unix.SetNonblock(fd, true) != nil {
		return func() {}
	}
	return func() { _ = unix.SetNonblock(fd, false) }
}
