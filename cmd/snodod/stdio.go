package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/transport/stdio"
)

func stdioUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod stdio [flags] [NAME]

Serves one MCP session over newline-delimited JSON-RPC on this process's
standard input and output, with no daemon. Standard output carries protocol
frames only; logs, and anything else the process prints, go to standard error.
The hosted servers of the configuration (mcpServers) run inside this
process, for this session only: all of them in the aggregated view, or NAME
alone passed through.

It exits 0 once input has ended and every admitted request has finished
(SIGINT and SIGTERM end input early; a second signal exits at once, with
status 1), 1 after a terminal failure such as a write that timed out or an
invalid configuration, and 2 on a usage error.

A terminal on standard input is put into raw mode for the session and
restored at exit, as the transport contract wants of a pty: lines of any
length pass, nothing is echoed or edited. --cooked leaves the terminal's
line discipline, for typing requests by hand (lines are then cut at 4,095
bytes).

It reads the same configuration as 'snodod serve' (the defaults, the file,
SNODOD_* environment variables; see 'snodod config print'). Each flag below
sets its configuration key and wins over them; its value is read and
checked as the key's are, the same way as by 'snodod serve'.

Flags:
`)
	fs, _ := stdioFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// stdioOptions are the flags of snodod stdio.
type stdioOptions struct {
	config string
	cooked bool
	keys   *keyFlags
}

func stdioFlags() (*flag.FlagSet, *stdioOptions) {
	o := &stdioOptions{}
	fs := newFlagSet("stdio")
	fs.StringVar(&o.config, "config", "", "the configuration `file` (default: $XDG_CONFIG_HOME/snodod/config.toml, if it exists)")
	fs.BoolVar(&o.cooked, "cooked", false, "leave a terminal on standard input in its line discipline (echo, line editing), to type requests by hand; lines over 4,095 bytes are then cut")
	o.keys = addKeyFlags(fs, sessionKeys)
	return fs, o
}

func runStdio(args []string) int {
	fs, o := stdioFlags()
	view, status, done := parseFlagsAndName(fs, args, stdioUsage)
	if done {
		return status
	}
	started := time.Now()
	cfg, status := loadConfig("stdio", o.keys.options(o.config))
	if cfg == nil {
		return status
	}
	slog.SetDefault(newLogger(cfg, new(slog.LevelVar)))
	subreaper()
	if view != "" && cfg.Upstream(view) == nil {
		return usageError(fs.Name(), unknownUpstream(cfg, view))
	}
	ups, err := stdioUpstreams(cfg, view)
	if err != nil {
		return fail(err)
	}
	// The demo catalog (server.demo) comes with the Host; the hosted
	// servers join each server it builds, after the configured items,
	// which keep their names (docs/upstreams.md §2).
	host := catalog.NewHost(catalog.HostOptions{Build: catalog.Build{Version: buildVersion(), Started: started}, Attach: ups.attach})
	defer host.Close() // the configured folders' watches
	srv, err := host.Apply(cfg)
	if err != nil {
		printConfigError(os.Stderr, "snodod stdio: ", err)
		return exitFailure
	}
	// Standard input stays as it is, usually blocking: a read(2) that
	// waits costs less per line than the poller's EAGAIN, epoll_pwait and
	// wake-up (server CPU per pipelined call, medians of 3 runs of the
	// harness: 13.8 against 15.3 us for 2025-06-18, 15.8 against 18.0 for
	// 2026-07-28). Only one session reads it, so no thread is saved.
	// The transport makes its executor from the limits and closes it.
	t := &stdio.Transport{In: os.Stdin, Dispatcher: srv, Limits: cfg.Limits}
	if ups != nil {
		disp, state, stopUpstreams, err := ups.session(cfg, srv, view)
		if err != nil {
			return fail(err)
		}
		defer stopUpstreams()
		t.Dispatcher, t.State = disp, state
	}

	restoreTerminal, err := stdioTerminal(o.cooked)
	if err != nil {
		return fail(err)
	}
	defer restoreTerminal()
	out, restore, err := takeStdout()
	if err != nil {
		return fail(err)
	}
	defer out.Close()
	defer restore()
	t.Out = out

	// A client that stops reading standard error must not kill the
	// session: with SIGPIPE ignored, writes to a closed pipe fail with
	// EPIPE instead (a failed frame then ends the session with status 1).
	signal.Ignore(syscall.SIGPIPE)
	ctx, stop := stopOnSignal(slog.Default(), restoreTerminal)
	defer stop()

	slog.Info("serving one MCP session on stdin and stdout", "version", buildVersion(), "demo", cfg.Server.Demo)
	err = t.Serve(ctx)
	if err != nil && !(ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		return fail(err)
	}
	if ctx.Err() != nil {
		slog.Info("session ended by a signal", "after", time.Since(started).Round(time.Millisecond))
	} else {
		slog.Info("session ended: input closed", "after", time.Since(started).Round(time.Millisecond))
	}
	return exitOK
}

// fail reports a terminal failure in one line on standard error.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "snodod stdio: %v\n", err)
	return exitFailure
}
