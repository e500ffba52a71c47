package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon"
	"github.com/snodod/snodod/internal/proc"
)

func serveUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod serve [flags]

Runs the daemon: every connection to the session socket is an MCP session,
and 'snodod connect' hands a client's standard input and output over the
control socket. Under systemd the sockets may be passed in (socket
activation: FileDescriptorName=session and control) and the daemon reports
its state with sd_notify.

Configuration: the defaults, then the file (--config, or
$XDG_CONFIG_HOME/snodod/config.toml), then SNODOD_* environment variables,
then these flags; see 'snodod config print' and docs/config.md.

Signals: SIGHUP reloads the configuration (new sessions use it; an invalid
one is refused with every problem logged, and the running one stays).
SIGTERM or SIGINT drains: no new sessions, running requests finish within
daemon.shutdown_grace, then exit 0; 'snodod status' answers "draining"
meanwhile. A second signal exits at once, with status 1. SIGUSR2 upgrades,
as 'snodod upgrade' does: a new process takes the sockets and every session
(docs/operations.md).

Its log goes to standard error (log.level, log.format); the newest 256 KiB
of it are also kept in memory, as text, for 'snodod logs'. 'snodod connect'
starts this command in the background when no daemon answers (its log then
in $XDG_STATE_HOME/snodod/daemon.log).

Exit status: 0 after a drain; 1 when the daemon cannot start (another one
is running, or the configuration is invalid: every problem is listed).

Flags:
`)
	fs, _ := serveFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

type serveOptions struct {
	config string
	keys   *keyFlags
}

func serveFlags() (*flag.FlagSet, *serveOptions) {
	o := &serveOptions{}
	fs := newFlagSet("serve")
	fs.StringVar(&o.config, "config", "", "the configuration `file` (default: $XDG_CONFIG_HOME/snodod/config.toml, if it exists)")
	o.keys = addKeyFlags(fs, allKeys)
	return fs, o
}

// subreaper makes the process a child subreaper before it starts any
// child, so that what hosted servers and exec tools leave behind is
// reparented to it, to be stopped with their group and reaped
// (internal/proc). Where that fails, stops reach what stays in the tree.
func subreaper() {
	if err := proc.Subreaper(); err != nil {
		slog.Warn("processes that leave their parent will be reparented to init, out of reach of their group's stop", "err", err)
	}
}

func runServe(args []string) int {
	fs, o := serveFlags()
	if status, done := parseFlags(fs, args, serveUsage); done {
		return status
	}
	// Started by an upgrade: the running daemon waits on this descriptor
	// for the sockets and sessions (docs/operations.md).
	upgrade := upgradeSocket()
	opts := o.keys.options(o.config)
	cfg, status := loadConfig("serve", opts)
	if cfg == nil {
		daemon.RefuseUpgrade(upgrade, errors.New("the new binary refused the configuration; its log (standard error) lists why"))
		return status
	}
	level := new(slog.LevelVar)
	log := newLogger(cfg, level)
	slog.SetDefault(log)
	subreaper()

	d, err := daemon.New(cfg, daemon.Options{
		// A reload reads the same file and environment, and the flags
		// given at start still win.
		Reload:   func() (*config.Config, error) { return config.Load(opts) },
		OnReload: func(c *config.Config) { level.Set(parseLevel(c.Log.Level)) },
		Version:  buildVersion(),
		Logger:   log,
		// An upgrade starts the new binary as this one was started.
		UpgradeArgs: os.Args[1:],
		Upgrade:     upgrade,
	})
	if err != nil {
		daemon.RefuseUpgrade(upgrade, err)
		fmt.Fprintf(os.Stderr, "snodod serve: %v\n", err)
		return exitFailure
	}
	// The daemon keeps its newest log lines for `snodod logs`; what other
	// packages log to the default logger is kept with them.
	log = d.Logger()
	slog.SetDefault(log)
	// Writing to a client that went away fails with EPIPE instead of
	// killing the daemon.
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := stopOnSignal(log, nil)
	defer stop()
	// "started" is logged once the sockets are bound: a daemon that cannot
	// start (another one runs) says only why, in one line.
	running := make(chan struct{})
	defer close(running)
	go func() {
		select {
		case <-d.Ready():
			log.Info("snodod started", "version", buildVersion(), "pid", os.Getpid(), "config", orDefault(cfg.File()), "demo", cfg.Server.Demo)
		case <-running:
		}
	}()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "snodod serve: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// upgradeSocket returns the private socket of the upgrade that started
// this process, or nil; the variable is unset, so that no process this one
// starts takes it for its own.
func upgradeSocket() *os.File {
	v := os.Getenv(daemon.UpgradeEnv)
	if v == "" {
		return nil
	}
	os.Unsetenv(daemon.UpgradeEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		fmt.Fprintf(os.Stderr, "snodod serve: ignoring %s=%q: not a descriptor\n", daemon.UpgradeEnv, v)
		return nil
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "upgrade socket")
}

func orDefault(file string) string {
	if file == "" {
		return "(defaults)"
	}
	return file
}
