package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
)

// Options configure one Conn. Zero values mean the documented defaults.
type Options struct {
	// Name is the server's configured name: logs (upstream=NAME) and
	// errors.
	Name string
	// Protocol is "" or "auto" (probe), "2025-06-18", "2025-11-25" or
	// "2026-07-28" (docs/upstreams.md §6).
	Protocol string
	// KnownEra skips the probe when the caller knows the era (a catalog
	// cache of the same server): "" (probe), EraLegacy or Era2026.
	KnownEra string
	// MaxLineBytes bounds one message from the server, newline included;
	// 0 means limits.DefaultMaxLineBytes.
	MaxLineBytes int
	// ClientInfo is snodod's clientInfo in a legacy initialize and the
	// default io.modelcontextprotocol/clientInfo of 2026 requests.
	ClientInfo protocol.Implementation
	// ClientCapabilities is declared in a legacy initialize (roots only
	// when the caller can answer roots/list; sampling and elicitation
	// only when it can relay them: docs/upstreams.md §5). nil declares {}.
	ClientCapabilities json.RawMessage
	// Logger gets the Conn's logs (and a Command's stderr lines), with
	// upstream=NAME; nil means slog.Default().
	Logger *slog.Logger
	// Handler gets what the server sends on its own; nil drops
	// notifications and answers requests -32601.
	Handler Handler
	// ProbeTimeout bounds the wait for an answer to the server/discover
	// probe (docs/upstreams.md §6); 0 means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// MaxServerRequests bounds the server's requests the Conn holds at
	// once: handed to the Handler and not answered yet, and, for a
	// transport that queues (a child's stdin), answers not written yet.
	// Beyond it a request is answered -32603 at once, or, when the server
	// does not even read the answers, dropped (ConnStats). ping counts
	// like any other. 0 means DefaultMaxServerRequests.
	MaxServerRequests int
}

// Defaults of Options.
const (
	DefaultProbeTimeout      = 10 * time.Second
	DefaultMaxServerRequests = 32
)

func (o *Options) defaults() {
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = limits.DefaultMaxLineBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = DefaultProbeTimeout
	}
	if o.MaxServerRequests <= 0 {
		o.MaxServerRequests = DefaultMaxServerRequests
	}
	if o.ClientInfo.Name == "" {
		o.ClientInfo = protocol.Implementation{Name: "snodod", Version: "dev"}
	}
	if len(o.ClientCapabilities) == 0 {
		o.ClientCapabilities = json.RawMessage(`{}`)
	}
}

// The server's era, as Conn.Era reports it and Options.KnownEra takes.
const (
	EraLegacy = "legacy"
	Era2026   = "2026"
)

// Errors of Call.
var (
	// ErrClosed: the Conn was stopping or stopped before the request was
	// sent; nothing reached the server.
	ErrClosed = errors.New("upstream connection closed")
	// ErrResponseTooLong: the server's answer exceeded MaxLineBytes; it
	// was dropped.
	ErrResponseTooLong = errors.New("upstream response exceeds the line limit")
)

// Conn is one connection to an MCP server, snodod being its client: the
// handshake done (era probe, then initialize or server/discover), calls
// with ids of the Conn's own, progress routed to its call, cancellation,
// and the server's own notifications and requests handed to the Handler.
// Its methods may be called from any goroutine. It owns its stream:
// nothing else reads, writes or ends it.
//
// Goroutines: one reads the stream (Stream.Read) and routes what comes;
// one waits for the stream's end and finishes the Conn; the transport
// has its own (a Command's: its stdin writer, its stderr, its process).
// None runs per request of the server's. All end before Done is closed.
type Conn struct {
	o   Options
	log *slog.Logger
	s   Stream

	// Set by the handshake, read-only once Connect returns.
	era, version     string
	serverInfo, caps json.RawMessage
	instructions     string
	clientInfoMeta   json.RawMessage // o.ClientInfo as JSON, for 2026 _meta

	nextID atomic.Int64

	mu       sync.Mutex
	calls    map[protocol.ID]*call    // by their ids, all integers
	incoming map[protocol.ID]*Request // the server's requests not answered yet
	closing  bool                     // no new calls
	err      error                    // the stream's end, once done

	// requests is the parent of every Request's context, cancelled when
	// the Conn ends.
	requests      context.Context
	cancelRequest context.CancelFunc

	readDone chan struct{} // the reading goroutine returned
	done     chan struct{}
	stats    connStats
}

// Connect opens t and performs the handshake (docs/upstreams.md §6: the
// era Options.KnownEra names, else server/discover with 2026 _meta, up to
// ProbeTimeout; else initialize 2025-11-25 accepting what the server
// negotiates; legacy: then notifications/initialized). ctx bounds the
// whole start (start_timeout). On error nothing is left running, and the
// error says what happened: the stream's end when the server ended by
// itself (for a Command, an *ExitError with its stderr tail), else what
// the server sent or that it said nothing in time.
func Connect(ctx context.Context, t Transport, o Options) (*Conn, error) {
	o.defaults()
	c := newConn(o)
	s, err := t.Open(ctx, Link{Options: &c.o, TooLong: c.longLine})
	if err != nil {
		return nil, err
	}
	c.s = s
	c.start()
	if err := c.handshake(ctx); err != nil {
		if ended(err) {
			// It ended by itself: its own end says why, stderr and all.
			<-c.done
			return nil, c.Err()
		}
		stopNow(c)
		return nil, err
	}
	return c, nil
}

// newConn is a Conn of o (defaults applied) without its stream.
func newConn(o Options) *Conn {
	return &Conn{
		o:        o,
		log:      o.Logger.With("upstream", o.Name),
		calls:    make(map[protocol.ID]*call),
		incoming: make(map[protocol.ID]*Request),
		readDone: make(chan struct{}),
		done:     make(chan struct{}),
	}
}

// start starts the Conn's goroutines on its stream.
func (c *Conn) start() {
	c.requests, c.cancelRequest = context.WithCancel(context.Background())
	c.clientInfoMeta, _ = json.Marshal(c.o.ClientInfo)
	go c.readLoop()
	go c.watch()
}

// watch finishes the Conn once its stream has ended: every call in flight
// gets the stream's end, every request of the server's is cancelled.
func (c *Conn) watch() {
	<-c.s.Done()
	err := c.s.Err()
	c.mu.Lock()
	c.closing = true
	c.err = err
	calls, incoming := c.calls, c.incoming
	c.calls, c.incoming = nil, nil
	c.mu.Unlock()
	for _, cl := range calls {
		cl.deliver(nil, err)
	}
	for _, r := range incoming {
		r.cancel()
	}
	c.cancelRequest()
	<-c.readDone
	c.log.Debug("upstream ended", "pid", c.PID(), "exit", err)
	close(c.done)
}

// stopNow ends c at once (SIGKILL for a process).
func stopNow(c *Conn) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Stop(ctx)
}

// PID is the server's process id (and process group id) when its
// transport is a process, else 0.
func (c *Conn) PID() int {
	if p, ok := c.s.(pider); ok {
		return p.PID()
	}
	return 0
}

// Era is EraLegacy or Era2026.
func (c *Conn) Era() string { return c.era }

// Version is the negotiated legacy version, or the 2026 version used.
func (c *Conn) Version() string { return c.version }

// ServerInfo is serverInfo as the server sent it (nil when it sent none).
func (c *Conn) ServerInfo() json.RawMessage { return c.serverInfo }

// Capabilities is the server's capabilities object ({} when it sent
// none).
func (c *Conn) Capabilities() json.RawMessage { return c.caps }

// Instructions are the server's instructions, "" when it sent none.
func (c *Conn) Instructions() string { return c.instructions }

// InFlight is the number of calls waiting for their answer.
func (c *Conn) InFlight() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// Stop ends the connection gracefully (Stream.Close; for a Command,
// docs/upstreams.md §4: close stdin, wait up to StopGrace, SIGTERM to the
// group, StopGrace, SIGKILL to the group, reap). Calls not yet sent get
// ErrClosed; calls in flight get the stream's end (an *ExitError). A ctx
// that ends early skips to the last step. Safe to call more than once and
// concurrently; every call returns once Done is closed.
func (c *Conn) Stop(ctx context.Context) {
	c.mu.Lock()
	c.closing = true
	c.mu.Unlock()
	c.s.Close(ctx)
	<-c.done
}

// Done is closed once the stream has ended (for a Command: the leader
// reaped, stdout and stderr drained), every call has its outcome and
// every request of the server's is cancelled.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended, valid after Done (nil before): for
// a Command, an *ExitError.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}
