package control

import "time"

// Status is what `snodod status` shows: the daemon, each session, the
// shared executor's load, the HTTP listener and the hosted servers. It is
// the answer to OpStatus (its members beside "ok").
type Status struct {
	// State is "running", or "draining" once a drain has begun: no new
	// sessions, and the ones listed are finishing.
	State       string    `json:"state"`
	Version     string    `json:"version"`
	PID         int       `json:"pid"`
	Started     time.Time `json:"started"`
	MaxSessions int       `json:"max_sessions"`
	// Goroutines is the process's goroutine count, and BufferedBytes the
	// bytes of unfinished lines and pending output its sessions hold
	// (daemon.max_buffered_bytes): what a soak or a leak hunt watches.
	Goroutines    int   `json:"goroutines"`
	BufferedBytes int64 `json:"buffered_bytes"`
	// Sessions are ordered by id (oldest first).
	Sessions []Session `json:"sessions"`
	Executor Executor  `json:"executor"`
	// Upstreams has one row per hosted server instance (docs/upstreams.md §8).
	Upstreams []Upstream `json:"upstreams"`
	// Warnings are what the daemon wants a person to know: what the
	// configured catalog could not do (a folder with more directories
	// than max_watched_dirs), and the problems of the last reload, which
	// was refused, until a reload succeeds.
	Warnings []string `json:"warnings,omitempty"`
	// HTTP is the HTTP listener's state; nil without http.listen.
	HTTP *HTTP `json:"http,omitempty"`
	// Refused counts the clients of the sockets refused since the start,
	// by reason: "uid" (daemon.allowed_uids), "capacity"
	// (daemon.max_sessions), "uid_capacity" (daemon.max_sessions_per_uid),
	// "draining", "descriptors"; and "initialize_timeout", the sessions
	// ended for sending no request (daemon.initialize_timeout).
	Refused map[string]int64 `json:"refused,omitempty"`
	// Views has one row per [views.NAME] view, by name (snodod views).
	Views []View `json:"views,omitempty"`
}

// View is one configured view's row: what it holds now (the servers it
// names, or every configured one; the items it lists) and the sessions
// open on it (sockets and connects, and legacy HTTP sessions at
// http.path/@NAME).
type View struct {
	Name        string `json:"name"`
	Servers     int    `json:"servers"`
	Tools       int    `json:"tools"`
	Resources   int    `json:"resources"`
	Prompts     int    `json:"prompts"`
	Sessions    int    `json:"sessions"`
	AllowedUIDs []int  `json:"allowed_uids,omitempty"`
}

// Session is one session's row.
type Session struct {
	ID uint64 `json:"id"`
	// Kind is the device: "pipe", "socket" or "pty".
	Kind    string    `json:"kind"`
	PeerPID int       `json:"peer_pid"`
	PeerUID int       `json:"peer_uid"`
	Started time.Time `json:"started"`
	// Version is the negotiated MCP version; "" before initialize.
	Version string `json:"version"`
	// Client is who the client says it is: the clientInfo of its
	// initialize, or of its last 2026 request's _meta; nil before either.
	Client *ClientInfo `json:"client,omitempty"`
	// Via is how the session came: "socket" (the session socket) or
	// "connect" (descriptors handed over); View the upstream it passes
	// through, "" for the aggregated view.
	Via      string `json:"via,omitempty"`
	View     string `json:"view,omitempty"`
	InFlight int    `json:"in_flight"`
	// Requests counts the request lines the session has received.
	Requests      int64 `json:"requests"`
	Subscriptions int   `json:"subscriptions"`
	Restarts      int   `json:"restarts"`
	BytesIn       int64 `json:"bytes_in"`
	BytesOut      int64 `json:"bytes_out"`
}

// ClientInfo is a client's name and version, as it sent them.
type ClientInfo struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Executor is the load of the executor new sessions use, and its limits.
// (After a reload that changed executor.* the sessions started before it
// go on sharing the previous executor, which is not counted.)
type Executor struct {
	Running int `json:"running"`
	// Detached counts requests in flight that hold no slot while they wait
	// on a child (docs/transport.md §13.7).
	Detached       int `json:"detached"`
	Queued         int `json:"queued"`
	MaxConcurrency int `json:"max_concurrency"`
	// MaxQueue is the queue places every session shares; each session
	// has SessionQueue more of its own besides (docs/config.md,
	// executor.max_queue).
	MaxQueue       int    `json:"max_queue"`
	SessionQueue   int    `json:"session_queue"`
	RequestTimeout string `json:"request_timeout"`
}

// HTTP is the HTTP listener's row.
type HTTP struct {
	// Listen is the bound address (the port chosen when http.listen asked
	// for :0); Path the endpoint.
	Listen string `json:"listen"`
	Path   string `json:"path"`
	// Access is what the listener is bound to, which decides who may use
	// it (docs/security.md): "loopback" and "unix" (local users by uid;
	// others need the token), or "network" (the token alone).
	Access string `json:"access"`
	// State is "serving", "restarting" or "draining".
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	// NodeID is http.node_id.
	NodeID string `json:"node_id,omitempty"`
	// Sessions are the legacy sessions alive (max MaxSessions); Streams
	// the SSE responses open; Listens the 2026 listen streams among them.
	Sessions           int `json:"sessions"`
	MaxSessions        int `json:"max_sessions"`
	MaxSessionsPerPeer int `json:"max_sessions_per_peer"`
	Streams            int `json:"streams"`
	Listens            int `json:"listens"`
	// Requests2026 and RequestsLegacy count the requests admitted since
	// the start, by era.
	Requests2026   uint64 `json:"requests_2026"`
	RequestsLegacy uint64 `json:"requests_legacy"`
	// Refused counts the requests refused before they were served, by
	// reason (transport/http Stats.Refused): "host", "origin",
	// "unauthorized", "peer", "sessions", "peer_sessions", and "view" (a
	// named view's own rule: allowed_uids, http.tokens; docs/views.md).
	Refused map[string]uint64 `json:"refused,omitempty"`
	// Statuses counts the HTTP listener's responses by status.
	Statuses map[int]uint64 `json:"statuses,omitempty"`
}

// The states of an upstream instance (docs/upstreams.md §8).
const (
	StateStopped  = "stopped"  // no process; lazy and manual instances start here
	StateStarting = "starting" // spawned: era probe, handshake, listing
	StateReady    = "ready"    // serving
	StateBackoff  = "backoff"  // exited or failed to start; the next attempt is scheduled
	StateFailed   = "failed"   // restart.max_attempts failures in a row: no automatic restart
	StateDisabled = "disabled" // disabled in the configuration
	StateDraining = "draining" // replaced or removed by a reload: finishing its requests
)

// Upstream is one row of a hosted server (docs/upstreams.md §8): one per
// instance, or one per upstream that has none yet.
type Upstream struct {
	Name string `json:"name"`
	// State is one of the State constants.
	State string `json:"state"`
	// Instance is the share key: "all", the directory of a cwd instance,
	// "session N".
	Instance string `json:"instance"`
	Share    string `json:"share"`
	Start    string `json:"start"`
	PID      int    `json:"pid,omitempty"`
	// URL is a remote server's (the values of its query hidden), which
	// has no process; Auth its authorization: "ok (expires in 52m)",
	// "login required", "refresh failed: <reason>", "" when it asked for
	// none.
	URL  string `json:"url,omitempty"`
	Auth string `json:"auth,omitempty"`
	// Era is "legacy" or "2026"; Version the protocol version spoken.
	Era     string `json:"era,omitempty"`
	Version string `json:"version,omitempty"`
	// Server is the upstream's serverInfo name and version.
	Server string    `json:"server,omitempty"`
	Since  time.Time `json:"since,omitzero"` // ready since
	// StartingSince is when the start under way began (state starting);
	// PID is the process's from its spawn on.
	StartingSince time.Time `json:"starting_since,omitzero"`
	// Restarts counts every restart of the instance's process: a crash
	// restarted, or snodod upstream restart; ManualRestarts the latter.
	Restarts       int `json:"restarts"`
	ManualRestarts int `json:"manual_restarts"`
	// Failures counts consecutive failed starts or crashes; Cause the
	// last one's reason; RetryInMs when the next attempt is due (for a
	// failed one: from when a request may try again).
	Failures  int    `json:"failures"`
	Cause     string `json:"cause,omitempty"`
	LastExit  string `json:"last_exit,omitempty"`
	RetryInMs *int64 `json:"retry_in_ms,omitempty"`
	InFlight  int    `json:"in_flight"`
	Queued    int    `json:"queued"`
	// Sessions counts the sessions that used it: those that pass it
	// through, and those of the aggregated view that sent it a request.
	Sessions  int `json:"sessions"`
	Tools     int `json:"tools"`
	Prompts   int `json:"prompts"`
	Resources int `json:"resources"`
	Templates int `json:"templates"`
	// Cached is true when the counts come from the catalog cache.
	Cached bool `json:"cached"`
	// Hidden are the items its filters leave out; Collided the names it
	// could not take in the aggregated view; Shortened the names cut to
	// fit.
	Hidden       []string `json:"hidden,omitempty"`
	Collided     []string `json:"collided,omitempty"`
	Shortened    []string `json:"shortened,omitempty"`
	Unattributed int      `json:"unattributed"`
	Dropped      int      `json:"dropped_notifications"`
	Subscribed   int      `json:"subscribed"`
	// Refused are the server's requests (sampling, elicitation, roots,
	// ping) refused -32603 at once, or dropped, because
	// upstreams.max_server_requests of them already waited: for one
	// session's client, or on this instance.
	Refused int `json:"refused_requests"`
	// Truncated says which of its lists were cut at their bounds (10,000
	// items, 100 pages), from the catalog.
	Truncated []string `json:"truncated,omitempty"`
	// Changed and New are the tools its pins hold out of every view
	// until `snodod approve NAME [TOOL]` (pin = true): their definitions
	// changed since they were pinned, or they are new; Quarantined is set
	// while it lists nothing until approved (quarantine = true).
	Changed     []string `json:"changed_tools,omitempty"`
	New         []string `json:"new_tools,omitempty"`
	Quarantined bool     `json:"quarantined,omitempty"`

	// Sandbox is the sandbox level in force for its process (standard,
	// strict; "off" for an unconfined one; "" for a remote server), from
	// the launcher's report once it started; Unenforced what that level
	// asks for and this kernel did not enforce (docs/security.md,
	// "Sandbox").
	Sandbox    string   `json:"sandbox,omitempty"`
	Unenforced []string `json:"unenforced,omitempty"`
	// CPUMs and RSSBytes are what its running process and the whole tree
	// under it use: CPU time (user and system, reaped children included)
	// in milliseconds, resident memory summed over the tree's processes.
	CPUMs    int64 `json:"cpu_ms,omitempty"`
	RSSBytes int64 `json:"rss_bytes,omitempty"`
}
