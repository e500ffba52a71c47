package config

import (
	"time"

	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/limits"
)

// Config is snodod's effective configuration: the embedded defaults with the
// file, the environment and the flags laid over them, converted, expanded and
// validated. A *Config returned by Load is valid; every field holds its
// effective value (never a zero meaning "default", except Server.Version and
// HTTP.Listen, whose empty values are documented).
//
// The koanf tags are the key names, section.leaf; the limits' keys are
// limits.All's. A Config is not modified by this package after it is
// returned and may be read concurrently.
type Config struct {
	// Limits holds the session.*, executor.* and daemon.* limits, every
	// key that package limits describes (limits.All names each one's key).
	// In a hand-built Config a zero field means the default, as everywhere
	// in Go APIs; a Config from Load has every field set.
	Limits limits.Limits

	Daemon   Daemon   `koanf:"daemon"`
	Protocol Protocol `koanf:"protocol"`
	Server   Server   `koanf:"server"`
	HTTP     HTTP     `koanf:"http"`
	Admin    Admin    `koanf:"admin"`
	Log      Log      `koanf:"log"`
	Audit    Audit    `koanf:"audit"`
	// Upstreams holds the settings of every hosted server; MCPServers
	// the servers themselves (upstreams.go), sorted by name.
	Upstreams Upstreams `koanf:"upstreams"`
	// Sandbox is the [sandbox] table: the sandbox of every hosted server
	// and exec tool, each entry's own laid over it (Upstream.Sandbox,
	// Tool.Sandbox hold the result). Home and Hide are left to the
	// daemon, which knows its state directory. Level is never empty in a
	// Config from Load; a hand-built Config's zero Level is off.
	Sandbox    sandbox.Policy
	MCPServers []Upstream

	// Tools, Resources and Prompts are the [tools.NAME], [resources.NAME]
	// and [prompts.NAME] entries (tools.go, resources.go, prompts.go),
	// each sorted by name; entry sections have no keys, so no koanf tag.
	Tools     []Tool
	Resources []FileResource
	Prompts   []Prompt
	// Views are the [views.NAME] entries (views.go), sorted by name.
	Views []View

	file           string
	sandboxWritten bool // the file has a [sandbox] table
	// sandboxLevelWritten: the table names a level, which exec tools get
	// too (without one they are off).
	sandboxLevelWritten bool
	sources             map[string]Source
	warnings            []Problem
	env                 map[string]string // the environment Load read, for DefaultSocketDirs
	// written holds the file's entry sections as written, for Print.
	written map[string]map[string]any
}

// Daemon holds the settings of `snodod serve`.
type Daemon struct {
	// Socket is the session socket's absolute path: every connection to it
	// is a session. Environment variables in it are expanded at load.
	Socket string `koanf:"socket"`
	// ControlSocket is the control socket's absolute path (fd hand-over
	// from `snodod connect`, status). Load fills it with control.sock in
	// Socket's directory when it is configured empty.
	ControlSocket string `koanf:"control_socket"`
	// AllowedUIDs lists the peer uids accepted besides the daemon's own.
	// Empty: only the daemon's own uid.
	AllowedUIDs []int `koanf:"allowed_uids"`
}

// Protocol holds the MCP versions served.
type Protocol struct {
	// Versions lists the enabled MCP versions, each once, in any order
	// (docs/protocol.md §1.1). Load turns an empty list into all three, so it is
	// never empty.
	Versions []string `koanf:"versions"`
}

// Server holds what the server says about itself (serverInfo,
// instructions) and the cache fields of 2026 results (docs/protocol.md §10.2).
type Server struct {
	// Name is serverInfo.name. Never empty.
	Name string `koanf:"name"`
	// Version is serverInfo.version. Empty: the caller uses the build
	// version.
	Version string `koanf:"version"`
	// Title is serverInfo.title; empty sends none.
	Title string `koanf:"title"`
	// Description is serverInfo.description; empty sends none.
	Description string `koanf:"description"`
	// WebsiteURL is serverInfo.websiteUrl, an http or https URL; empty
	// sends none.
	WebsiteURL string `koanf:"website_url"`
	// Instructions is sent by initialize and server/discover; empty sends
	// none.
	Instructions string `koanf:"instructions"`
	// Demo also serves the demo tools and the conformance fixture (the
	// catalog package's Demo and Everything), as --demo does.
	Demo bool `koanf:"demo"`
	// CacheTTL is the ttlMs of cacheable 2026 results, sent as whole
	// milliseconds. >= 0.
	CacheTTL time.Duration `koanf:"cache_ttl"`
	// CacheScope is the cacheScope of cacheable 2026 results: "public" or
	// "private".
	CacheScope string `koanf:"cache_scope"`
	// StateKeyFile holds the key that signs MRTR requestState and
	// cursors; every node of a cluster reads the same one. Empty: a random
	// key per process.
	StateKeyFile string `koanf:"state_key_file"`
}

// Admin holds the admin listener's settings (docs/observability.md): the
// listener that serves /metrics, never the MCP endpoint.
type Admin struct {
	// Listen is a loopback host:port or "unix:" and the absolute path of
	// a Unix socket (environment variables expanded at load). Empty: no
	// admin listener. A host-less ":port" binds 127.0.0.1. Load refuses a
	// non-loopback address.
	Listen string `koanf:"listen"`
	// AuthTokenFile holds the bearer token that local users other than
	// the daemon's and Daemon.AllowedUIDs must send. Empty: none, and
	// only those users are served.
	AuthTokenFile string `koanf:"auth_token_file"`
	// NativeHistograms gives the latency histograms native (sparse)
	// buckets beside the classic ones.
	NativeHistograms bool `koanf:"native_histograms"`
	// MaxViewers bounds the status page's live streams (/events) open at
	// once; one more gets 503.
	MaxViewers int `koanf:"max_viewers"`
	// ViewerWriteTimeout is how long one update to a status page viewer
	// may take to be written; a viewer slower than that is dropped.
	ViewerWriteTimeout time.Duration `koanf:"viewer_write_timeout"`
}

// HTTP holds the Streamable HTTP listener's settings (docs/protocol.md §13).
type HTTP struct {
	// Listen is the listener's host:port, or "unix:" and the absolute path
	// of a Unix socket (environment variables expanded at load). Empty: no
	// HTTP listener. A host-less ":port" binds 127.0.0.1.
	Listen string `koanf:"listen"`
	// Path is the one endpoint's path; it starts with "/".
	Path string `koanf:"path"`
	// MaxBodyBytes is the largest request body accepted. >= 1.
	MaxBodyBytes int `koanf:"max_body_bytes"`
	// AllowedOrigins lists origins (scheme://host[:port]) allowed besides
	// the loopback ones.
	AllowedOrigins []string `koanf:"allowed_origins"`
	// MaxSubscriptions caps the SSE listen streams the listener holds at
	// once. >= 1.
	MaxSubscriptions int `koanf:"max_subscriptions"`
	// SessionIdleTimeout ends a legacy HTTP session after this long without
	// requests or streams. > 0.
	SessionIdleTimeout time.Duration `koanf:"session_idle_timeout"`
	// MaxSessions caps the legacy HTTP sessions alive at once. >= 1.
	MaxSessions int `koanf:"max_sessions"`
	// MaxSessionsPerPeer caps the legacy HTTP sessions one client holds:
	// a local user by uid, others by address. >= 1.
	MaxSessionsPerPeer int `koanf:"max_sessions_per_peer"`
	// AllowedHosts are Host values accepted besides the loopback names;
	// when set, every request's Host is checked (a proxy forwards its
	// public name).
	AllowedHosts []string `koanf:"allowed_hosts"`
	// AuthTokenFile holds the bearer token clients must carry: every
	// client of a non-loopback Listen; on loopback or a Unix socket, the
	// local users other than the daemon's and Daemon.AllowedUIDs. Empty:
	// none, which Load allows only on a loopback or Unix-socket Listen
	// unless AllowUnauthenticated is set.
	AuthTokenFile string `koanf:"auth_token_file"`
	// AllowUnauthenticated serves without a token the clients the token
	// would be asked of (Load warns).
	AllowUnauthenticated bool `koanf:"allow_unauthenticated"`
	// Tokens are files each holding a bearer token and the views it
	// opens (docs/views.md, Access): token = "…", views = ["NAME", …].
	Tokens []string `koanf:"tokens"`
	// NodeID tags the legacy session ids this node mints, so a load
	// balancer can route a session to its node. Empty: untagged.
	NodeID string `koanf:"node_id"`
	// ReadTimeout bounds the arrival of a request's headers, and then of
	// its body. > 0.
	ReadTimeout time.Duration `koanf:"read_timeout"`
	// IdleTimeout closes a keep-alive connection idle between requests.
	// > 0.
	IdleTimeout time.Duration `koanf:"idle_timeout"`
	// MaxHeaderBytes bounds a request's header block. >= 1.
	MaxHeaderBytes int `koanf:"max_header_bytes"`
}

// Log holds the daemon's log settings.
type Log struct {
	// Level is the lowest level logged: "debug", "info", "warn" or
	// "error".
	Level string `koanf:"level"`
	// Format is "text" (log/slog's TextHandler) or "json".
	Format string `koanf:"format"`
}

// File returns the configuration file that was read, or "" when none was.
func (c *Config) File() string { return c.file }

// Source returns where key's effective value came from. Keys not set by any
// layer, and unknown keys, report the default.
func (c *Config) Source(key string) Source {
	if s, ok := c.sources[key]; ok {
		return s
	}
	return Source{Kind: FromDefault}
}

// Sources returns a copy of every key's source.
func (c *Config) Sources() map[string]Source {
	out := make(map[string]Source, len(specs))
	for _, s := range specs {
		out[s.name] = c.Source(s.name)
	}
	return out
}

// SourceKind says which layer a value came from.
type SourceKind int

// The layers, lowest precedence first.
const (
	FromDefault SourceKind = iota // the embedded defaults.toml
	FromFile                      // the configuration file
	FromEnv                       // a SNODOD_* environment variable
	FromFlag                      // a command-line flag (Options.Overrides)
)

// Source is where one value came from.
type Source struct {
	Kind SourceKind
	// Name is the file's path, the variable's name or the flag as typed
	// ("--write-timeout"); empty for the default.
	Name string
}

// String returns "default", "file <path>", "env <VARIABLE>" or
// "flag <--flag>", the form `snodod config print` shows.
func (s Source) String() string {
	switch s.Kind {
	case FromFile:
		return "file " + s.Name
	case FromEnv:
		return "env " + s.Name
	case FromFlag:
		return "flag " + s.Name
	}
	return "default"
}

// Audit holds the audit log's settings (docs/observability.md, "Audit
// log"): one JSON line per tool call, resource read and prompt get, to a
// file or to journald, or nowhere when both are off.
type Audit struct {
	// File is the log's path (environment variables expanded at load);
	// empty: no file.
	File string `koanf:"file"`
	// MaxSize is the size in bytes at which the file is rotated: a line
	// that would take it past MaxSize goes to a new file.
	MaxSize int `koanf:"max_size"`
	// MaxFiles is how many rotated files are kept (FILE.1 the newest).
	MaxFiles int `koanf:"max_files"`
	// Journald sends each line to the systemd journal instead of a file.
	Journald bool `koanf:"journald"`
	// Arguments records a request's arguments (redacted) beside their
	// digest.
	Arguments bool `koanf:"arguments"`
}

// On reports whether the audit log is written anywhere.
func (a Audit) On() bool { return a.File != "" || a.Journald }
