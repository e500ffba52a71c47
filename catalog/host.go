package catalog

import (
	"errors"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

// Host keeps the daemon's server across reloads, so that a reload reaches
// the sessions already running: they hold the server, and Apply replaces
// its configured items in place, announcing each list that changed
// (legacy list_changed notifications, 2026 listen streams) and stopping
// the watches of folders removed or changed.
//
// The server itself is built again only when what it says about itself
// changes (server.*, protocol.versions): its options are fixed at
// server.New. It advertises resources.subscribe whenever it has resources,
// as configured folders report their files' updates. Sessions started
// before such a reload keep the previous server with its items as they
// were, without file-change notifications; new sessions get the new one.
//
// Its methods may be called from any goroutine.
type Host struct {
	build    Build
	register func(*server.Server)
	reserved func() Reserved
	log      *slog.Logger

	mu     sync.Mutex
	srv    *server.Server
	key    serverKey
	items  *configured
	closed bool
}

// HostOptions configure a Host.
type HostOptions struct {
	Build Build
	// Register adds tools, resources and prompts of the caller's to every
	// server the Host builds, after the status tool and the demo catalog
	// (when server.demo is set) and before the configured items.
	Register func(*server.Server)
	// Reserved, when set, names what else the view serves (an aggregated
	// view's upstream tools and prompts): configured items may not take
	// those names. It is called on every Apply.
	Reserved func() Reserved
	// Logger receives the catalog's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// NewHost returns a Host with no server yet: the first Apply builds it.
func NewHost(o HostOptions) *Host {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Host{build: o.Build, register: o.Register, reserved: o.Reserved, log: log}
	h.build.Warnings = h.Warnings // the status tool shows them
	return h
}

// serverKey is what server.New fixes: a change builds a new server.
type serverKey struct {
	name, version, title, description, website string
	instructions                               string
	versions                                   string
	cacheTTL                                   time.Duration
	cacheScope                                 string
	demo                                       bool
}

func keyOf(cfg *config.Config) serverKey {
	return serverKey{
		name: cfg.Server.Name, version: cfg.Server.Version, title: cfg.Server.Title,
		description: cfg.Server.Description, website: cfg.Server.WebsiteURL,
		instructions: cfg.Server.Instructions,
		versions:     strings.Join(cfg.Protocol.Versions, ","),
		cacheTTL:     cfg.Server.CacheTTL,
		cacheScope:   cfg.Server.CacheScope,
		demo:         cfg.Server.Demo,
	}
}

// Apply makes the server serve cfg's tools, resources and prompts and
// returns the server new sessions use. Every problem Check finds refuses
// the whole configuration (a *config.ValidationError) and changes
// nothing; cfg's warnings are logged. After Close it fails.
func (h *Host) Apply(cfg *config.Config) (*server.Server, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errors.New("catalog: Apply after Close")
	}
	key := keyOf(cfg)
	srv, fresh := h.srv, h.srv == nil || key != h.key
	if fresh {
		var err error
		if srv, err = NewServer(cfg, h.build, h.log); err != nil {
			return nil, err
		}
		if cfg.Server.Demo { // server.demo, or --demo
			Demo(srv)
			Everything(srv)
		}
		if h.register != nil {
			h.register(srv)
		}
	}
	if problems := Check(cfg, h.reservedOn(srv, fresh)); len(problems) > 0 {
		return nil, &config.ValidationError{File: cfg.File(), Problems: problems}
	}
	if fresh {
		if h.items != nil {
			h.items.close()
		}
		h.srv, h.key, h.items = srv, key, newConfigured(srv, h.log)
	}
	h.items.apply(cfg)
	for _, w := range cfg.Warnings() {
		h.log.Warn("configuration: "+w.String(), "file", cfg.File())
	}
	return srv, nil
}

// reservedOn is what configured items may not be named on srv: what the
// caller reserves, and what srv serves that the configuration did not
// register (the status tool, the demo catalog).
func (h *Host) reservedOn(srv *server.Server, fresh bool) Reserved {
	r := Reserved{Tools: map[string]string{}, Prompts: map[string]string{}}
	if h.reserved != nil {
		extra := h.reserved()
		maps.Copy(r.Tools, extra.Tools)
		maps.Copy(r.Prompts, extra.Prompts)
	}
	ownTools, ownPrompts := map[string]bool{}, map[string]bool{}
	if !fresh && h.items != nil {
		ownTools, ownPrompts = h.items.names()
	}
	for _, n := range srv.ToolNames() {
		if !ownTools[n] {
			r.Tools[n] = "a tool snodod serves itself (" + n + ")"
		}
	}
	for _, n := range srv.PromptNames() {
		if !ownPrompts[n] {
			r.Prompts[n] = "a prompt snodod serves itself (" + n + ")"
		}
	}
	return r
}

// Warnings returns what the configured items could not do (a folder over
// its watch budget, files not listed), for `snodod status`.
func (h *Host) Warnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.items == nil {
		return nil
	}
	return h.items.warnings()
}

// Close ends every watch; the servers go on answering the sessions that
// hold them. Apply fails after it. It is idempotent.
func (h *Host) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.items != nil {
		h.items.close()
	}
	h.closed = true
}
