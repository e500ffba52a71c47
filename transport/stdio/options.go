package stdio

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/snodod/snodod/server"
)

// Defaults of the transport's limits (transport.md §15).
const (
	DefaultMaxLineBytes     = 2_000_000
	DefaultWriteTimeout     = 5 * time.Second
	DefaultMaxSubscriptions = 32
	DefaultShutdownGrace    = 10 * time.Second
)

// Transport serves one connection: newline-delimited JSON-RPC over In and
// Out. Limits follow the net/http.Server convention: zero means the default,
// negative is refused by Serve before any byte is read.
//
// The transport never closes In or Out; their owner does, after Serve
// returns. A Transport serves once.
type Transport struct {
	// In and Out are the device. When they have SetReadDeadline and
	// SetWriteDeadline (an *os.File on a pipe, a socket), deadlines bound
	// writes and stop a blocked read when Serve returns. Otherwise a blocked
	// write is abandoned after WriteTimeout, and a goroutine blocked in Read
	// outlives Serve until that Read returns (what it read is dropped).
	In  io.Reader
	Out io.Writer

	// Dispatcher serves requests; it is shared by every connection.
	Dispatcher server.Dispatcher
	// Executor runs requests; it is shared by every connection of a process.
	// When nil, Serve makes a private one with the default limits and closes
	// it on return.
	Executor *server.Executor

	// MaxLineBytes bounds one input line, its newline included.
	MaxLineBytes int
	// WriteTimeout bounds the writing of one frame. A frame that misses it
	// ends the connection.
	WriteTimeout time.Duration
	// MaxSubscriptions caps this connection's open listen streams and
	// legacy resource subscriptions together, when Serve makes the
	// State.
	MaxSubscriptions int
	// State is the connection's runtime state. When nil, Serve makes one
	// and closes it on return; a State given here outlives Serve (a
	// restarted session continues with it) and its owner closes it.
	State *server.SessionState
	// ShutdownGrace is how long admitted requests may still run once ctx
	// is cancelled.
	ShutdownGrace time.Duration

	// Reader is the device's input side when it must outlive this
	// Transport (a session that is restarted on the same device). When
	// nil, Serve reads In itself with MaxLineBytes and stops on return.
	Reader *Reader
	// Counters, when set, show this connection's load (requests in flight)
	// to other goroutines while Serve runs.
	Counters *Counters

	// Logger receives the connection's diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports every invalid limit at once, each with the exact message
// of transport.md §15.
func (t *Transport) Validate() error {
	var errs []error
	if t.MaxLineBytes < 0 {
		errs = append(errs, errors.New("max_line_bytes must be a positive integer"))
	}
	if t.WriteTimeout < 0 {
		errs = append(errs, errors.New("write_timeout must be a positive duration"))
	}
	if t.MaxSubscriptions < 0 {
		errs = append(errs, errors.New("max_subscriptions must be a positive integer"))
	}
	if t.ShutdownGrace < 0 {
		errs = append(errs, errors.New("shutdown_grace must be a positive duration"))
	}
	if t.In == nil && t.Reader == nil || t.Out == nil {
		errs = append(errs, errors.New("stdio transport needs both In and Out"))
	}
	if t.Dispatcher == nil {
		errs = append(errs, errors.New("stdio transport needs a Dispatcher"))
	}
	return errors.Join(errs...)
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
