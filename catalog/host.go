package catalog

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/proc"
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
	attach   func(*server.Server)
	record   func() *proc.GroupRecord
	stateDir string
	log      *slog.Logger

	mu  sync.Mutex
	srv *server.Server
	// own is what srv serves that no configured item may take: its tools
	// and prompts before the configured items and the attached views.
	own   Reserved
	key   serverKey
	items *configured
	// warned holds the warnings of the configuration applied last: a
	// reload logs only those it adds.
	warned map[string]bool
	closed bool
}

// HostOptions configure a Host.
type HostOptions struct {
	Build Build
	// Register adds tools, resources and prompts of the caller's to every
	// server the Host builds, after the status tool and the demo catalog
	// (when server.demo is set) and before the configured items, which may
	// not take their names.
	Register func(*server.Server)
	// Attach, when set, makes every server the Host builds show the items
	// of other servers (the hosted servers' aggregated view), after the
	// configured items: a relayed item yields to a configured one of the
	// same name, which the daemon's own catalog keeps, and the view lists
	// the relayed one as collided (docs/upstreams.md §2).
	Attach func(*server.Server)
	// Record, when set, is the daemon's record of process groups: each
	// exec tool run is recorded there from its start to its end, so that
	// the next daemon ends what a crash left running (proc.KillOrphans).
	// It is called at each run's start and may return nil (no record).
	Record func() *proc.GroupRecord
	// StateDir is the daemon's state directory, where sandboxed exec
	// tools get their private homes (config.Config.SandboxFor); "" means
	// config.StateDir's.
	StateDir string
	// Logger receives the catalog's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// NewHost returns a Host with no server yet: the first Apply builds it.
func NewHost(o HostOptions) *Host {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	h := &Host{build: o.Build, register: o.Register, attach: o.Attach, record: o.Record, stateDir: o.StateDir, log: log}
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
	own := h.own
	if fresh {
		own = ownNames(srv)
	}
	if problems := Check(cfg, own); len(problems) > 0 {
		return nil, &config.ValidationError{File: cfg.File(), Problems: problems}
	}
	if fresh {
		if h.items != nil {
			h.items.close()
		}
		h.srv, h.own, h.key, h.items = srv, own, key, newConfigured(srv, h.log, h.record, h.stateDir)
	}
	h.items.apply(cfg)
	if fresh && h.attach != nil {
		h.attach(srv)
	}
	// Only the warnings this configuration adds: config check prints them
	// all, and a reload that keeps one does not repeat it.
	warned := map[string]bool{}
	for _, w := range cfg.Warnings() {
		line := w.String()
		if !h.warned[line] {
			h.log.Warn("configuration: "+line, "file", cfg.File())
		}
		warned[line] = true
	}
	h.warned = warned
	return srv, nil
}

// ownNames is what configured items may not be named on srv, built
// afresh: what it serves before them (the status tool, the demo catalog,
// the caller's Register), each with who serves it.
func ownNames(srv *server.Server) Reserved {
	r := Reserved{Tools: map[string]string{}, Prompts: map[string]string{}}
	for _, n := range srv.ToolNames() {
		r.Tools[n] = "a tool snodod serves itself (" + n + ")"
	}
	for _, n := range srv.PromptNames() {
		r.Prompts[n] = "a prompt snodod serves itself (" + n + ")"
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
