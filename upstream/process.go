package upstream

import "syscall"

// ExitError is how an instance ended.
type ExitError struct {
	Code   int            // exit status, -1 when killed by a signal or not started
	Signal syscall.Signal // the signal that killed it, 0 otherwise
	Err    error          // a start or I/O failure, when that is what ended it
	Stderr string         // the last 2 KiB of its stderr
}

// Error says how it ended: "exited with status 1", "killed by signal 9
// (killed)", "start: exec: ...: not found".
func (e *ExitError) Error() string { panic("not yet") }

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }
