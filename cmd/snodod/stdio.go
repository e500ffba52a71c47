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
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

func stdioUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod stdio [flags] [NAME]

Serves one MCP session over newline-delimited JSON-RPC on this process's
standard input and output, with no daemon. The hosted servers of the
configuration (mcpServers) run inside this process, for this session only:
all of them in the aggregated view, or NAME alone passed through. Standard output carries protocol
frames only; logs, and anything else the process prints, go to standard error.

It exits 0 once input has ended and every admitted request has finished
(SIGINT and SIGTERM end input early), 1 after a terminal failure such as a
write that timed out or an invalid configuration, and 2 on a usage error.

It reads the same configuration as 'snodod serve' (the defaults, the file,
SNODOD_* environment variables; see 'snodod config print'). The limit flags
are shortcuts for their keys and win over it; a limit of 0 leaves the
configured value.

Flags:
`)
	fs, _ := stdioFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// stdioOptions are the flags of snodod stdio.
type stdioOptions struct {
	demo    bool
	config  string
	session stdio.Transport
	limits  server.ExecutorLimits
}

func stdioFlags() (*flag.FlagSet, *stdioOptions) {
	o := &stdioOptions{}
	fs := newFlagSet("stdio")
	fs.BoolVar(&o.demo, "demo", false, "register the demo tools (echo, sleep, big, fail, panic) and the conformance fixture")
	fs.StringVar(&o.config, "config", "", "the configuration `file` (default: $XDG_CONFIG_HOME/snodod/config.toml, if it exists)")
	fs.IntVar(&o.session.MaxLineBytes, "max-line-bytes", stdio.DefaultMaxLineBytes, "longest input line, in bytes, its newline included")
	fs.IntVar(&o.session.MaxSubscriptions, "max-subscriptions", stdio.DefaultMaxSubscriptions, "how many subscriptions (listen streams and resource subscriptions) the session may hold")
	fs.DurationVar(&o.session.WriteTimeout, "write-timeout", stdio.DefaultWriteTimeout, "how long writing one frame may take before the session ends")
	fs.DurationVar(&o.limits.RequestTimeout, "request-timeout", server.DefaultRequestTimeout, "how long one request may run")
	fs.IntVar(&o.limits.MaxConcurrency, "max-concurrency", server.DefaultMaxConcurrency, "how many requests may run at once")
	fs.IntVar(&o.limits.MaxQueue, "max-queue", server.DefaultMaxQueue, "how many admitted requests may wait for a free slot")
	return fs, o
}

func runStdio(args []string) int {
	fs, o := stdioFlags()
	view, status, done := parseFlagsAndName(fs, args, stdioUsage)
	if done {
		return status
	}
	started := time.Now()
	cfg := loadConfig("stdio", config.Options{File: o.config, Overrides: stdioOverrides(fs, o), Flags: stdioFlagNames})
	if cfg == nil {
		return exitFailure
	}
	slog.SetDefault(newLogger(cfg, new(slog.LevelVar)))
	// Positive flags are in cfg already; a negative one stays, for
	// Validate to refuse as a usage error below.
	t := &o.session
	t.MaxLineBytes = negativeOr(t.MaxLineBytes, cfg.Session.MaxLineBytes)
	t.WriteTimeout = negativeOr(t.WriteTimeout, cfg.Session.WriteTimeout)
	t.MaxSubscriptions = negativeOr(t.MaxSubscriptions, cfg.Session.MaxSubscriptions)
	t.ShutdownGrace = cfg.Daemon.ShutdownGrace
	o.limits.RequestTimeout = negativeOr(o.limits.RequestTimeout, cfg.Session.RequestTimeout)
	o.limits.MaxConcurrency = negativeOr(o.limits.MaxConcurrency, cfg.Executor.MaxConcurrency)
	o.limits.MaxQueue = negativeOr(o.limits.MaxQueue, cfg.Executor.MaxQueue)
	var register func(*server.Server)
	if o.demo {
		register = demoCatalog
	}
	host := catalog.NewHost(catalog.HostOptions{Build: catalog.Build{Version: buildVersion(), Started: started}, Register: register})
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
	// Standard output is taken below, once the flags are known to be valid.
	t.In, t.Out, t.Dispatcher = os.Stdin, os.Stdout, srv
	if view != "" && cfg.Upstream(view) == nil {
		return usageError(fs.Name(), unknownUpstream(cfg, view))
	}
	if len(cfg.MCPServers) > 0 || view != "" {
		disp, stopUpstreams, err := hostUpstreams(cfg, srv, view)
		if err != nil {
			return fail(err)
		}
		defer stopUpstreams()
		t.Dispatcher = disp
	}
	if err := errors.Join(t.Validate(), o.limits.Validate()); err != nil {
		printConfigError(os.Stderr, "snodod stdio: ", err)
		fmt.Fprintln(os.Stderr, "Run 'snodod stdio --help' for the flags and their defaults.")
		return exitUsage
	}
	exec, err := server.NewExecutor(o.limits)
	if err != nil {
		return fail(err)
	}
	defer exec.Close()
	t.Executor = exec

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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal, a second one kills the process at once.
	context.AfterFunc(ctx, stop)

	slog.Info("serving one MCP session on stdin and stdout", "version", buildVersion(), "demo", o.demo)
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

// stdioFlagNames names the flag of each key stdio's flags set.
var stdioFlagNames = map[string]string{
	"session.max_line_bytes":    "--max-line-bytes",
	"session.max_subscriptions": "--max-subscriptions",
	"session.write_timeout":     "--write-timeout",
	"session.request_timeout":   "--request-timeout",
	"executor.max_concurrency":  "--max-concurrency",
	"executor.max_queue":        "--max-queue",
}

// stdioOverrides returns the configuration keys set by the limit flags
// given with a positive value: 0 means "as configured", and a negative
// value is refused by the transport's own validation, as before the
// configuration existed.
func stdioOverrides(fs *flag.FlagSet, o *stdioOptions) map[string]any {
	values := map[string]any{
		"--max-line-bytes":    o.session.MaxLineBytes,
		"--max-subscriptions": o.session.MaxSubscriptions,
		"--write-timeout":     o.session.WriteTimeout,
		"--request-timeout":   o.limits.RequestTimeout,
		"--max-concurrency":   o.limits.MaxConcurrency,
		"--max-queue":         o.limits.MaxQueue,
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set["--"+f.Name] = true })
	out := map[string]any{}
	for key, name := range stdioFlagNames {
		switch v := values[name].(type) {
		case int:
			if set[name] && v > 0 {
				out[key] = v
			}
		case time.Duration:
			if set[name] && v > 0 {
				out[key] = v
			}
		}
	}
	return out
}

// negativeOr returns flag when it is negative (invalid, to be reported),
// else the configured value.
func negativeOr[T int | time.Duration](flag, configured T) T {
	if flag < 0 {
		return flag
	}
	return configured
}

// fail reports a terminal failure in one line on standard error.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "snodod stdio: %v\n", err)
	return exitFailure
}

// demoCatalog registers the demo tools and the conformance fixture, as
// --demo asks of serve and stdio.
func demoCatalog(s *server.Server) {
	catalog.Demo(s)
	catalog.Everything(s)
}
