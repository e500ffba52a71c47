package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/snodod/snodod/daemon/control"
)

func upgradeUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod upgrade [flags]

Replaces the running daemon by a new process without closing a session:
the daemon starts the binary (its own executable by default, which a
package upgrade has replaced) with the arguments it was started with,
hands it the sockets and every live session, and exits once the new
process serves them. Requests still running after daemon.upgrade_grace
are answered "snodod restarted; this request was cancelled". SIGUSR2 to
the daemon's main process does the same; under systemd that is

  systemctl --user kill --kill-whom=main -s USR2 snodod

(without --kill-whom=main, systemctl signals every process of the
service, and SIGUSR2 ends the hosted servers that do not handle it).

Sessions keep their connection, state and negotiated version; what an
upgrade does not keep: the hosted servers restart in the new process (their
catalog cache answers lists meanwhile), legacy Streamable HTTP sessions end
(their clients initialize again), and 'snodod logs -f' ends. See
docs/operations.md.

Exit status: 0 once the new process serves every session; 1, with one
line on standard error, when the daemon cannot be reached or the upgrade
failed (the new binary did not start, or did not say it serves within
10 s): the running daemon then goes on serving.

Flags:
`)
	fs, _, _ := upgradeFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func upgradeFlags() (*flag.FlagSet, *clientOptions, *string) {
	o := &clientOptions{}
	fs := newFlagSet("upgrade")
	binary := fs.String("binary", "", "the `path` of the binary to start (default: the daemon's own executable)")
	addClientFlags(fs, o)
	return fs, o, binary
}

func runUpgrade(args []string) int {
	fs, o, binary := upgradeFlags()
	if status, done := parseFlags(fs, args, upgradeUsage); done {
		return status
	}
	path := *binary
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return usageError(fs.Name(), err.Error())
		}
		if _, err := os.Stat(abs); err != nil {
			fmt.Fprintf(os.Stderr, "snodod upgrade: %v\n", err)
			return exitFailure
		}
		path = abs
	}
	cfg, status := loadClientConfig("upgrade", o.keys.options(o.config))
	if cfg == nil {
		return status
	}
	_, sock := findDaemon(cfg)
	pid, err := (&control.Client{Socket: sock}).Upgrade(context.Background(), path)
	if err != nil {
		return clientFailure("snodod upgrade", err)
	}
	fmt.Printf("upgraded: the daemon is now pid %d\n", pid)
	return exitOK
}
