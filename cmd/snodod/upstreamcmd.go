package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/snodod/snodod/daemon"
	"github.com/snodod/snodod/upstream"
)

// The commands of hosted servers (docs/upstreams.md §8): snodod upstream
// start|stop|restart NAME and snodod logs NAME [-f], both through the
// control socket, and the upstream rows of snodod status.

func upstreamUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod upstream start|stop|restart NAME [flags]

Acts on one hosted server (an mcpServers entry) of the running daemon:

  start    starts it (start = "manual"), or clears a stop
  stop     stops its processes; they stay stopped until start or restart
  restart  stops and starts it, clearing its count of failures (a
           "failed" server gets its automatic restarts back)

It never touches another server. snodod status shows the servers.

Flags:
`)
	fs, _ := clientFlagSet("upstream")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runUpstream(args []string) int {
	if len(args) == 0 {
		return usageError("snodod upstream", "needs an action: start, stop or restart")
	}
	action := args[0]
	switch action {
	case "start", "stop", "restart":
	case "-h", "-help", "--help", "help":
		upstreamUsage(os.Stdout)
		return exitOK
	default:
		return usageError("snodod upstream", fmt.Sprintf("unknown action %q; the actions are start, stop and restart", action))
	}
	fs, o := clientFlagSet("upstream " + action)
	name, st, done := parseFlagsAndName(fs, args[1:], upstreamUsage)
	if done {
		return st
	}
	if name == "" {
		return usageError(fs.Name(), "needs the NAME of a server (snodod status lists them)")
	}
	cfg, status := loadClientConfig("upstream", o.keys.options(o.config))
	if cfg == nil {
		return status
	}
	_, control := findDaemon(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := daemon.UpstreamAction(ctx, control, name, action); err != nil {
		return clientFailure("snodod upstream "+action, err)
	}
	return exitOK
}

func clientFlagSet(name string) (*flag.FlagSet, *clientOptions) {
	o := &clientOptions{}
	fs := newFlagSet(name)
	addClientFlags(fs, o)
	return fs, o
}

// clientFailure reports a failed control request in one line.
func clientFailure(name string, err error) int {
	var unreachable *daemon.UnreachableError
	var refused *daemon.RefusedError
	switch {
	case errors.As(err, &unreachable):
		fmt.Fprintf(os.Stderr, "%s: %v; is snodod serve running?\n", name, err)
	case errors.As(err, &refused):
		fmt.Fprintf(os.Stderr, "%s: %s\n", name, refused.Message)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	return exitFailure
}

func logsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod logs NAME [-f] [flags]

Prints what the hosted server NAME wrote to its standard error (the newest
64 KiB, across restarts, upstreams.stderr_bytes), as the daemon keeps it.
With -f it goes on printing what the server writes until interrupted.

Flags:
`)
	fs, _ := logsFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func logsFlags() (*flag.FlagSet, *struct {
	clientOptions
	follow bool
}) {
	o := &struct {
		clientOptions
		follow bool
	}{}
	fs := newFlagSet("logs")
	fs.BoolVar(&o.follow, "f", false, "follow: keep printing what the server writes")
	addClientFlags(fs, &o.clientOptions)
	return fs, o
}

func runLogs(args []string) int {
	fs, o := logsFlags()
	name, st, done := parseFlagsAndName(fs, args, logsUsage)
	if done {
		return st
	}
	if name == "" {
		return usageError(fs.Name(), "needs the NAME of a server (snodod status lists them)")
	}
	cfg, status := loadClientConfig("logs", o.keys.options(o.config))
	if cfg == nil {
		return status
	}
	_, control := findDaemon(cfg)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := daemon.Logs(ctx, control, name, o.follow, func(s string) error {
		_, err := io.WriteString(os.Stdout, s)
		return err
	})
	if err != nil {
		return clientFailure("snodod logs", err)
	}
	return exitOK
}

// writeUpstreams writes the upstream rows of snodod status.
func writeUpstreams(w io.Writer, rows []upstream.Status, now time.Time) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tSTATE\tINSTANCE\tPID\tERA\tUPTIME\tRESTARTS\tIN-FLIGHT\tSESSIONS\tTOOLS\tPROMPTS\tRESOURCES\tLAST EXIT")
	for _, r := range rows {
		pid, up, era := "-", "-", "-"
		if r.PID != 0 {
			pid = fmt.Sprint(r.PID)
		}
		if !r.Since.IsZero() {
			up = age(now, r.Since)
		}
		if r.Era != "" {
			era = r.Era + " " + r.Version
		}
		exit := r.LastExit
		if exit == "" {
			exit = "-"
		}
		counts := func(n int) string {
			if r.Cached {
				return fmt.Sprintf("%d*", n)
			}
			return fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Name, r.State, r.Instance, pid, era, up,
			r.Restarts, r.InFlight, r.Sessions, counts(r.Tools), counts(r.Prompts), counts(r.Resources+r.Templates), exit)
	}
	tw.Flush()
	for _, r := range rows {
		switch {
		case r.State == upstream.StateStarting && !r.StartingSince.IsZero():
			fmt.Fprintf(w, "%s: starting for %s; lists answer without it until it is ready (snodod logs %s)\n", r.Name, age(now, r.StartingSince), r.Name)
		case r.State == upstream.StateBackoff || r.State == upstream.StateFailed:
			next := ""
			if r.RetryInMs != nil {
				next = fmt.Sprintf("; next attempt in %s", (time.Duration(*r.RetryInMs) * time.Millisecond).Round(time.Second))
			}
			fmt.Fprintf(w, "%s: %s after %d failures: %s%s (snodod logs %s)\n", r.Name, r.State, r.Failures, r.Cause, next, r.Name)
		}
		if len(r.Collided) > 0 {
			fmt.Fprintf(w, "%s: not listed in the aggregated view: %s\n", r.Name, strings.Join(r.Collided, ", "))
		}
		for _, cut := range r.Truncated {
			fmt.Fprintf(w, "%s: %s\n", r.Name, cut)
		}
		if len(r.Hidden) > 0 {
			fmt.Fprintf(w, "%s: filtered out: %s\n", r.Name, strings.Join(r.Hidden, ", "))
		}
		if r.Unattributed > 0 {
			fmt.Fprintf(w, "%s: %d requests from the server could not be given to one session; set share = \"session\"\n", r.Name, r.Unattributed)
		}
		if r.Refused > 0 {
			fmt.Fprintf(w, "%s: %d requests from the server refused: upstreams.max_server_requests of them already waited for a client\n", r.Name, r.Refused)
		}
	}
	if anyCached(rows) {
		fmt.Fprintln(w, "* from the catalog cache: the server has not run since the daemon started")
	}
}

func anyCached(rows []upstream.Status) bool {
	for _, r := range rows {
		if r.Cached {
			return true
		}
	}
	return false
}
