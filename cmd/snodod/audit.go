package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/snodod/snodod/audit"
)

func auditUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod audit [--follow] [--tool T] [--server S] [--since 1h] [--json] [flags]

Prints the daemon's audit log (docs/observability.md, "Audit log"): one
line per tool call, resource read and prompt get, with the session, the
client, its process, the view, the server, the outcome and how long it
took. It reads the file of audit.file in the configuration and its
rotations (FILE.N … FILE.1, FILE: the oldest first), as a table: time
(local), client, view, server/item, outcome, duration. --json prints the
lines as written instead, one JSON object each, for jq.

--tool keeps the calls of one tool (its name as the client called it:
server__tool in the aggregated view); --server the requests one hosted
server served (--server snodod: snodod's own tools, prompts and
resources); --since those of the last DURATION (1h, 30m) or since a time
(2026-12-02T10:00:00Z). --follow prints the log, then what is appended to
it until interrupted, across rotations.

With audit.journald the log is in the systemd journal: read it with
'journalctl -t snodod-audit -o cat' (-f to follow). With the audit log off
(neither audit.file nor audit.journald) it says so and fails.

Flags:
`)
	fs, _ := auditFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

type auditOptions struct {
	clientOptions
	follow       bool
	tool, server string
	since        string
	file         string
}

func auditFlags() (*flag.FlagSet, *auditOptions) {
	o := &auditOptions{}
	fs := newFlagSet("audit")
	fs.BoolVar(&o.follow, "follow", false, "print what is appended to the log until interrupted")
	fs.BoolVar(&o.follow, "f", false, "short for --follow")
	fs.StringVar(&o.tool, "tool", "", "only the calls of this `tool`")
	fs.StringVar(&o.server, "server", "", "only the requests this hosted `server` served (snodod: snodod's own)")
	fs.StringVar(&o.since, "since", "", "only the requests of the last `duration` (1h) or since an RFC 3339 time")
	fs.BoolVar(&o.json, "json", false, "print the lines as written, one JSON object each")
	fs.StringVar(&o.file, "file", "", "read this audit `file` (and its rotations) instead of audit.file's")
	addClientFlags(fs, &o.clientOptions)
	return fs, o
}

func runAudit(args []string) int {
	fs, o := auditFlags()
	if st, done := parseFlags(fs, args, auditUsage); done {
		return st
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "snodod audit: unexpected argument %q\nRun 'snodod audit --help' for usage.\n", fs.Arg(0))
		return exitUsage
	}
	f := audit.Filter{Tool: o.tool, Server: o.server}
	if o.since != "" {
		since, err := parseSince(o.since, time.Now())
		if err != nil {
			fmt.Fprintf(os.Stderr, "snodod audit: --since %s: %v\n", o.since, err)
			return exitUsage
		}
		f.Since = since
	}
	path := o.file
	if path == "" {
		cfg, status := loadClientConfig("audit", o.keys.options(o.config))
		if cfg == nil {
			return status
		}
		switch {
		case cfg.Audit.Journald:
			follow := ""
			if o.follow {
				follow = " -f"
			}
			fmt.Fprintf(os.Stderr, "snodod audit: the audit log goes to the systemd journal (audit.journald); read it with: journalctl -t snodod-audit -o cat%s\n", follow)
			return exitFailure
		case cfg.Audit.File == "":
			fmt.Fprintln(os.Stderr, "snodod audit: the audit log is off; set audit.file (a path) or audit.journald = true in the [audit] section of the configuration, then reload the daemon (SIGHUP)")
			return exitFailure
		}
		path = cfg.Audit.File
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := printAudit(ctx, os.Stdout, path, f, o.json, o.follow, followPoll); err != nil {
		fmt.Fprintf(os.Stderr, "snodod audit: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// followPoll is how often --follow looks at the file.
const followPoll = 250 * time.Millisecond

// parseSince reads --since: a duration before now, or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("must be a positive duration")
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, errors.New("must be a duration (1h, 30m) or an RFC 3339 time (2026-12-02T10:00:00Z)")
}

// printAudit prints the records of path and its rotations that pass f,
// then, with follow, those appended until ctx ends.
func printAudit(ctx context.Context, w io.Writer, path string, f audit.Filter, asJSON, follow bool, poll time.Duration) error {
	files := audit.Files(path)
	if len(files) == 0 && !follow {
		return fmt.Errorf("%s: no audit log yet (nothing was called since audit.file was set, or the daemon cannot write there)", path)
	}
	if !asJSON {
		fmt.Fprintf(w, auditRowFormat, "TIME", "CLIENT", "VIEW", "SERVER/ITEM", "OUTCOME", "DURATION")
	}
	print := func(l audit.Line) error {
		if l.Err != nil {
			if asJSON {
				return nil
			}
			_, err := fmt.Fprintf(w, "(a line that is not a record: %.60q)\n", l.Raw)
			return err
		}
		if !f.Match(&l.Record) {
			return nil
		}
		var err error
		if asJSON {
			_, err = fmt.Fprintf(w, "%s\n", l.Raw)
		} else {
			err = writeAuditRow(w, &l.Record)
		}
		return err
	}
	if err := audit.Read(files, print); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	return audit.Follow(ctx, path, poll, print)
}

const auditRowFormat = "%-23s  %-20s  %-10s  %-40s  %-13s  %9s\n"

// writeAuditRow writes one record as a row of the table.
func writeAuditRow(w io.Writer, r *audit.Record) error {
	client := "-"
	if r.Client != nil {
		client = r.Client.Name
		if r.Client.Version != "" {
			client += " " + r.Client.Version
		}
	}
	view := r.View
	if view == "" {
		view = "-"
	}
	server := r.Server
	if server == "" {
		server = "snodod"
	}
	item := r.Tool
	switch r.Method {
	case "resources/read":
		item = r.URI
	case "prompts/get":
		item = "prompt " + r.Prompt
	}
	outcome := r.Outcome
	if r.Outcome == "error" {
		outcome = fmt.Sprintf("error %d", r.Code)
	}
	_, err := fmt.Fprintf(w, auditRowFormat, r.Time.Local().Format("2006-01-02 15:04:05.000"), cut(client, 20), cut(view, 10),
		cut(server+"/"+item, 40), outcome, fmt.Sprintf("%.1fms", r.DurationMS))
	return err
}
