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
	"strings"
	"syscall"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

func stdioUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod stdio [flags]

Serves one MCP session over newline-delimited JSON-RPC on this process's
standard input and output, with no daemon. Standard output carries protocol
frames only; logs, and anything else the process prints, go to standard error.

It exits 0 once input has ended and every admitted request has finished
(SIGINT and SIGTERM end input early), 1 after a terminal failure such as a
write that timed out, and 2 on a usage error. A limit of 0 means its default.

Flags:
`)
	fs, _ := stdioFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// stdioOptions are the flags of snodod stdio.
type stdioOptions struct {
	demo    bool
	session stdio.Transport
	limits  server.ExecutorLimits
}

func stdioFlags() (*flag.FlagSet, *stdioOptions) {
	o := &stdioOptions{}
	fs := newFlagSet("stdio")
	fs.BoolVar(&o.demo, "demo", false, "register the demo tools: echo, sleep, big, fail and panic")
	fs.IntVar(&o.session.MaxLineBytes, "max-line-bytes", stdio.DefaultMaxLineBytes, "longest input line, in bytes, its newline included")
	fs.DurationVar(&o.session.WriteTimeout, "write-timeout", stdio.DefaultWriteTimeout, "how long writing one frame may take before the session ends")
	fs.DurationVar(&o.limits.RequestTimeout, "request-timeout", server.DefaultRequestTimeout, "how long one request may run")
	fs.IntVar(&o.limits.MaxConcurrency, "max-concurrency", server.DefaultMaxConcurrency, "how many requests may run at once")
	fs.IntVar(&o.limits.MaxQueue, "max-queue", server.DefaultMaxQueue, "how many admitted requests may wait for a free slot")
	return fs, o
}

func runStdio(args []string) int {
	fs, o := stdioFlags()
	if status, done := parseFlags(fs, args, stdioUsage); done {
		return status
	}
	started := time.Now()
	srv := server.New(server.Info{Name: "snodod", Version: buildVersion()})
	catalog.Status(srv, buildVersion(), started)
	if o.demo {
		catalog.Demo(srv)
	}
	t := &o.session
	t.In, t.Out, t.Dispatcher = os.Stdin, os.Stdout, srv
	if err := errors.Join(t.Validate(), o.limits.Validate()); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(os.Stderr, "snodod stdio: %s\n", line)
		}
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

// fail reports a terminal failure in one line on standard error.
func fail(err error) int {
	fmt.Fprintf(os.Stderr, "snodod stdio: %v\n", err)
	return exitFailure
}
