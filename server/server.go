package server

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/protocol"
)

// Options configure a Server. Zero values mean the defaults.
type Options struct {
	// Info is the serverInfo. Name defaults to "snodod" and Version to
	// "dev": a program sets its own (cmd/snodod passes the version of its
	// build).
	Info protocol.Implementation
	// Instructions, when set, are sent by initialize and server/discover.
	Instructions string
	// Versions are the enabled protocol versions; empty means all three.
	Versions []string
	// CacheTTL and CacheScope fill ttlMs and cacheScope of 2026 results
	// (docs/protocol.md §10.2). CacheScope is "private" (default) or "public".
	CacheTTL   time.Duration
	CacheScope string
	// SubscribableResources advertises resources.subscribe: the catalog
	// reports resource updates through ResourceUpdated.
	SubscribableResources bool
	// Logger receives the runtime's diagnostics; nil means slog.Default().
	Logger *slog.Logger
	// StateKey, when set (at least MinStateKeyBytes), signs requestState
	// and cursors instead of a random per-process key (statekey.go).
	StateKey []byte
}

// Server is the MCP runtime: one catalog of tools, resources, templates,
// prompts and completions shared by every session of a process, and the
// Dispatcher that serves the three protocol versions over any transport.
// Its methods may be called from any goroutine, also while serving;
// catalog changes notify subscribed sessions.
type Server struct {
	opts     Options
	log      *slog.Logger
	versions protocol.Versions
	hub      *hub
	signer   *signer
	// ident is what the server says about itself (identity.go); a
	// pass-through view learns it from its upstream, so it may change.
	ident atomic.Pointer[identity]

	mu       sync.RWMutex
	revision uint64 // catalog revision, bumped by every change
	// caps is what the catalog advertises, replaced under mu by every
	// change and read without the lock: every request reads it, and a
	// read lock taken by both cores costs a cache line's trip.
	caps      atomic.Pointer[protocol.ServerCapabilities]
	tools     map[string]*toolEntry
	resources map[string]*resourceEntry
	templates map[string]*templateEntry
	// templateOrder is templates' keys, sorted: the order a read tries
	// them in, kept by updateCapabilitiesLocked, which every change of
	// the catalog calls, so that a read sorts nothing.
	templateOrder []string
	prompts       map[string]*promptEntry
	ext           extensions // relay hooks (relay_hooks.go)
	// start is SetStartHook's (caller.go), read without the lock on
	// every request.
	start atomic.Pointer[StartHook]
	// observer is SetObserver's (observe.go).
	observer atomic.Pointer[observerBox]
}

// Each entry is a registered item, or a relayed one (relay non-nil: the
// other fields are zero but match, relay.go).

type toolEntry struct {
	tool          Tool
	handler       ToolHandler
	input, output *schema           // compiled once at registration; output nil without OutputSchema
	paramHeaders  map[string]string // ToolParamHeaders', found at registration
	relay         *relayItem
}

type resourceEntry struct {
	resource Resource
	handler  ResourceHandler
	relay    *relayItem
}

type templateEntry struct {
	template    ResourceTemplate
	handler     ResourceHandler
	match       *uriTemplate
	completions map[string]CompletionHandler
	relay       *relayItem
}

type promptEntry struct {
	prompt      Prompt
	handler     PromptHandler
	completions map[string]CompletionHandler
	relay       *relayItem
}

// ErrResourceNotFound is returned by a ResourceHandler for a URI it does
// not have; the client gets "Resource not found".
var ErrResourceNotFound = errors.New("resource not found")
