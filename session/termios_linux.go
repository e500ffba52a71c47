package session

import "golang.org/x/sys/unix"

// A terminal's settings as plain data, so that the settings a session
// found can be restored by another process (a daemon upgrade hands the
// device over; handover.go). x/term's State is opaque, hence these.

func getTermios(fd int) (*unix.Termios, error) { return unix.IoctlGetTermios(fd, unix.TCGETS) }

func setTermios(fd int, t *unix.Termios) error { return unix.IoctlSetTermios(fd, unix.TCSETS, t) }
