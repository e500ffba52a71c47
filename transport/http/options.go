package http

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// Defaults of the handler's limits (docs/protocol.md §13.5). Zero in Options
// means these. WriteTimeout and ShutdownGrace are the keys every transport
// shares (session.write_timeout, daemon.shutdown_grace): their defaults are
// package limits' own.
const (
	DefaultPath             = "/mcp"
	DefaultMaxBodyBytes     = 2_000_000
	DefaultMaxSubscriptions = 256
	DefaultMaxSessions      = 1024
	// DefaultMaxSessionsPerPeer is a quarter of DefaultMaxSessions: one
	// client (a uid, or an address) cannot take every session.
	DefaultMaxSessionsPerPeer = 256
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultWriteTimeout       = limits.DefaultWriteTimeout
	DefaultReadTimeout        = 30 * time.Second
	DefaultShutdownGrace      = limits.DefaultShutdownGrace
	// DefaultKeepAlive is how long an SSE stream may stay silent before a
	// ": keep-alive" comment is written: under nginx's default 60 s
	// proxy_read_timeout with room to spare (docs/protocol.md §13.1).
	DefaultKeepAlive = 15 * time.Second
)

// Views resolves the views the handler serves: the endpoint itself
// (View("")) and, below it, Path + "/NAME" (View(NAME): docs/upstreams.md
// §2, a pass-through view). It may be called concurrently, once per
// request; a view may appear and disappear while the handler serves.
type Views interface {
	View(name string) (View, bool)
}

// View is one view as the handler serves it.
type View struct {
	// Dispatcher serves the view's requests. Required.
	Dispatcher server.Dispatcher
	// Caller is who asks in every 2026 POST of the view (server.Caller):
	// they keep nothing between requests, so one caller stands for all
	// of them. Nil: nobody in particular.
	Caller *server.Caller
	// Open, when set, is called when a legacy initialize arrives: it
	// returns the caller of the new session (what the session holds on
	// hosted upstreams is its own), and release, which the handler calls
	// exactly once: when the initialize fails, or when the session ends
	// (DELETE, idle expiry, shutdown). Both may be called from any
	// goroutine.
	Open func() (caller *server.Caller, release func())
}

// ViewAccess is what Views implements when some views have an access
// rule of their own (docs/views.md, Access). Access returns the rule of
// view name (nil: the handler's own: PeerAllowed, AuthToken,
// AllowUnauthenticated) without resolving the view, so that a refused
// request starts nothing. The Host and Origin rules apply to every view.
// A rule is given the connection's peer and the request's bearer token
// ("" for none) and returns nil to serve, or the refusal, answered 401
// with a challenge when no bearer token was sent and 403 otherwise. Both
// may be called concurrently.
type ViewAccess interface {
	Access(name string) func(p Peer, bearer string) *protocol.Error
}

// ViewMissing is what Views implements to say why a name is no view
// (the daemon: the known ones); "" says nothing more. The handler answers
// 404 "No MCP endpoint at PATH: " and it.
type ViewMissing interface {
	Missing(name string) string
}

// Options configure a Handler. Zero values mean the defaults, as in
// net/http.Server; negative limits are refused by New.
type Options struct {
	// Dispatcher serves the endpoint itself (the aggregated view) when
	// Views has no view "". Required without Views.
	Dispatcher server.Dispatcher
	// Views, when set, serves Path + "/NAME".
	Views Views
	// Executor runs every request; it is shared with the other transports
	// of the process. Required.
	Executor *executor.Executor
	// Versions are the enabled protocol versions (empty: all three). They
	// decide the routing of requests that carry no 2026 metadata
	// (docs/protocol.md §13.2 steps 4 and 5).
	Versions []string

	// Path is the endpoint (default "/mcp").
	Path string
	// MaxBodyBytes bounds a request body, checked as it arrives.
	MaxBodyBytes int
	// ReadTimeout bounds the reading of one request body from its first
	// byte; a body that trickles past it is cut off (408).
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of one response or one SSE event. A
	// response or stream that misses it is abandoned.
	WriteTimeout time.Duration
	// KeepAlive is the longest an SSE stream stays silent: a ": keep-alive"
	// comment is written after that much idleness.
	KeepAlive time.Duration
	// AllowedOrigins are origins (scheme://host[:port]) allowed besides the
	// loopback ones.
	AllowedOrigins []string
	// AllowedHosts are Host names (with an optional :port) accepted
	// besides the loopback names. When set, every request's Host must be
	// one of them or a loopback name, whatever address the listener is
	// bound to; when empty, only a listener bound to loopback checks Host
	// (DNS rebinding, docs/protocol.md §13.1).
	AllowedHosts []string
	// AuthToken, when set, is the bearer token every request must carry in
	// Authorization, unless its connection's peer is a local user that
	// PeerAllowed allows; others get 401 with a WWW-Authenticate
	// challenge (RFC 6750).
	AuthToken string
	// IdentifyPeer, when set, finds who is at the other end of a
	// connection: the daemon looks up the local user of a loopback or
	// Unix-socket connection. It is called once per connection, at its
	// first request, from that request's goroutine (so a slow lookup
	// holds no other client); the server must have been built by
	// NewServer, or have Handler.ConnContext as its ConnContext.
	IdentifyPeer func(net.Conn) Peer
	// PeerAllowed reports whether a local peer's uid is served without a
	// token (the daemon: its own uid and daemon.allowed_uids). It may be
	// called concurrently; nil allows none.
	PeerAllowed func(uid int) bool
	// AllowUnauthenticated serves a local peer that PeerAllowed refuses
	// when there is no AuthToken (http.allow_unauthenticated); without it
	// such a peer gets 403.
	AllowUnauthenticated bool
	// MaxSubscriptions caps the 2026 listen streams the handler holds at
	// once (across all clients).
	MaxSubscriptions int
	// MaxSessions caps the legacy sessions alive at once.
	MaxSessions int
	// MaxSessionsPerPeer caps the legacy sessions one peer holds: a local
	// user (IdentifyPeer) by uid, anyone else by address.
	MaxSessionsPerPeer int
	// SessionMaxSubscriptions caps one legacy session's subscriptions
	// (docs/protocol.md §9.5, session.max_subscriptions).
	SessionMaxSubscriptions int
	// SessionIdleTimeout ends a legacy session after this long with
	// nothing in flight and no open stream.
	SessionIdleTimeout time.Duration
	// NodeID, when set, tags every session id this handler mints
	// ("NODE.<32 hex>"), so a load balancer can route a session to its
	// node; a session id with another tag is answered 404.
	NodeID string
	// ShutdownGrace is how long admitted requests may still run once
	// Shutdown is called.
	ShutdownGrace time.Duration

	// Logger receives the handler's diagnostics; nil means slog.Default().
	Logger *slog.Logger
}

// validNodeID is the node tag alphabet: visible ASCII that needs no
// escaping in a header, a log line or an nginx regular expression.
var validNodeID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// validate reports every invalid option at once.
func (o *Options) validate() error {
	var errs []error
	neg := func(bad bool, msg string) {
		if bad {
			errs = append(errs, errors.New(msg))
		}
	}
	neg(o.Dispatcher == nil && o.Views == nil, "the HTTP handler needs a Dispatcher")
	neg(o.Executor == nil, "the HTTP handler needs an Executor")
	neg(o.MaxBodyBytes < 0, "max_body_bytes must be a positive integer")
	neg(o.ReadTimeout < 0, "read_timeout must be a positive duration")
	neg(o.WriteTimeout < 0, "write_timeout must be a positive duration")
	neg(o.KeepAlive < 0, "keep-alive interval must be a positive duration")
	neg(o.MaxSubscriptions < 0, "http_max_subscriptions must be a positive integer")
	neg(o.MaxSessions < 0, "max_sessions must be a positive integer")
	neg(o.MaxSessionsPerPeer < 0, "max_sessions_per_peer must be a positive integer")
	neg(o.SessionMaxSubscriptions < 0, "max_subscriptions must be a positive integer")
	neg(o.SessionIdleTimeout < 0, "http_session_idle_timeout must be a positive duration")
	neg(o.ShutdownGrace < 0, "shutdown_grace must be a positive duration")
	neg(o.Path != "" && !strings.HasPrefix(o.Path, "/"), "http_path must start with /")
	neg(o.NodeID != "" && !validNodeID.MatchString(o.NodeID), "node_id must be 1 to 32 letters, digits, - or _")
	for _, origin := range o.AllowedOrigins {
		if _, ok := parseOrigin(origin); !ok {
			errs = append(errs, fmt.Errorf("http_allowed_origins entries must be origins (scheme://host[:port]), got %q", origin))
		}
	}
	if _, err := protocol.ParseVersions(o.Versions); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// withDefaults returns o with every zero limit replaced by its default.
func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Path == "" {
		o.Path = DefaultPath
	}
	o.Path = strings.TrimSuffix(o.Path, "/")
	def(&o.MaxBodyBytes, DefaultMaxBodyBytes)
	def(&o.MaxSubscriptions, DefaultMaxSubscriptions)
	def(&o.MaxSessions, DefaultMaxSessions)
	def(&o.MaxSessionsPerPeer, DefaultMaxSessionsPerPeer)
	def(&o.SessionMaxSubscriptions, server.DefaultMaxSubscriptions)
	defD(&o.ReadTimeout, DefaultReadTimeout)
	defD(&o.WriteTimeout, DefaultWriteTimeout)
	defD(&o.KeepAlive, DefaultKeepAlive)
	defD(&o.SessionIdleTimeout, DefaultSessionIdleTimeout)
	defD(&o.ShutdownGrace, DefaultShutdownGrace)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// parseOrigin reads scheme://host[:port] with nothing else, lowered.
func parseOrigin(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}
