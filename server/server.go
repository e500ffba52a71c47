package server

import (
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
)

// Options configure a Server. Zero values mean the defaults.
type Options struct {
	// Info is the serverInfo. Name defaults to "snodod", Version to the
	// build version.
	Info Implementation
	// Instructions, when set, are sent by initialize and server/discover.
	Instructions string
	// Versions are the enabled protocol versions; empty means all three.
	Versions []string
	// CacheTTL and CacheScope fill ttlMs and cacheScope of 2026 results
	// (protocol.md §10.2). CacheScope is "private" (default) or "public".
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
	// infoMeta is each version's {"io.modelcontextprotocol/serverInfo":…}
	// _meta, encoded once: every 2026 result carries it.
	infoMeta map[string]json.RawMessage

	mu        sync.RWMutex
	revision  uint64 // catalog revision, bumped by every change
	caps      protocol.ServerCapabilities
	tools     map[string]*toolEntry
	resources map[string]*resourceEntry
	templates map[string]*templateEntry
	prompts   map[string]*promptEntry
}

type toolEntry struct {
	tool          Tool
	handler       ToolHandler
	input, output *schema // compiled once at registration; output nil without OutputSchema
}

type resourceEntry struct {
	resource Resource
	handler  ResourceHandler
}

type templateEntry struct {
	template    ResourceTemplate
	handler     ResourceHandler
	match       *uriTemplate
	completions map[string]CompletionHandler
}

type promptEntry struct {
	prompt      Prompt
	handler     PromptHandler
	completions map[string]CompletionHandler
}

// ErrResourceNotFound is returned by a ResourceHandler for a URI it does
// not have; the client gets "Resource not found".
var ErrResourceNotFound = errors.New("resource not found")
