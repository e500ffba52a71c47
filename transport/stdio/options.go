package stdio

import (
	"errors"
	"io"
	"log/slog"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// Transport serves one connection: newline-delimited JSON-RPC over In and
// Out. Its Limits follow the net/http.Server convention: zero means the
// default (package limits has them), negative is refused by Serve before any
// byte is read.
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
	// When nil, Serve makes a private one with the executor's Limits
	// (MaxConcurrency, MaxQueue, RequestTimeout) and closes it on return.
	Executor *executor.Executor

	// Limits are the connection's limits. The transport reads
	// MaxLineBytes (one input line, its newline included), WriteTimeout
	// (one frame's write; a frame that misses it ends the connection),
	// MaxSubscriptions (open listen streams and legacy resource
	// subscriptions together, when Serve makes the State), ShutdownGrace
	// (how long admitted requests may still run once ctx is cancelled),
	// UpgradeGrace (the same for a hand-over: handoff.go), and the
	// executor's limits when Executor is nil; the others are the daemon's.
	Limits limits.Limits
	// State is the connection's runtime state. When nil, Serve makes one
	// and closes it on return; a State given here outlives Serve (a
	// restarted session continues with it) and its owner closes it.
	State *server.SessionState

	// Reader is the device's input side when it must outlive this
	// Transport (a session that is restarted on the same device). When
	// nil, Serve reads In itself with MaxLineBytes and stops on return.
	Reader *Reader
	// Counters, when set, show this connection's load (requests in flight)
	// to other goroutines while Serve runs.
	Counters *Counters
	// Resume, when set, continues a connection another process served
	// (resume.go); a restarted instance is given none.
	Resume *Resume
	// Journal, when set, is told of the requests in flight and the listen
	// streams open (journal.go).
	Journal Journal

	// Logger receives the connection's diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports every invalid limit at once, each with the exact message
// of docs/transport.md §15, and a missing device or Dispatcher.
func (t *Transport) Validate() error {
	errs := []error{t.Limits.Validate()}
	if t.In == nil && t.Reader == nil || t.Out == nil {
		errs = append(errs, errors.New("stdio transport needs both In and Out"))
	}
	if t.Dispatcher == nil {
		errs = append(errs, errors.New("stdio transport needs a Dispatcher"))
	}
	return errors.Join(errs...)
}
