//go:build !linux

package session

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Handing a terminal over to another process is done on Linux only: the
// settings it found cannot be carried elsewhere (see termios_linux.go).

var errNoTermios = errors.New("session: terminal settings cannot be carried on this system")

func getTermios(int) (*unix.Termios, error) { return nil, errNoTermios }

func setTermios(int, *unix.Termios) error { return errNoTermios }
