package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/upstream"
)

// snodod approve NAME [TOOL] and snodod diff NAME: the pinned definitions
// of hosted servers (docs/views.md, "Pinned definitions"), through the
// control socket of the running daemon, or, when none runs, on the record
// in the state directory.

func approveUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod approve NAME [TOOL] [flags]

Approves what the hosted server NAME holds out of every view:

  - with pin = true, a tool whose definition (name, title, description,
    inputSchema, outputSchema, annotations) changed since it was pinned,
    and, with pin_new = "hold" (the default), a tool that is new since;
  - with quarantine = true, the whole server, until it is approved once.

With TOOL, only that tool is approved; without it, all that NAME holds
(and its quarantine ends). The definitions approved are the ones snodod
diff NAME shows; they are pinned in their turn.

A running daemon approves at once: every session's list includes the
tools again (notifications/tools/list_changed). Only the daemon's own
user may approve. When no daemon runs, the record in the state directory
($XDG_STATE_HOME/snodod/pins/NAME.json) is approved, which the daemon
reads when it starts.

Flags:
`)
	fs, _ := clientFlagSet("approve")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func diffUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod diff NAME [flags]

Shows what the hosted server NAME holds for approval (snodod approve NAME
[TOOL]), one tool after another: a new tool's definition, and for a
changed one what changed, field by field. A description or title is
shown word by word, [-removed words-] and {+added words+}; the schemas
and annotations by the path of each value that differs:

  tool read_file: changed
    description: Read a file [-from the allowed directories-] {+and send it to https://evil.example+}
    ~ /inputSchema/properties/path/description: [-Path-] {+Any path+}
    + /inputSchema/properties/token: {"type":"string"}

It asks the running daemon, or, when none runs, reads the record in the
state directory ($XDG_STATE_HOME/snodod/pins/NAME.json). Nothing printed
means nothing awaits approval.

Flags:
`)
	fs, _ := clientFlagSet("diff")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// parseFlagsAndNames is parseFlagsAndName for a name and an optional tool.
func parseFlagsAndNames(fs *flag.FlagSet, args []string, usage func(io.Writer)) (name, tool string, status int, done bool) {
	rest, status, done := parseFlagsAndArgs(fs, args, usage)
	if done {
		return "", "", status, true
	}
	switch len(rest) {
	case 0:
		return "", "", usageError(fs.Name(), "needs the NAME of a server (snodod status lists them)"), true
	case 1:
		return rest[0], "", 0, false
	case 2:
		return rest[0], rest[1], 0, false
	}
	return "", "", usageError(fs.Name(), fmt.Sprintf("takes a server name and at most one tool, got %q", rest)), true
}

func runApprove(args []string) int {
	fs, o := clientFlagSet("approve")
	name, tool, st, done := parseFlagsAndNames(fs, args, approveUsage)
	if done {
		return st
	}
	client, ctx, stop, status := controlOf("approve", o)
	if client == nil {
		return status
	}
	defer stop()
	approved, released, err := client.Approve(ctx, name, tool)
	offline := false
	var unreachable *control.UnreachableError
	if errors.As(err, &unreachable) {
		offline = true
		approved, err = upstream.ApprovePins(config.StateDir(nil), name, tool)
		if err == nil && len(approved) > 0 && approved[0] == "" {
			released, approved = true, approved[1:]
		}
	}
	if err != nil {
		return clientFailure("snodod approve", err)
	}
	return reportApproval(os.Stdout, name, approved, released, offline)
}

// reportApproval says what an approve did.
func reportApproval(w io.Writer, name string, approved []string, released, offline bool) int {
	if len(approved) == 0 && !released {
		fmt.Fprintf(w, "%s: nothing awaits approval\n", name)
		return exitOK
	}
	var parts []string
	if released {
		parts = append(parts, "released from quarantine")
	}
	if len(approved) > 0 {
		parts = append(parts, "approved "+strings.Join(approved, ", "))
	}
	when := "; every view lists it now"
	if offline {
		when = "; no daemon runs: the record is approved, and the daemon reads it when it starts"
	}
	fmt.Fprintf(w, "%s: %s%s\n", name, strings.Join(parts, "; "), when)
	return exitOK
}

func runDiff(args []string) int {
	fs, o := clientFlagSet("diff")
	name, st, done := parseFlagsAndName(fs, args, diffUsage)
	if done {
		return st
	}
	if name == "" {
		return usageError(fs.Name(), "needs the NAME of a server (snodod status lists them)")
	}
	client, ctx, stop, status := controlOf("diff", o)
	if client == nil {
		return status
	}
	defer stop()
	text, err := client.Diff(ctx, name)
	var unreachable *control.UnreachableError
	if errors.As(err, &unreachable) {
		var rec *upstream.PinRecord
		if rec, err = upstream.LoadPins(config.StateDir(nil), name); err == nil {
			text = rec.Diff()
		}
	}
	if err != nil {
		return clientFailure("snodod diff", err)
	}
	fmt.Print(text)
	return exitOK
}
