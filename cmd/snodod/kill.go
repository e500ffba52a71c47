package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/snodod/snodod/daemon/control"
)

func killUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod kill [flags] ID

Ends session ID of the running daemon ('snodod status' lists the ids): its
requests are cancelled and answered, its device is released, and a
terminal it had in raw mode is restored. The 'snodod connect' waiting for
it exits 1, saying the session was killed. It returns once the session has
ended.

Exit status: 0 when the session has ended; 1, with one line on standard
error, when the daemon cannot be reached or has no such session.

Flags:
`)
	fs, _ := clientFlagSet("kill")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func runKill(args []string) int {
	fs, o := clientFlagSet("kill")
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		killUsage(os.Stdout)
		return exitOK
	case err != nil:
		return usageError(fs.Name(), err.Error())
	case fs.NArg() != 1:
		return usageError(fs.Name(), "needs one session id, as 'snodod status' shows it")
	}
	id, err := strconv.ParseUint(fs.Arg(0), 10, 64)
	if err != nil || id == 0 {
		return usageError(fs.Name(), fmt.Sprintf("%q is not a session id; 'snodod status' shows them", fs.Arg(0)))
	}
	cfg, status := loadClientConfig("kill", o.keys.options(o.config))
	if cfg == nil {
		return status
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, sock := findDaemon(cfg)
	if err := (&control.Client{Socket: sock}).Kill(ctx, id); err != nil {
		return clientFailure("snodod kill", err)
	}
	fmt.Printf("session %d ended\n", id)
	return exitOK
}
