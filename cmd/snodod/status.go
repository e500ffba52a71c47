package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/snodod/snodod/daemon/control"
)

func statusUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod status [flags]

Shows the running daemon's sessions, one row each (id, device kind, peer
pid and uid, age, negotiated MCP version, the client's name and version
from its clientInfo, the view it sees, requests in flight, subscriptions,
restarts, bytes in and out), the shared executor's load, the HTTP listener
when http.listen is set, each hosted MCP server instance (state, pid, era
and version, uptime, restarts, calls in flight, the sessions that used it,
listed items, last exit; * marks counts from the cache; why a failed one
failed) and warnings: what the configured catalog could not do, and a
reload that was refused (until a reload succeeds). Long texts are cut to
keep the table a table; --json prints everything, in full, as one JSON
object for scripts. "snodod upstream" and "snodod logs" act on the hosted
servers.

Exit status: 0, or 1 with one line on standard error when the daemon
cannot be reached.

Flags:
`)
	fs, _ := statusFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func statusFlags() (*flag.FlagSet, *clientOptions) {
	o := &clientOptions{}
	fs := newFlagSet("status")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	addClientFlags(fs, o)
	return fs, o
}

// daemonStatus asks the daemon of o's configuration for its status, for
// snodod cmd; a failure is reported (clientFailure) and its exit status
// returned with a nil Status.
func daemonStatus(cmd string, o *clientOptions) (*control.Status, int) {
	cfg, status := loadClientConfig(cmd, o.keys.options(o.config))
	if cfg == nil {
		return nil, status
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, sock := findDaemon(cfg)
	st, err := (&control.Client{Socket: sock}).Status(ctx)
	if err != nil {
		return nil, clientFailure("snodod "+cmd, err)
	}
	return st, exitOK
}

func runStatus(args []string) int {
	fs, o := statusFlags()
	if status, done := parseFlags(fs, args, statusUsage); done {
		return status
	}
	st, status := daemonStatus("status", o)
	if st == nil {
		return status
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return exitFailure
		}
		return exitOK
	}
	writeStatus(os.Stdout, st, time.Now())
	return exitOK
}

// Cell widths of the tables: a longer text is cut (cut, cutLeft), and
// --json has it whole.
const (
	clientWidth   = 28
	instanceWidth = 28
	exitWidth     = 40
)

// writeStatus writes st as a person reads it: a summary line, one aligned
// row per session, and the executor's load.
func writeStatus(w io.Writer, st *control.Status, now time.Time) {
	plural := "s"
	if len(st.Sessions) == 1 {
		plural = ""
	}
	state := ""
	if st.State == "draining" {
		state = ", draining (no new sessions; these are finishing)"
	}
	fmt.Fprintf(w, "snodod %s, pid %d, up %s%s: %d session%s (max %d)\n",
		st.Version, st.PID, age(now, st.Started), state, len(st.Sessions), plural, st.MaxSessions)
	if len(st.Sessions) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tPID\tUID\tAGE\tVERSION\tCLIENT\tVIEW\tIN-FLIGHT\tSUBS\tRESTARTS\tBYTES IN\tBYTES OUT")
		for _, s := range st.Sessions {
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n",
				s.ID, s.Kind, s.PeerPID, s.PeerUID, age(now, s.Started), orDash(s.Version), clientCell(s.Client), viewCell(s.View),
				s.InFlight, s.Subscriptions, s.Restarts, s.BytesIn, s.BytesOut)
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	e := st.Executor
	fmt.Fprintf(w, "executor: %d running (max %d), %d waiting on children, %d queued (max %d shared + %d per session), request timeout %s\n",
		e.Running, e.MaxConcurrency, e.Detached, e.Queued, e.MaxQueue, e.SessionQueue, e.RequestTimeout)
	if r := refusedText(st.Refused); r != "" {
		fmt.Fprintf(w, "refused on the sockets: %s\n", r)
	}
	for _, warning := range st.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	writeHTTPStatus(w, st.HTTP)
	writeUpstreams(w, st.Upstreams, now)
}

// clientCell is a session's client as its row shows it: "name version".
func clientCell(c *control.ClientInfo) string {
	if c == nil {
		return "-"
	}
	s := c.Name
	if c.Version != "" {
		s += " " + c.Version
	}
	return cut(s, clientWidth)
}

// viewCell names a session's view: the upstream it passes through, or
// "aggregated".
func viewCell(view string) string {
	if view == "" {
		return "aggregated"
	}
	return view
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to at most n runes, its end replaced by "…"; control
// characters (a newline in an error) become spaces, which a table can
// hold.
func cut(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// cutLeft is cut that keeps the end: of a path, the last names.
func cutLeft(s string, n int) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return "…" + string(r[len(r)-n+1:])
}

func oneLine(s string) string {
	b := []rune(s)
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			b[i] = ' '
		}
	}
	return string(b)
}

// age is how long ago t was, to the second.
func age(now, t time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}
