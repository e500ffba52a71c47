package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/mcpclient/oauth"
	"github.com/snodod/snodod/server"
)

// drainMargin is added to the stop grace for the supervisors' own stop
// timeout: a process stops within the grace, the margin covers the reap.
const drainMargin = 2 * time.Second

// Options configure a Manager beyond its configuration.
type Options struct {
	// StateDir is the daemon's state directory
	// ($XDG_STATE_HOME/snodod): the catalog cache lives in
	// StateDir/upstreams, the record of running process groups in
	// StateDir/upstreams/<RecordName>.<PID> (proc.GroupRecord), which the
	// daemon's exec tools share (GroupRecord). "" keeps neither.
	StateDir string
	// RecordName names the record of process groups; "" is "groups". A
	// daemon names it after its socket, so that two daemons of one user
	// (tests, a second instance) never kill each other's children.
	RecordName string
	// NoRecord keeps no record of process groups and kills no orphans:
	// for a process whose children die with it (snodod stdio).
	NoRecord bool
	// Home is $HOME, the working directory of share = "all" instances;
	// Cwd is the daemon's working directory, a session's when it sends
	// none. Env is the daemon's environment (os.Environ form), which
	// children inherit from per inherit_env.
	Home, Cwd string
	Env       []string
	// Version is snodod's version, for the clientInfo upstreams see.
	Version string
	// MaxLineBytes bounds an upstream's lines (session.max_line_bytes); 0
	// means limits.DefaultMaxLineBytes.
	MaxLineBytes int
	// ShutdownGrace bounds the stop of every upstream at shutdown
	// (daemon.shutdown_grace); 0 means 10 s.
	ShutdownGrace time.Duration
	// Logger receives the manager's log and the children's stderr, with
	// upstream=NAME; nil means slog.Default().
	Logger *slog.Logger
	// Observer, when set, is told of every request a pass-through view
	// served, its relayed ones owned by the view's upstream
	// (docs/observability.md). The aggregated view's server is the
	// caller's, with its own.
	Observer server.Observer
}

// Manager runs every configured upstream of a daemon (or of one snodod
// stdio process) and serves them to sessions. It is a suture service:
// the daemon adds it to its root supervisor, and it runs one supervisor per
// upstream under its own. Its methods may be called from any goroutine,
// before and while it serves.
type Manager struct {
	opts Options
	log  *slog.Logger
	// limits is the upstreams table of the configuration applied last:
	// Apply replaces it while instances and requests read it.
	limits atomic.Pointer[config.Upstreams]
	sup    *suture.Supervisor
	budget *mcpclient.StderrBudget
	cache  *cache
	parks  *parking
	done   chan struct{} // closed when Serve returns

	// allListed is true when every upstream has a catalog (or is
	// disabled): no request needs to start one before it is served.
	allListed atomic.Bool
	// pins are the records of pinned and quarantined servers (pin.go);
	// pinBlocking is true while one of them holds something, so that a
	// call is checked against them (startHook).
	pins        *pins
	pinBlocking atomic.Bool
	// pingWait, when not 0, replaces pingTimeout (nanoseconds): tests
	// shorten it; it is no configuration key (docs/upstreams.md §4 fixes 10 s).
	pingWait atomic.Int64

	childMu  sync.Mutex
	children int

	// ho hands the servers over at an upgrade, and adopts them in the
	// new daemon (instance_handover.go).
	ho handOver

	// store is the token store of remote servers (oauthStore).
	storeOnce sync.Once
	store     *oauth.Store

	mu    sync.Mutex
	cfg   *config.Config
	ups   map[string]*upstream             // by name
	rings map[string]*mcpclient.StderrRing // by name, kept across reloads
	// passViews are the servers showing an upstream passed through, with
	// its name, and aggregates those showing the aggregated view, with
	// the daemon's own instructions: each attached (AttachView, Attach)
	// until its owner detaches it.
	passViews  map[*server.Server]string
	aggregates map[*server.Server]string
	// named are the servers showing a [views.NAME] view (AttachNamed).
	named        map[*server.Server]*config.View
	clients      map[*server.Caller]*Client // the sessions Open registered
	served       bool
	record       *proc.GroupRecord // opened at the first start (GroupRecord)
	recordFailed bool

	viewMu sync.Mutex // one view refresh at a time
	// collided records, per upstream, the names its items could not take
	// in the aggregated view, for status and config check.
	collided map[string][]string
	// shortened records, per upstream, the names over 64 characters the
	// aggregated view lists shortened ("NAME as SHORT").
	shortened map[string][]string
	// formerOwners are the upstreams the aggregated view relayed at the
	// last refresh, so that a removed one's items are removed.
	formerOwners []string
	// viewTools are the aggregated view's relayed tools as its tool
	// budget ranks and searches them, and metas the names each
	// aggregated server gives search_tools and call_tool (budget.go).
	viewTools map[*server.Server]*viewTools
	metas     map[*server.Server]metaNames
	// usage counts each view's tool calls (usage.go).
	usage *usage
}

// New prepares the upstreams of cfg (none runs before Serve). When
// opts.StateDir is set it first kills the process groups a crashed
// predecessor left (KillOrphans), then records its own there.
func New(cfg *config.Config, opts Options) (*Manager, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = limits.DefaultMaxLineBytes
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 10 * time.Second
	}
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	if opts.Home == "" {
		opts.Home, _ = os.UserHomeDir()
	}
	if opts.Cwd == "" {
		opts.Cwd, _ = os.Getwd()
	}
	m := &Manager{
		opts: opts, log: opts.Logger,
		budget: mcpclient.NewStderrBudget(cfg.Upstreams.StderrTotalBytes),
		done:   make(chan struct{}),
		ups:    map[string]*upstream{}, rings: map[string]*mcpclient.StderrRing{}, passViews: map[*server.Server]string{},
		aggregates: map[*server.Server]string{}, named: map[*server.Server]*config.View{}, clients: map[*server.Caller]*Client{}, collided: map[string][]string{},
		metas: map[*server.Server]metaNames{}, viewTools: map[*server.Server]*viewTools{}, usage: openUsage(opts.StateDir, opts.Logger),
	}
	m.parks = newParking(m)
	m.pins = &pins{dir: opts.StateDir, log: m.log}
	m.cache = &cache{log: m.log}
	if opts.StateDir != "" {
		m.cache.dir = filepath.Join(opts.StateDir, "upstreams")
	}
	m.sup = suture.New("upstreams", suture.Spec{EventHook: m.supervisorEvent, Timeout: m.stopGrace() + drainMargin})
	m.apply(cfg)
	return m, nil
}

// Serve runs the upstreams until ctx ends, then stops every process in
// parallel within the shutdown grace (docs/upstreams.md §4).
func (m *Manager) Serve(ctx context.Context) error {
	m.mu.Lock()
	if m.served {
		m.mu.Unlock()
		return suture.ErrDoNotRestart
	}
	m.served = true
	m.mu.Unlock()
	if m.cache.dir != "" && !m.opts.NoRecord {
		m.killOrphans()
	}
	err := m.sup.Serve(ctx)
	close(m.done)
	m.usage.flush()
	for _, u := range m.sorted() {
		u.remote.close()
	}
	m.mu.Lock()
	if m.record != nil {
		_ = m.record.Close()
	}
	m.mu.Unlock()
	if ctx.Err() != nil {
		return suture.ErrDoNotRestart
	}
	return err
}

func (m *Manager) recordPath() string {
	name := m.opts.RecordName
	if name == "" {
		name = "groups"
	}
	return filepath.Join(m.cache.dir, name)
}

// killOrphans kills the process groups a crashed predecessor recorded
// (matched by pid and start time, so a reused pid is never hit). It runs
// when the manager starts serving, that is once the daemon owns its
// sockets: a second daemon refused for a running one never touches its
// children.
func (m *Manager) killOrphans() {
	path := m.recordPath()
	if n, err := proc.KillOrphans(path, m.log); err != nil {
		m.log.Warn("upstream orphans: cannot read the record of a previous daemon", "path", path, "err", err)
	} else if n > 0 {
		m.log.Warn("killed upstream processes a previous daemon left running", "groups", n, "record", path)
	}
}

// StateDir is the state directory the manager was given ("" for none).
func (m *Manager) StateDir() string { return m.opts.StateDir }

// GroupRecord is the record of this process's groups: the manager's
// instances and the daemon's exec tool runs. It is opened at the first
// start (a daemon that starts no process writes no file); nil without a
// state directory, with NoRecord, or when it cannot be opened (logged
// once). It may be called from any goroutine.
func (m *Manager) GroupRecord() *proc.GroupRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.record != nil || m.cache.dir == "" || m.opts.NoRecord || m.recordFailed {
		return m.record
	}
	rec, err := proc.OpenGroupRecord(m.recordPath(), m.log)
	if err != nil {
		m.recordFailed = true
		m.log.Error("cannot record process groups; a crash of this daemon would leave them running", "path", m.recordPath(), "err", err)
		return nil
	}
	m.record = rec
	return rec
}

// String names the service for suture's logs.
func (m *Manager) String() string { return "upstreams" }

func (m *Manager) stopGrace() time.Duration { return m.opts.ShutdownGrace }

func (m *Manager) supervisorEvent(e suture.Event) {
	switch e.Type() {
	case suture.EventTypeServicePanic, suture.EventTypeServiceTerminate, suture.EventTypeStopTimeout:
		m.log.Warn("upstream supervisor: "+e.String(), "event", e.Type())
	default:
		m.log.Debug("upstream supervisor: "+e.String(), "event", e.Type())
	}
}

// Apply applies a reloaded configuration (docs/upstreams.md §4): an upstream
// whose fingerprint is unchanged is kept with its history (its view
// fields updated: prefix, filters, timeouts, limits); a changed one is
// replaced (the new one starts at once when the old one was running; the
// old one finishes its requests within upstreams.drain_timeout, then
// stops); a removed one is drained and stopped; a new one is started per
// its start policy. The views are recomputed and list changes sent.
func (m *Manager) Apply(cfg *config.Config) {
	m.apply(cfg)
	m.refreshViews()
}

func (m *Manager) apply(cfg *config.Config) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	lim := cfg.Upstreams
	m.limits.Store(&lim)
	seen := map[string]bool{}
	for _, entry := range cfg.MCPServers {
		seen[entry.Name] = true
		old := m.ups[entry.Name]
		if old != nil && old.fingerprint == fingerprint(&entry) && old.conf().Disabled == entry.Disabled {
			old.setConfig(entry)
			continue
		}
		ring := m.rings[entry.Name]
		if ring == nil {
			ring = mcpclient.NewStderrRing(m.budget, cfg.Upstreams.StderrBytes)
			m.rings[entry.Name] = ring
		}
		u := newUpstream(m, entry, ring)
		if old != nil {
			u.eager = old.running()
			m.retire(old)
		}
		m.ups[entry.Name] = u
		u.token = m.sup.Add(u.sup)
	}
	for name, old := range m.ups {
		if !seen[name] {
			delete(m.ups, name)
			m.retire(old)
		}
	}
}

// retire drains old's instances and removes its supervisor once they have
// stopped; m.mu is held.
func (m *Manager) retire(old *upstream) {
	old.mu.Lock()
	old.drained = true
	old.mu.Unlock()
	old.each(func(in *instance) {
		in.send(orderDrain)
		in.abort(errRetired) // a start under way ends now, not at its start_timeout
	})
	go func() {
		deadline := time.Now().Add(m.limits.Load().DrainTimeout + m.stopGrace() + drainMargin)
		for time.Now().Before(deadline) && old.running() {
			select {
			case <-m.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		_ = m.sup.Remove(old.token)
		old.remote.close()
	}()
}

// defaultListWait is upstreams.list_wait's default (config/defaults.toml),
// for a Config that did not come from config.Load (zero means the default).
const defaultListWait = 5 * time.Second

// listWait is upstreams.list_wait (docs/upstreams.md §4).
func (m *Manager) listWait() time.Duration {
	if d := m.limits.Load().ListWait; d > 0 {
		return d
	}
	return defaultListWait
}

// upstream returns the current upstream called name, or nil.
func (m *Manager) upstream(name string) *upstream {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ups[name]
}

// sorted returns the current upstreams in name order.
func (m *Manager) sorted() []*upstream {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*upstream, 0, len(m.ups))
	for _, u := range m.ups {
		out = append(out, u)
	}
	slices.SortFunc(out, func(a, b *upstream) int { return strings.Compare(a.name, b.name) })
	return out
}

// Names returns the configured upstreams' names, sorted.
func (m *Manager) Names() []string {
	var out []string
	for _, u := range m.sorted() {
		out = append(out, u.name)
	}
	return out
}

// reserveChild takes one of upstreams.max_children; false at the limit.
func (m *Manager) reserveChild() bool {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	if m.children >= m.limits.Load().MaxChildren {
		return false
	}
	m.children++
	return true
}

func (m *Manager) releaseChild() {
	m.childMu.Lock()
	m.children--
	m.childMu.Unlock()
}

// atChildLimit reports whether upstreams.max_children processes run.
func (m *Manager) atChildLimit() bool {
	m.childMu.Lock()
	defer m.childMu.Unlock()
	return m.children >= m.limits.Load().MaxChildren
}

// childrenFull is the -31002 failure of a start that would pass
// upstreams.max_children; in.mu must not be held.
func (m *Manager) childrenFull(in *instance) error {
	maxChildren := m.limits.Load().MaxChildren
	f := in.failureNow(CodeLimit, fmt.Sprintf("snodod: upstream %q cannot start: %d upstream processes are running (upstreams.max_children = %d); stop one (snodod upstream stop NAME) or raise the limit",
		in.u.name, maxChildren, maxChildren))
	f.asError = true
	return f
}

// ErrUnknownUpstream is returned for a name no upstream is configured
// with; the error's text lists the configured names.
var ErrUnknownUpstream = errors.New("no such upstream")

func (m *Manager) unknown(name string) error {
	names := m.Names()
	if len(names) == 0 {
		return fmt.Errorf("%w: %q (no mcpServers are configured)", ErrUnknownUpstream, name)
	}
	return fmt.Errorf("%w: %q; the configured upstreams are %s", ErrUnknownUpstream, name, strings.Join(names, ", "))
}

// Has returns nil when name is "" (the aggregated view) or a configured
// upstream, else an error listing the configured ones.
func (m *Manager) Has(name string) error {
	if name == "" || m.upstream(name) != nil {
		return nil
	}
	return m.unknown(name)
}

// Start starts an upstream's shared instance (or clears a manual stop of
// every instance, for cwd and session upstreams, which start on demand),
// as `snodod upstream start NAME` does.
func (m *Manager) Start(name string) error {
	u := m.upstream(name)
	if u == nil {
		return m.unknown(name)
	}
	if u.conf().Disabled {
		return fmt.Errorf("upstream %q is disabled in the configuration; enable it and reload", name)
	}
	u.each(func(in *instance) { in.send(orderRestart) })
	return nil
}

// Stop stops an upstream's instances; they stay stopped until Start or
// Restart (docs/upstreams.md §8).
func (m *Manager) Stop(name string) error {
	u := m.upstream(name)
	if u == nil {
		return m.unknown(name)
	}
	u.each(func(in *instance) {
		in.send(orderStop)
		in.abort(errStopOrdered)
	})
	return nil
}

// Restart stops and starts an upstream's instances, clearing their
// failure count; it never touches another upstream.
func (m *Manager) Restart(name string) error { return m.Start(name) }

// Logs returns the stderr ring of an upstream (every instance's, across
// restarts), for `snodod logs NAME`.
func (m *Manager) Logs(name string) (*mcpclient.StderrRing, error) {
	m.mu.Lock()
	r := m.rings[name]
	m.mu.Unlock()
	if r == nil {
		return nil, m.unknown(name)
	}
	return r, nil
}
