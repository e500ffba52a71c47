package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/metrics"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/tracing"
	mcphttp "github.com/snodod/snodod/transport/http"
	"github.com/snodod/snodod/transport/stdio"
	"github.com/snodod/snodod/upstream"
)

// drainMargin is added to daemon.shutdown_grace to bound a whole drain:
// sessions stop within the grace, and the margin covers their last writes
// and the supervisors' bookkeeping.
const drainMargin = 2 * time.Second

// Options configure a Daemon beyond its configuration.
type Options struct {
	// Reload loads the configuration again, for SIGHUP and Reload. It
	// returns a validated configuration, or an error listing every problem
	// (a *config.ValidationError is logged one problem per line). Nil:
	// reloading is refused.
	Reload func() (*config.Config, error)
	// OnReload, when set, is called with each configuration Reload
	// applies, after new sessions start using it (the CLI updates its log
	// level there).
	OnReload func(*config.Config)
	// Catalog registers tools, resources and prompts on every server the
	// daemon builds, after the status tool and before the configured
	// items. The server is kept across reloads (catalog.Host) and rebuilt
	// only when server.* or protocol.versions change.
	Catalog func(*server.Server)
	// Version is the build version: serverInfo.version when server.version
	// is empty, and what the status tool and `snodod status` report.
	Version string
	// Name is the product's name in the status tool ("Name 1.0.0, up
	// 1h"), and serverInfo.name when the configuration's is empty; empty
	// means "snodod". A program that embeds the daemon names itself here
	// (and may read its own environment variables: config.Options.EnvPrefix).
	Name string
	// StateDir is where the upstreams' catalog cache and process record
	// live; "" means config.StateDir ($XDG_STATE_HOME/snodod).
	StateDir string
	// Logger receives the daemon's log; nil means slog.Default(). The
	// daemon also keeps its newest lines, LogRingBytes of them (0 means
	// DefaultLogRingBytes), for `snodod logs` (logring.go).
	Logger       *slog.Logger
	LogRingBytes int

	// UpgradeArgs are the arguments an upgrade starts the new binary
	// with (upgrade.go): the CLI passes its own, os.Args[1:]. Without
	// them an upgrade is refused.
	UpgradeArgs []string
	// Executable is the binary an upgrade starts when it names none; ""
	// means this process's executable, as it was when New ran.
	Executable string
	// Upgrade, in a process an upgrade started, is its end of the private
	// socket (the descriptor UpgradeEnv names): Run then takes its
	// listeners and sessions from the daemon that started it (adopt.go).
	Upgrade *os.File
}

// Daemon hosts sessions on the session socket and on descriptors handed
// over through the control socket. Its methods may be called from any
// goroutine.
type Daemon struct {
	opts    Options
	log     *slog.Logger
	logs    *logRing // the newest lines of log (logring.go)
	started time.Time
	uid     int
	notify  *notifier
	ups     *upstream.Manager // the hosted servers (upstreams.go)

	// host keeps the server across reloads and serves the configured
	// tools, resources and prompts (catalog.Host).
	host *catalog.Host

	// gen is what new sessions use: the configuration, and the server and
	// executor built from it. Reload replaces it; sessions keep the one
	// they started with.
	gen      atomic.Pointer[generation]
	reloadMu sync.Mutex // one reload at a time
	// refused holds the problems of the last reload when it was refused,
	// nil after a good one: status shows them until then.
	refused atomic.Pointer[[]string]
	// first is the configuration the daemon started with: the one whose
	// sockets and log format stay in force until a restart.
	first *config.Config

	running atomic.Bool // Run was called

	// sessions is the session table (table.go); refusedBy counts the
	// clients it refused, by reason (accept.go).
	sessions  *table
	refusedBy refusals

	sessionsSup *suture.Supervisor
	http        *httpListener // nil without http.listen (http.go)
	// metrics is nil without admin.listen; admin is its listener once
	// bound, adminGate its access rules (admin.go).
	metrics   *metrics.Metrics
	tracing   *tracing.Tracing // nil unless OTEL_* name an endpoint (tracing.go)
	adminMu   sync.Mutex
	admin     *adminListener
	adminGate atomic.Pointer[mcphttp.Gate]
	// audit is the audit log's sink (audit.go).
	audit auditSink
	// origin is where Run takes its listeners and sessions from: new
	// sockets or systemd's (and the sessions kept through a crash), or
	// the daemon that started this one for an upgrade (continuity.go).
	origin origin
	// executable is the binary an upgrade starts by default; upgrades
	// are Run's requests for one (upgrade.go).
	executable string
	upgrades   chan upgradeRequest
	// store is systemd's descriptor store, where the sessions' crash
	// records are kept (crash.go).
	store   *fdStore
	changed chan struct{} // the session count changed (STATUS=)
	ready   chan struct{} // closed once Run serves (tests wait for it)
	stopped chan struct{} // closed when Run returns
	// draining ends when the drain starts: it interrupts control
	// connections still waiting for their request.
	draining   context.Context
	startDrain context.CancelFunc
	// waiters counts control connections waiting for their session's
	// end; late counts the control connections answered during the
	// drain. (The table counts the handshakes and the sessions.)
	waiters, late sync.WaitGroup
	// spare is the descriptor kept to refuse clients at the descriptor
	// limit (fdlimit.go), held while Run serves; fdShort is set while the
	// daemon is out of descriptors, and fdRefused counts the clients
	// refused meanwhile; fdLastShort is when (UnixNano) it last ran out.
	spare       spareFD
	fdShort     atomic.Bool
	fdRefused   atomic.Int64
	fdLastShort atomic.Int64
	// budget bounds the unfinished lines of every session together
	// (daemon.max_buffered_bytes); a reload changes its size.
	budget *stdio.Budget
}

// generation is one configuration and what was built from it.
type generation struct {
	cfg *config.Config
	// limits are cfg.Limits with zero fields at their defaults (a
	// hand-built Config may leave them zero).
	limits  limits.Limits
	srv     *server.Server
	exec    *executor.Executor
	genHold // its views and who holds it (views.go)
}

// New builds the daemon's first generation (catalog, server, shared
// executor) from cfg: config.Load's result, or a Config built by hand, in
// which every zero limit means its default (package limits) and only
// Daemon.Socket must be set. It listens on nothing: Run does.
func New(cfg *config.Config, opts Options) (*Daemon, error) {
	if cfg == nil {
		return nil, errors.New("daemon.New: nil configuration")
	}
	if cfg.Daemon.Socket == "" {
		return nil, errors.New("daemon.New: the configuration names no session socket; set Daemon.Socket, or start from config.Load's defaults")
	}
	d := &Daemon{
		opts:     opts,
		log:      opts.Logger,
		started:  time.Now(),
		uid:      os.Geteuid(),
		changed:  make(chan struct{}, 1),
		ready:    make(chan struct{}),
		stopped:  make(chan struct{}),
		upgrades: make(chan upgradeRequest),
	}
	d.sessions = newTable(d.poke)
	d.origin = d.newOrigin(opts)
	d.opts.Upgrade = nil // the origin's
	d.executable = opts.Executable
	if d.executable == "" {
		d.executable, _ = os.Executable()
	}
	d.draining, d.startDrain = context.WithCancel(context.Background())
	if d.log == nil {
		d.log = slog.Default()
	}
	d.logs = newLogRing(opts.LogRingBytes)
	d.log = slog.New(d.logs.tee(d.log.Handler()))
	d.notify = newNotifier(d.log)
	d.store = newFDStore(d.log)
	d.newMetrics(cfg)
	d.newTracing()
	if err := d.openUpstreams(cfg); err != nil {
		d.flushTracing()
		return nil, err
	}
	d.host = catalog.NewHost(catalog.HostOptions{Build: catalog.Build{Name: opts.Name, Version: d.version(), Started: d.started},
		Register: opts.Catalog, Attach: d.attachUpstreams,
		// Exec tools' runs share the hosted servers' record of groups.
		Record: d.ups.GroupRecord, StateDir: d.ups.StateDir(), Logger: d.log})
	g, err := d.build(cfg, nil)
	if err != nil {
		d.host.Close()
		d.flushTracing()
		return nil, err
	}
	d.attachViews(g, nil)
	d.budget = stdio.NewBudget(g.limits.MaxBufferedBytes)
	d.gen.Store(g)
	d.first = cfg
	return d, nil
}

// sessionQueue is how many requests each session may have waiting for an
// executor slot in places of its own, besides the executor.max_queue
// places all sessions share: however many sessions daemon.max_sessions
// admits, each can have requests waiting, and a few busy sessions cannot
// fill the queue for the others (docs/transport.md §13.2; docs/config.md).
const sessionQueue = 4

// build makes a generation from cfg. The executor of prev is kept when its
// limits are unchanged, so that every session keeps sharing one.
func (d *Daemon) build(cfg *config.Config, prev *generation) (*generation, error) {
	// Before Apply, which changes what running sessions see.
	if err := cfg.Limits.Validate(); err != nil {
		return nil, err
	}
	srv, err := d.host.Apply(cfg)
	if err != nil {
		return nil, err
	}
	lim := cfg.Limits.WithDefaults()
	el := executor.Limits{
		MaxConcurrency: lim.MaxConcurrency,
		MaxQueue:       lim.MaxQueue,
		ConnQueue:      sessionQueue,
		RequestTimeout: lim.RequestTimeout,
	}
	var exec *executor.Executor
	if prev != nil && prev.exec.Limits() == el {
		exec = prev.exec
	} else if exec, err = executor.New(el); err != nil {
		return nil, fmt.Errorf("build the executor: %w", err)
	}
	g := &generation{cfg: cfg, limits: lim, srv: srv, exec: exec}
	if err := d.buildViews(g); err != nil {
		return nil, err
	}
	g.users.Store(1) // the daemon's, while new sessions use it
	return g, nil
}

func (d *Daemon) version() string {
	if d.opts.Version != "" {
		return d.opts.Version
	}
	return "dev"
}

// Ready is closed once Run listens on its sockets and serves; it stays
// open when Run fails before (another daemon is running, say).
func (d *Daemon) Ready() <-chan struct{} { return d.ready }

// Config returns the configuration new sessions use.
func (d *Daemon) Config() *config.Config { return d.gen.Load().cfg }

// Run listens on the session and control sockets (or on the sockets systemd
// passed), serves until ctx ends, then drains: it stops accepting, ends
// every session (each lets its in-flight requests finish within
// daemon.shutdown_grace) and returns nil. SIGHUP reloads the configuration
// while it runs. It returns an error, before serving anything, when it
// cannot listen: an *AlreadyRunningError when another daemon answers.
// Run may be called once.
func (d *Daemon) Run(ctx context.Context) error {
	if !d.running.CompareAndSwap(false, true) {
		return errors.New("daemon: Run called twice")
	}
	defer close(d.stopped)
	defer d.flushTracing()
	defer d.host.Close()                      // the folders' watches
	defer func() { d.gen.Load().release() }() // the views' attachments, the HTTP views' callers
	defer d.startDrain()
	d.spare.mu.Lock()
	d.spare.regain()
	d.spare.mu.Unlock()
	defer d.spare.close()

	cfg := d.Config()
	listeners, httpLn, err := d.origin.listen(cfg)
	if err != nil {
		return err
	}
	rs := &runState{listeners: listeners}
	defer func() {
		for _, l := range listeners {
			if rs.upgraded {
				l.release() // the new process serves them now
			} else {
				l.close()
			}
		}
		d.late.Wait() // control connections answered while draining
	}()

	grace := d.gen.Load().limits.ShutdownGrace + drainMargin
	hook := d.supervisorEvent
	// The supervisors' own stop timeout only decides when suture gives up
	// waiting and logs; the drain below waits for the sessions itself, with
	// the grace of the configuration in force at that time.
	root := suture.New("snodod", suture.Spec{EventHook: hook, Timeout: grace})
	d.sessionsSup = suture.New("sessions", suture.Spec{EventHook: hook, Timeout: grace})
	root.Add(d.sessionsSup)
	rs.root = root
	d.startAccepting(rs)
	if err := d.startHTTP(root, cfg, httpLn); err != nil {
		d.origin.refuse(err)
		return err
	}
	if err := d.startAdmin(cfg); err != nil {
		d.origin.refuse(err)
		return err
	}
	defer d.stopAdmin()
	if err := d.applyAudit(cfg); err != nil {
		d.origin.refuse(err)
		return err
	}
	defer d.closeAudit()
	// The root's context is not ctx: the drain stops the parts in order
	// (listeners, then sessions) instead of all at once.
	rootCtx, cancelRoot := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRoot()
	rootDone := root.ServeBackground(rootCtx)

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	defer signal.Stop(usr2)

	for _, l := range listeners {
		d.log.Info("listening", "socket", l.name, "path", l.path, "activated", !l.created)
	}
	d.checkStore()
	// The sessions a crash or an upgrade left resume, the hosted servers
	// start, and systemd (or the daemon that started this one) is told.
	d.origin.resume(func() { d.startUpstreams(rs) })
	close(d.ready)
	var watchdog <-chan time.Time
	if every := watchdogInterval(d.log); every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		watchdog = t.C
	}
	for {
		select {
		case <-ctx.Done():
			d.drain(rs, cancelRoot, rootDone)
			return nil
		case <-hup:
			_ = d.Reload()
		case <-usr2:
			d.log.Info("SIGUSR2: upgrading", "binary", d.executable)
			if d.upgradeNow(rs, upgradeRequest{}) {
				d.exitUpgraded(cancelRoot, rootDone)
				return nil
			}
		case req := <-d.upgrades:
			if d.upgradeNow(rs, req) {
				d.exitUpgraded(cancelRoot, rootDone)
				return nil
			}
		case <-watchdog:
			d.notify.send("WATCHDOG=1")
		case <-d.changed:
			d.notify.send(d.statusLine())
		case err := <-rootDone:
			// The root supervisor ends only with its context; anything
			// else is a bug, and serving on without it would hide it.
			d.drainSessions()
			return fmt.Errorf("root supervisor ended: %v", err)
		}
	}
}

// listen opens the listeners: the ones systemd passed, else new sockets at
// the configured paths. A control socket systemd did not pass is created.
// It returns the sessions systemd kept through a crash too, by name.
func (d *Daemon) listen(cfg *config.Config) ([]*listener, map[string][]*os.File, error) {
	sessionLn, controlLn, stored, err := activated()
	if err != nil {
		return nil, nil, err
	}
	var ls []*listener
	fail := func(err error) ([]*listener, map[string][]*os.File, error) {
		for _, l := range ls {
			l.close()
		}
		for _, fs := range stored {
			closeFiles(fs)
		}
		return nil, nil, err
	}
	if sessionLn != nil {
		ls = append(ls, &listener{name: "session", path: sessionLn.Addr().String(), ln: sessionLn})
	} else {
		l, err := listenUnix("session", cfg.Daemon.Socket, "daemon.socket", true)
		if err != nil {
			return fail(err) // activated passes a control socket only with a session socket
		}
		ls = append(ls, l)
	}
	if controlLn != nil {
		ls = append(ls, &listener{name: "control", path: controlLn.Addr().String(), ln: controlLn})
	} else {
		path := cfg.Daemon.ControlSocket
		if path == "" { // Load fills it in; a hand-built Config may not
			path = filepath.Join(filepath.Dir(cfg.Daemon.Socket), "control.sock")
		}
		l, err := listenUnix("control", path, "daemon.control_socket", false)
		if err != nil {
			return fail(err)
		}
		ls = append(ls, l)
	}
	return ls, stored, nil
}

// drain ends the daemon: STOPPING=1, stop accepting, let connections in
// their handshake finish, then cancel every session and wait for them,
// bounded by daemon.shutdown_grace plus a margin.
func (d *Daemon) drain(rs *runState, cancelRoot context.CancelFunc, rootDone <-chan error) {
	d.notify.send("STOPPING=1")
	d.startDrain()
	d.log.Info("draining: no new sessions; running ones finish their requests", "sessions", d.count(), "grace", d.gen.Load().limits.ShutdownGrace)
	d.stopAccepting(rs)
	for _, l := range rs.listeners {
		if l.name == "control" {
			d.answerWhileDraining(l) // status says "draining" until Run returns
		} else {
			l.stop()
		}
	}
	d.stopAdmin() // an upgrade's new process binds it again
	httpDone := d.drainHTTP(rs.root)
	defer func() { <-httpDone }()
	d.sessions.close() // from now on no connection is served, no session enters
	d.sessions.awaitHandshakes()
	cancelRoot()
	d.drainSessions()
	select {
	case <-rootDone:
	case <-time.After(time.Second):
	}
	d.log.Info("drained; exiting")
}

// drainSessions waits for every session to end, bounded by the grace.
func (d *Daemon) drainSessions() {
	bound := d.gen.Load().limits.ShutdownGrace + drainMargin
	d.sessions.close() // the drain did; a failed root did not
	done := make(chan struct{})
	go func() {
		d.sessions.wait()
		d.waiters.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(bound):
		d.log.Error("sessions still running after the drain's bound; exiting anyway", "sessions", d.count(), "bound", bound)
	}
}

func (d *Daemon) supervisorEvent(e suture.Event) {
	switch e.Type() {
	case suture.EventTypeStopTimeout, suture.EventTypeServicePanic, suture.EventTypeServiceTerminate, suture.EventTypeBackoff:
		d.log.Warn("supervisor: "+e.String(), "event", e.Type())
	default:
		d.log.Info("supervisor: "+e.String(), "event", e.Type())
	}
}

// count returns the number of sessions, those being admitted included.
func (d *Daemon) count() int { return d.sessions.len() }

func (d *Daemon) statusLine() string {
	return fmt.Sprintf("STATUS=%d sessions (max %d)", d.count(), d.gen.Load().limits.MaxSessions)
}
