package mcpclient

import (
	"errors"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/snodod/snodod/internal/sandbox"
)

// ExitError is how a stream ended, the error the calls in flight get: for
// a Command, how its process ended; for a remote server (HTTP), Code -1
// and Err saying why the connection ended (it could not reach the server,
// or it was closed).
type ExitError struct {
	Code   int            // exit status, -1 when killed by a signal or not started
	Signal syscall.Signal // the signal that killed it, 0 otherwise
	Err    error          // a start or I/O failure, when that is what ended it
	Stderr string         // the last 2 KiB of its stderr
}

// Error says how it ended: "exited with status 1", "killed by signal 9
// (killed)", or the start failure. It does not quote Stderr: callers place
// the tail where their message needs it.
func (e *ExitError) Error() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.Signal != 0:
		return "killed by signal " + strconv.Itoa(int(e.Signal)) + " (" + e.Signal.String() + ")"
	default:
		return "exited with status " + strconv.Itoa(e.Code)
	}
}

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// exitError describes a reaped leader from its wait error.
func exitError(waitErr error, stderr string) *ExitError {
	e := &ExitError{Stderr: stderr}
	var ee *exec.ExitError
	var se *sandbox.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &se): // the server's own, from its sandbox's init
		if se.Signal != 0 {
			e.Code, e.Signal = -1, se.Signal
		} else {
			e.Code = se.Code
		}
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			e.Code, e.Signal = -1, ws.Signal()
		} else {
			e.Code = ee.ExitCode()
		}
	default:
		e.Code, e.Err = -1, waitErr
	}
	return e
}
