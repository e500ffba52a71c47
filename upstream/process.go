package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/snodod/snodod/internal/framing"
	"github.com/snodod/snodod/internal/proc"
)

// stderrTailBytes is how much of its stderr an ExitError quotes.
const stderrTailBytes = 2 << 10

// ExitError is how an instance ended.
type ExitError struct {
	Code   int            // exit status, -1 when killed by a signal or not started
	Signal syscall.Signal // the signal that killed it, 0 otherwise
	Err    error          // a start or I/O failure, when that is what ended it
	Stderr string         // the last 2 KiB of its stderr
}

// Error says how it ended: "exited with status 1", "killed by signal 9
// (killed)", or the start failure. It does not quote Stderr: callers place
// the tail where their message needs it.
func (e *ExitError) Error() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.Signal != 0:
		return "killed by signal " + strconv.Itoa(int(e.Signal)) + " (" + e.Signal.String() + ")"
	default:
		return "exited with status " + strconv.Itoa(e.Code)
	}
}

// Unwrap returns Err.
func (e *ExitError) Unwrap() error { return e.Err }

// exitError describes a reaped leader from its wait error.
func exitError(waitErr error, stderr string) *ExitError {
	e := &ExitError{Stderr: stderr}
	var ee *exec.ExitError
	switch {
	case waitErr == nil:
	case errors.As(waitErr, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			e.Code, e.Signal = -1, ws.Signal()
		} else {
			e.Code = ee.ExitCode()
		}
	default:
		e.Code, e.Err = -1, waitErr
	}
	return e
}

// spawn starts the child with its three pipes and the Conn's goroutines.
func (c *Conn) spawn(cmd Command) error {
	path, err := lookPath(cmd.Path, cmd.Env)
	if err != nil {
		return &ExitError{Code: -1, Err: err}
	}
	var files []*os.File // every pipe end, closed on failure
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll(files)
		return &ExitError{Code: -1, Err: fmt.Errorf("start %s: %w", cmd.Path, err)}
	}
	ec := &exec.Cmd{
		Path:   path,
		Args:   append([]string{cmd.Path}, cmd.Args...),
		Env:    cmd.Env,
		Dir:    cmd.Dir,
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
	}
	if ec.Env == nil {
		ec.Env = []string{} // the whole environment is the caller's: nil is none, not the daemon's
	}
	g, err := proc.Start(ec)
	closeAll([]*os.File{inR, outW, errW}) // the child's ends
	if err != nil {
		closeAll([]*os.File{inW, outR, errR})
		return &ExitError{Code: -1, Err: fmt.Errorf("start %s: %w", cmd.Path, err)}
	}
	c.group = g
	if c.cfg.Record != nil {
		if err := c.cfg.Record.Add(g); err != nil {
			c.log.Warn("cannot record the process group; a daemon crash would leave it running", "pid", g.PID(), "err", err)
		}
	}
	if c.cfg.Spawned != nil {
		c.cfg.Spawned(g.PID())
	}
	c.stdout, c.stderr = outR, errR
	c.handlerCtx, c.handlerCancel = context.WithCancel(context.Background())
	c.w.init(inW, c.log, c.kill)
	watch := &lineWatch{f: outR, limit: c.cfg.MaxLineBytes, onLong: c.longLine}
	c.reader = framing.NewScanner(watch, c.cfg.MaxLineBytes) // read on readLoop's goroutine
	go c.w.loop()
	go c.drainStderr()
	go c.logStderr()
	go c.readLoop()
	go c.supervise()
	c.log.Debug("upstream started", "pid", g.PID(), "command", cmd.Path)
	return nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

// lookPath resolves name against the PATH of env (the child's, not the
// daemon's: a systemd user daemon's PATH is rarely the login shell's).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("start %s: executable file not found in the upstream's PATH (%s); give command as an absolute path or set PATH in its env", name, path)
}
