package stdio

import "github.com/snodod/snodod/internal/framing"

// The device writer (framing.Writer) is shared with the MCP client, which
// writes a hosted server's stdin with it.

// ErrWriteTimeout is the cause of an output failure when a frame was not
// accepted by the device within WriteTimeout.
var ErrWriteTimeout = framing.ErrWriteTimeout

// OutputError is the terminal failure of the write path (docs/transport.md §11.4).
// Serve returns it; errors.Is matches its cause (ErrWriteTimeout, or the
// device's error such as syscall.EPIPE or syscall.ENOSPC).
type OutputError struct{ Err error }

func (e *OutputError) Error() string { return "output failed: " + e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }
