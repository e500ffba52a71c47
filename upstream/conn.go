// This file and the other upstream/conn*.go, process*.go, stderr*.go,
// orphans*.go and probe*.go files are the layer that runs ONE hosted MCP
// server as a child process and speaks MCP to it as a client (the Conn).
// Everything above it (supervision, sharing, the catalog cache, views,
// routing between sessions, configuration) lives in the package's other
// files. The API is the one of the upstream-conn-api contract; deviations
// from it are listed here.
//
// Deviations and additions (none removes or changes the contract's meaning):
//   - ConnConfig.Record (added): the Conn records its process group in a
//     GroupRecord itself, from the spawn to the reap.
//   - Conn.Group (added): the child's *proc.Group, for status.
//   - ConnConfig.Stderr may be nil (a private ring).
//   - Handler.Request's ctx also ends when the upstream cancels that request.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Command is how to start one instance, fully resolved by the caller.
type Command struct {
	Path string   // the program, resolved against the child's PATH
	Args []string // argv[1:]
	Env  []string // the child's whole environment, KEY=VALUE; never logged
	Dir  string   // working directory
}

// ConnConfig configures one instance. Zero values mean the documented
// defaults.
type ConnConfig struct {
	// Name is the upstream's configured name: logs (upstream=NAME) and
	// errors.
	Name string
	// Protocol is "" or "auto" (probe), "2025-06-18", "2025-11-25" or
	// "2026-07-28" (upstreams.md §6).
	Protocol string
	// KnownEra skips the probe when the catalog cache knows the era for
	// this fingerprint: "" (probe), EraLegacy or Era2026.
	KnownEra string
	// MaxLineBytes is the bounded reader's limit, newline included; 0 means
	// stdio.DefaultMaxLineBytes.
	MaxLineBytes int
	// ClientInfo is snodod's clientInfo in a legacy initialize and the
	// default io.modelcontextprotocol/clientInfo of 2026 requests.
	ClientInfo server.Implementation
	// ClientCapabilities is declared in a legacy initialize (roots only
	// when snodod can answer roots/list; sampling and elicitation only
	// when it can relay them: upstreams.md §5). nil declares {}.
	ClientCapabilities json.RawMessage
	// Stderr receives the child's stderr from its first byte; nil keeps a
	// private ring of the default size outside any budget.
	Stderr *StderrRing
	// Logger gets the Conn's logs and the child's stderr lines, with
	// upstream=NAME; nil means slog.Default().
	Logger *slog.Logger
	// Handler gets what the upstream sends on its own; nil drops
	// notifications and answers requests -32601.
	Handler Handler
	// Record, when non-nil, gets the child's process group right after the
	// spawn and loses it once the child is reaped, so that a daemon killed
	// mid-start leaves nothing its successor's KillOrphans misses.
	Record *GroupRecord
}

// The upstream's era, as Conn.Era reports it and ConnConfig.KnownEra takes.
const (
	EraLegacy = "legacy"
	Era2026   = "2026"
)

// Handler receives what an upstream sends on its own.
type Handler interface {
	// Notify gets every notification except notifications/progress and
	// notifications/cancelled about requests snodod sent (the Conn routes
	// those). Called in arrival order on the Conn's reading goroutine; it
	// must not block.
	Notify(method string, params json.RawMessage)
	// Request serves a request from the upstream (ping is answered {} by
	// the Conn itself). owners are the CallOptions.Owner values of the calls
	// in flight on this Conn when it arrived (distinct, oldest first). It
	// runs on its own goroutine; ctx ends when the Conn ends or when the
	// upstream cancels the request. The result or error is sent back to the
	// upstream.
	Request(ctx context.Context, method string, params json.RawMessage, owners []any) (json.RawMessage, *protocol.Error)
}

// Errors of Call.
var (
	// ErrClosed: the Conn was stopping or stopped before the request was
	// sent; nothing reached the upstream.
	ErrClosed = errors.New("upstream connection closed")
	// ErrResponseTooLong: the upstream's answer exceeded MaxLineBytes; the
	// line was dropped.
	ErrResponseTooLong = errors.New("upstream response exceeds the line limit")
)

// Conn is one running instance: a child process spoken to as an MCP client
// over its stdin and stdout. Its methods may be called from any goroutine.
// It owns the process: nothing else signals or waits for it.
type Conn struct{}

// Start spawns cmd (proc.Start: own group, parent-death signal), drains its
// stderr from the first byte into cfg.Stderr and the log, probes the era
// (upstreams.md §6: cached era, else server/discover with 2026 _meta, up to
// 10 s while draining stderr; else initialize 2025-11-25 accepting what the
// server negotiates), and performs the handshake (legacy: initialize, then
// notifications/initialized). ctx bounds the whole start (start_timeout).
// On error nothing is left running, and the error says what happened: an
// *ExitError when the child exited (with its stderr tail), else what the
// upstream sent or that it said nothing in time.
func Start(ctx context.Context, cmd Command, cfg ConnConfig) (*Conn, error) {
	panic("not yet")
}

// PID is the child's process id (and process group id).
func (c *Conn) PID() int { panic("not yet") }

// Group is the child's process group. Only the Conn stops it or waits for
// it; callers may read its identity (PID, StartTime).
func (c *Conn) Group() *proc.Group { panic("not yet") }

// Era is EraLegacy or Era2026.
func (c *Conn) Era() string { panic("not yet") }

// Version is the negotiated legacy version, or the 2026 version used.
func (c *Conn) Version() string { panic("not yet") }

// ServerInfo is serverInfo as the upstream sent it.
func (c *Conn) ServerInfo() json.RawMessage { panic("not yet") }

// Capabilities is the upstream's capabilities object.
func (c *Conn) Capabilities() json.RawMessage { panic("not yet") }

// Instructions are the upstream's instructions, "" when it sent none.
func (c *Conn) Instructions() string { panic("not yet") }

// CallOptions are one call's routing data.
type CallOptions struct {
	// Owner is who the call is for (a session); Handler.Request sees the
	// owners in flight.
	Owner any
	// Progress, when non-nil, makes the Conn put a progressToken unique on
	// this Conn into params._meta (replacing the client's), and call
	// Progress with each notifications/progress params the upstream sends
	// for it (the token member removed; progress, total, message kept), in
	// order, only while the call is in flight, only when progress
	// increases. It is called on the Conn's reading goroutine and must not
	// block.
	Progress func(params json.RawMessage)
	// ClientCapabilities (2026 upstream only) is stamped into _meta as
	// io.modelcontextprotocol/clientCapabilities: the client's own declared
	// capabilities, never more. ClientInfo likewise, when non-nil.
	ClientCapabilities json.RawMessage
	ClientInfo         json.RawMessage
}

// Call sends one request with an id from this Conn's own space (integers
// from 1, never reused while the process lives) and waits for its answer.
// params is the params object as the client sent it (nil for none): the
// client's progressToken and per-hop reserved _meta keys
// (io.modelcontextprotocol/*) are removed and this hop's are stamped for the
// upstream's era; other _meta keys (and traceparent/tracestate/baggage) pass
// through. If ctx ends first, notifications/cancelled {requestId} is sent, a
// late answer is dropped, and ctx's error is returned.
//
// Errors: *protocol.Error (the upstream's error response, code/message/data
// as sent), *ExitError (the process exited or its stdout ended while the
// call was in flight), ErrClosed (the Conn was stopping or stopped before
// the request was sent), ErrResponseTooLong (the answer exceeded
// MaxLineBytes; the line is dropped). Call may be called from many
// goroutines at once.
func (c *Conn) Call(ctx context.Context, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	panic("not yet")
}

// List fetches every page of tools/list, resources/list,
// resources/templates/list or prompts/list (following nextCursor; a cursor
// repeated or more than 1,000 pages is an error) and returns the items of
// all pages in order, each as sent.
func (c *Conn) List(ctx context.Context, method string) ([]json.RawMessage, error) {
	panic("not yet")
}

// Notify sends a notification to the upstream. params is marshalled with
// encoding/json (nil for none).
func (c *Conn) Notify(method string, params any) error { panic("not yet") }

// Ping sends ping; any answer, even an error response, is alive. It fails
// only when ctx ends or the Conn ends.
func (c *Conn) Ping(ctx context.Context) error { panic("not yet") }

// InFlight is the number of calls waiting for their answer.
func (c *Conn) InFlight() int { panic("not yet") }

// Stop ends the instance gracefully (upstreams.md §4): close stdin, wait up
// to 5 s, SIGTERM to the group, 5 s, SIGKILL to the group, reap. In-flight
// calls get an *ExitError. A ctx that ends early skips to SIGKILL. Safe to
// call more than once and concurrently; every call returns once the
// instance has ended.
func (c *Conn) Stop(ctx context.Context) { panic("not yet") }

// Done is closed once the leader is reaped and stdout is drained.
func (c *Conn) Done() <-chan struct{} { panic("not yet") }

// Exit says why the instance ended; valid after Done (nil before).
func (c *Conn) Exit() *ExitError { panic("not yet") }
