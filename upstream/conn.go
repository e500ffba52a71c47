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
//     GroupRecord itself, from the spawn to the reap, so a daemon killed
//     mid-start leaves nothing KillOrphans misses.
//   - ConnConfig.ProbeTimeout and StopGrace (added): the probe's 10 s and
//     each of Stop's 5 s waits, zero meaning those defaults; for config keys
//     and tests.
//   - CallOptions.LogLevel (added): stamped as io.modelcontextprotocol/logLevel
//     for a 2026 upstream.
//   - Conn.Group and Conn.Stats (added): the process group (for status) and
//     the Conn's counters (dropped stdout lines, late answers, …).
//   - ConnConfig.Spawned (added): the pid of a start under way, for status.
//   - StderrRing.Close, StderrBudget.Used, GroupRecord.Close (added).
//   - Command.Env nil means an empty environment, never the daemon's.
//   - ConnConfig.Stderr may be nil (a private ring outside any budget).
//   - Handler.Request's ctx also ends when the upstream cancels that request
//     (and its answer is then not sent).
//   - "Per-hop reserved _meta keys" are the six of research §4.4
//     (protocolVersion, clientCapabilities, clientInfo, logLevel, serverInfo,
//     subscriptionId under io.modelcontextprotocol/) and progressToken; other
//     reserved keys (io.modelcontextprotocol/related-task) pass through.
//   - Done also waits for every Handler.Request to return.
//   - Notify fails with ErrClosed once the Conn is stopping.
//
// Tests: the package's only TestMain is in conn_main_test.go (it builds
// internal/fakeupstream once into fakePath, makes the test a child
// subreaper, and runs goleak); startFake and proctest.Cleanup are there for
// every test of the package.

package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/tailbuf"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
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
	// "2026-07-28" (docs/upstreams.md §6).
	Protocol string
	// KnownEra skips the probe when the catalog cache knows the era for
	// this fingerprint: "" (probe), EraLegacy or Era2026.
	KnownEra string
	// MaxLineBytes is the bounded reader's limit, newline included; 0 means
	// limits.DefaultMaxLineBytes.
	MaxLineBytes int
	// ClientInfo is snodod's clientInfo in a legacy initialize and the
	// default io.modelcontextprotocol/clientInfo of 2026 requests.
	ClientInfo protocol.Implementation
	// ClientCapabilities is declared in a legacy initialize (roots only
	// when snodod can answer roots/list; sampling and elicitation only
	// when it can relay them: docs/upstreams.md §5). nil declares {}.
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
	// ProbeTimeout bounds the wait for an answer to the server/discover
	// probe (docs/upstreams.md §6); 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// StopGrace is each wait of Stop: after closing stdin and after
	// SIGTERM; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Spawned, when set, is called once with the child's pid right after
	// the spawn, before the handshake: a start under way shows its process
	// (status). It must not block.
	Spawned func(pid int)
}

// Defaults of ConnConfig.
const (
	DefaultProbeTimeout = 10 * time.Second
	DefaultStopGrace    = 5 * time.Second
)

// The Conn's own waits, not worth a setting: how long a child whose stdout
// ended may take to exit before it is killed (it cannot be spoken to any
// more), and how long its pipes may stay open after the leader is reaped (a
// process outside the group holding them) before they are closed.
const (
	eofGrace   = time.Second
	drainGrace = time.Second
)

func (cfg *ConnConfig) defaults() {
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = limits.DefaultMaxLineBytes
	}
	if cfg.Stderr == nil {
		cfg.Stderr = NewStderrRing(nil, 0)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	if cfg.StopGrace <= 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.ClientInfo.Name == "" {
		cfg.ClientInfo = protocol.Implementation{Name: "snodod", Version: "dev"}
	}
	if len(cfg.ClientCapabilities) == 0 {
		cfg.ClientCapabilities = json.RawMessage(`{}`)
	}
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
//
// Goroutines: one reads stdout itself (framing.Scanner) and routes
// responses, progress and the upstream's own messages; one writes stdin
// when the pipe would block (a caller writes its frame itself, without
// waiting, when nothing waits before it: writer); one drains stderr and
// one logs its lines; one supervises the process's end; each
// Handler.Request runs on its own. All end before Done is closed.
type Conn struct {
	cfg    ConnConfig
	log    *slog.Logger
	group  *proc.Group
	reader *framing.Scanner // read by readLoop
	stdout *os.File         // read ends, closed once drained
	stderr *os.File

	// Set by the handshake, read-only once Start returns.
	era, version     string
	serverInfo, caps json.RawMessage
	instructions     string
	clientInfoMeta   json.RawMessage // cfg.ClientInfo as JSON, for 2026 _meta

	nextID atomic.Int64

	mu       sync.Mutex
	calls    map[int64]*call
	incoming map[protocol.ID]context.CancelFunc // the upstream's requests being served
	closing  bool                               // no new calls
	exit     *ExitError

	w writer

	handlerCtx    context.Context
	handlerCancel context.CancelFunc
	handlers      sync.WaitGroup

	readDone   chan struct{} // stdout ended (or its reader was closed)
	readErr    error         // why, when not EOF; set before readDone closes
	stderrDone chan struct{} // the stderr drain ended
	logStop    chan struct{} // no more lines will be queued
	logDone    chan struct{} // the stderr logger ended
	logDropped atomic.Int64  // lines the log could not take
	killed     atomic.Bool   // the Conn itself signalled the group
	done       chan struct{}

	tail  tailbuf.Buffer // this instance's own last stderrTailBytes of stderr, for its ExitError
	lines chan logLine
	stats connStats
}

// Start spawns cmd (proc.Start: own group, parent-death signal), drains its
// stderr from the first byte into cfg.Stderr and the log, probes the era
// (docs/upstreams.md §6: cached era, else server/discover with 2026 _meta, up to
// 10 s while draining stderr; else initialize 2025-11-25 accepting what the
// server negotiates), and performs the handshake (legacy: initialize, then
// notifications/initialized). ctx bounds the whole start (start_timeout).
// On error nothing is left running, and the error says what happened: an
// *ExitError when the child exited (with its stderr tail), else what the
// upstream sent or that it said nothing in time.
func Start(ctx context.Context, cmd Command, cfg ConnConfig) (*Conn, error) {
	cfg.defaults()
	c := &Conn{
		cfg:        cfg,
		log:        cfg.Logger.With("upstream", cfg.Name),
		calls:      make(map[int64]*call),
		incoming:   make(map[protocol.ID]context.CancelFunc),
		readDone:   make(chan struct{}),
		stderrDone: make(chan struct{}),
		logStop:    make(chan struct{}),
		logDone:    make(chan struct{}),
		done:       make(chan struct{}),
		lines:      make(chan logLine, logQueue),
	}
	c.tail.Max = stderrTailBytes
	c.clientInfoMeta, _ = json.Marshal(cfg.ClientInfo)
	if err := c.spawn(cmd); err != nil {
		return nil, err
	}
	if err := c.handshake(ctx); err != nil {
		c.kill()
		<-c.done
		var ee *ExitError
		if errors.As(err, &ee) && !c.killed.Load() {
			return nil, c.exit // it ended by itself: its own status and stderr
		}
		return nil, err
	}
	return c, nil
}

// supervise waits for the process's end and finishes the Conn.
func (c *Conn) supervise() {
	select {
	case <-c.group.Done():
	case <-c.readDone:
		// stdout ended: the child cannot be spoken to any more. It is
		// usually exiting; if not, it is killed.
		t := time.NewTimer(eofGrace)
		select {
		case <-c.group.Done():
			t.Stop()
		case <-t.C:
			c.kill()
			<-c.group.Done()
		}
	}
	if c.cfg.Record != nil {
		if err := c.cfg.Record.Remove(c.group); err != nil {
			c.log.Warn("cannot remove the process group from the record", "pid", c.group.PID(), "err", err)
		}
	}
	// The group is gone; a pipe still open belongs to a process that left
	// it, and is closed after a moment so the Conn can end.
	waitOr(c.readDone, drainGrace, c.stopReading)
	waitOr(c.stderrDone, drainGrace, func() { _ = c.stderr.Close() })
	exit := exitError(c.group.Wait(), string(c.tail.Tail()))
	if c.readErr != nil && exit.Err == nil {
		exit.Err = fmt.Errorf("read stdout: %w", c.readErr)
	}
	c.finish(exit)
}

// stopReading interrupts readLoop's read of stdout, which then returns
// as at the end of input.
func (c *Conn) stopReading() { _ = c.stdout.SetReadDeadline(time.Now()) }

// waitOr waits for ch up to d, then calls force and waits again.
func waitOr(ch <-chan struct{}, d time.Duration, force func()) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		force()
		<-ch
	}
}

// finish ends the Conn once the process has ended: every call in flight
// gets exit, handlers are cancelled and waited for.
func (c *Conn) finish(exit *ExitError) {
	c.mu.Lock()
	c.closing = true
	c.exit = exit
	calls := c.calls
	c.calls = nil
	c.mu.Unlock()
	for _, cl := range calls {
		cl.deliver(nil, exit)
	}
	c.w.close(ErrClosed)
	c.handlerCancel()
	c.handlers.Wait()
	c.stopReading()
	<-c.readDone
	_ = c.stdout.Close()
	_ = c.stderr.Close()
	close(c.logStop) // the reader and the drain have ended: nothing queues lines
	<-c.logDone
	<-c.w.done
	c.log.Debug("upstream ended", "pid", c.group.PID(), "exit", exit.Error())
	close(c.done)
}

// kill sends SIGKILL to the group.
func (c *Conn) kill() {
	c.killed.Store(true)
	_ = c.group.Signal(syscall.SIGKILL)
}

// PID is the child's process id (and process group id).
func (c *Conn) PID() int { return c.group.PID() }

// Group is the child's process group. Only the Conn stops it or waits for
// it; callers may read its identity (PID, StartTime).
func (c *Conn) Group() *proc.Group { return c.group }

// Era is EraLegacy or Era2026.
func (c *Conn) Era() string { return c.era }

// Version is the negotiated legacy version, or the 2026 version used.
func (c *Conn) Version() string { return c.version }

// ServerInfo is serverInfo as the upstream sent it (nil when it sent none).
func (c *Conn) ServerInfo() json.RawMessage { return c.serverInfo }

// Capabilities is the upstream's capabilities object ({} when it sent
// none).
func (c *Conn) Capabilities() json.RawMessage { return c.caps }

// Instructions are the upstream's instructions, "" when it sent none.
func (c *Conn) Instructions() string { return c.instructions }

// InFlight is the number of calls waiting for their answer.
func (c *Conn) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// Stop ends the instance gracefully (docs/upstreams.md §4): close stdin, wait up
// to StopGrace (5 s), SIGTERM to the group, StopGrace, SIGKILL to the
// group, reap. Calls not yet written get ErrClosed; calls in flight get the
// *ExitError. A ctx that ends early skips to SIGKILL. Safe to call more
// than once and concurrently; every call returns once Done is closed.
func (c *Conn) Stop(ctx context.Context) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.w.close(ErrClosed)
	steps := []func(){func() { _ = c.group.Signal(syscall.SIGTERM) }, c.kill}
	for _, next := range steps {
		t := time.NewTimer(c.cfg.StopGrace)
		select {
		case <-c.group.Done():
			t.Stop()
			<-c.done
			return
		case <-ctx.Done():
			t.Stop()
			c.kill()
			<-c.done
			return
		case <-t.C:
			if next != nil {
				c.log.Info("upstream did not stop in time; signalling its group", "pid", c.group.PID())
			}
			next()
		}
	}
	<-c.done
}

// Done is closed once the leader is reaped, stdout and stderr are drained,
// and every Handler.Request has returned (their ctx ends with the Conn).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Exit says why the instance ended; valid after Done (nil before).
func (c *Conn) Exit() *ExitError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.exit
}
