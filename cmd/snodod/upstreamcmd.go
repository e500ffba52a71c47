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

	"github.com/snodod/snodod/daemon/control"
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

It never touches another server, and returns once the action is done,
saying what it did: "memory restarted (pid 24758)", or why a start failed
(then the exit status is 1). snodod status shows the servers.

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
	client, ctx, stop, status := controlOf("upstream", o)
	if client == nil {
		return status
	}
	// The daemon bounds the wait (the server's start_timeout); an
	// interrupt ends it sooner.
	defer stop()
	instances, err := client.UpstreamAction(ctx, name, action)
	if err != nil {
		return clientFailure("snodod upstream "+action, err)
	}
	return reportAction(os.Stdout, os.Stderr, name, action, instances)
}

// reportAction says what an upstream action did, one line per instance
// (a shared server has one): "memory restarted (pid 24758)". A start that
// failed is told on standard error, with where to look, and is a failure.
func reportAction(stdout, stderr io.Writer, name, action string, instances []control.Instance) int {
	done := map[string]string{control.ActionStart: "started", control.ActionStop: "stopped", control.ActionRestart: "restarted"}[action]
	if len(instances) == 0 {
		if action == control.ActionStop {
			fmt.Fprintf(stdout, "%s stopped (no instance was running)\n", name)
		} else {
			fmt.Fprintf(stdout, "%s has no instance yet: one starts at the next request that needs it\n", name)
		}
		return exitOK
	}
	status := exitOK
	for _, in := range instances {
		who := name
		if in.Instance != "all" {
			who += " (" + in.Instance + ")"
		}
		switch {
		case action == control.ActionStop && in.State == control.StateStopped:
			fmt.Fprintf(stdout, "%s %s\n", who, done)
		case action != control.ActionStop && in.State == control.StateReady:
			fmt.Fprintf(stdout, "%s %s (pid %d)\n", who, done, in.PID)
		case in.State == control.StateBackoff || in.State == control.StateFailed:
			fmt.Fprintf(stderr, "snodod upstream %s: %s did not start: %s (%s; snodod logs %s)\n", action, who, in.Cause, in.State, name)
			status = exitFailure
		default:
			fmt.Fprintf(stderr, "snodod upstream %s: %s is %s still (snodod status shows when it is done)\n", action, who, in.State)
			status = exitFailure
		}
	}
	return status
}

func clientFlagSet(name string) (*flag.FlagSet, *clientOptions) {
	o := &clientOptions{}
	fs := newFlagSet(name)
	addClientFlags(fs, o)
	return fs, o
}

// controlOf is the control client of the daemon of o's configuration,
// for snodod cmd, and a context an interrupt ends (stop releases it);
// a nil client, with the exit status, when the configuration cannot be
// loaded (loadClientConfig said why).
func controlOf(cmd string, o *clientOptions) (client *control.Client, ctx context.Context, stop context.CancelFunc, status int) {
	cfg, status := loadClientConfig(cmd, o.keys.options(o.config))
	if cfg == nil {
		return nil, nil, nil, status
	}
	_, sock := findDaemon(cfg)
	ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return &control.Client{Socket: sock}, ctx, stop, exitOK
}

// clientFailure reports a failed control request in one line.
func clientFailure(name string, err error) int {
	var unreachable *control.UnreachableError
	var refused *control.RefusedError
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
	fmt.Fprint(w, `Usage: snodod logs [NAME] [-f] [flags]

Prints what the hosted server NAME wrote to its standard error (the newest
64 KiB, across restarts, upstreams.stderr_bytes), as the daemon keeps it:
each line after the time it was written, and a line of snodod's own where
the server started, was ready (with its pid) and ended ("--- snodod:
memory ready (pid 24758) ---").

Without NAME it prints the daemon's own log, its newest 256 KiB (about two
thousand lines, kept in memory whatever log.format says): what a daemon
that 'snodod connect' started in the background, or systemd, logged.

With -f it goes on printing what is written until interrupted.

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
	client, ctx, stop, status := controlOf("logs", &o.clientOptions)
	if client == nil {
		return status
	}
	defer stop()
	err := client.Logs(ctx, name, o.follow, func(s string) error {
		_, err := io.WriteString(os.Stdout, s)
		return err
	})
	if err != nil {
		return clientFailure("snodod logs", err)
	}
	return exitOK
}

// writeUpstreams writes the upstream rows of snodod status.
func writeUpstreams(w io.Writer, rows []control.Upstream, now time.Time) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tSTATE\tINSTANCE\tPID\tERA\tUPTIME\tRESTARTS\tIN-FLIGHT\tSESSIONS\tTOOLS\tPROMPTS\tRESOURCES\tCPU\tRSS\tSANDBOX\tLAST EXIT")
	for _, r := range rows {
		pid, up, era := "-", "-", "-"
		switch {
		case r.PID != 0:
			pid = fmt.Sprint(r.PID)
		case r.URL != "":
			pid = "remote" // its URL and authorization below
		}
		if !r.Since.IsZero() {
			up = age(now, r.Since)
		}
		if r.Era != "" {
			era = r.Era + " " + r.Version
		}
		exit := cut(orDash(r.LastExit), exitWidth) // whole in the note below, and in --json
		counts := func(n int) string {
			if r.Cached {
				return fmt.Sprintf("%d*", n)
			}
			return fmt.Sprint(n)
		}
		cpu, rss := "-", "-"
		if r.PID != 0 {
			cpu = (time.Duration(r.CPUMs) * time.Millisecond).Round(10 * time.Millisecond).String()
			rss = fmt.Sprintf("%.1fM", float64(r.RSSBytes)/(1<<20))
		}
		box := orDash(r.Sandbox)
		if len(r.Unenforced) > 0 {
			box += "!" // what is not enforced: the line below
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.State, cutLeft(r.Instance, instanceWidth), pid, era, up,
			r.Restarts, r.InFlight, r.Sessions, counts(r.Tools), counts(r.Prompts), counts(r.Resources+r.Templates), cpu, rss, box, exit)
	}
	tw.Flush()
	// A server's own notes (its URL, names, filters, lists and pins) are
	// the same on each of its instances' rows: they are written once per
	// server. An instance's own (its state, sandbox, counts) once per row.
	noted := map[string]bool{}
	once := func(format string, a ...any) {
		if line := fmt.Sprintf(format, a...); !noted[line] {
			noted[line] = true
			io.WriteString(w, line)
		}
	}
	for _, r := range rows {
		if len(r.Unenforced) > 0 {
			fmt.Fprintf(w, "%s: sandbox %s, not enforced on this kernel: %s\n", r.Name, r.Sandbox, strings.Join(r.Unenforced, "; "))
		}
		if r.URL != "" {
			auth := ""
			if r.Auth != "" {
				auth = "; auth " + r.Auth
				if strings.HasPrefix(r.Auth, "login required") {
					auth += " (snodod login " + r.Name + ")"
				}
			}
			once("%s: remote %s%s\n", r.Name, r.URL, auth)
		}
		switch r.State {
		case control.StateStarting:
			if !r.StartingSince.IsZero() {
				fmt.Fprintf(w, "%s: starting for %s; lists answer without it until it is ready (snodod logs %s)\n", r.Name, age(now, r.StartingSince), r.Name)
			}
		case control.StateBackoff:
			next := ""
			if r.RetryInMs != nil {
				next = fmt.Sprintf("; next attempt in %s", (time.Duration(*r.RetryInMs) * time.Millisecond).Round(time.Second))
			}
			fmt.Fprintf(w, "%s: %s after %d failures: %s%s (snodod logs %s)\n", r.Name, r.State, r.Failures, r.Cause, next, r.Name)
		case control.StateFailed:
			// A failed server is not restarted by itself: a request starts
			// it again (once per restart.max_delay), or the command does.
			when := ""
			if r.RetryInMs != nil && *r.RetryInMs > 0 {
				when = fmt.Sprintf(" (in %s at the earliest)", (time.Duration(*r.RetryInMs) * time.Millisecond).Round(time.Second))
			}
			fmt.Fprintf(w, "%s: failed after %d failures: %s; no automatic restarts; next request tries again%s, or snodod upstream restart %s now (snodod logs %s)\n",
				r.Name, r.Failures, r.Cause, when, r.Name, r.Name)
		}
		if len(r.Collided) > 0 {
			once("%s: not listed in the aggregated view: %s\n", r.Name, strings.Join(r.Collided, ", "))
		}
		for _, cut := range r.Truncated {
			once("%s: %s\n", r.Name, cut)
		}
		if len(r.Hidden) > 0 {
			once("%s: filtered out: %s\n", r.Name, strings.Join(r.Hidden, ", "))
		}
		if note := pinNote(r); note != "" {
			once("%s: %s\n", r.Name, note)
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

// pinNote says what a server's pins hold (docs/views.md, "Pinned
// definitions"): "2 tools changed, awaiting approval (…)"; "" for nothing.
func pinNote(r control.Upstream) string {
	if r.Quarantined {
		return fmt.Sprintf("quarantined, awaiting approval: nothing of it is listed (snodod diff %s; snodod approve %s)", r.Name, r.Name)
	}
	var parts, names []string
	plural := func(n int, what string) string {
		if n == 1 {
			return "1 tool " + what
		}
		return fmt.Sprintf("%d tools %s", n, what)
	}
	if len(r.Changed) > 0 {
		parts = append(parts, plural(len(r.Changed), "changed"))
		names = append(names, r.Changed...)
	}
	if len(r.New) > 0 {
		parts = append(parts, plural(len(r.New), "new"))
		names = append(names, r.New...)
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, awaiting approval: %s, held out of every view (snodod diff %s; snodod approve %s [TOOL])",
		strings.Join(parts, ", "), strings.Join(names, ", "), r.Name, r.Name)
}

func anyCached(rows []control.Upstream) bool {
	for _, r := range rows {
		if r.Cached {
			return true
		}
	}
	return false
}
