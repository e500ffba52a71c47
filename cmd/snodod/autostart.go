package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
)

// `snodod connect` when no daemon answers starts one, as `emacsclient -a
// ''` does: `snodod serve` with connect's own configuration file and
// socket flags, detached (a session of its own, standard input and output
// on /dev/null, its log in the state directory), waits until it answers,
// then connects. Two clients that start at once each start one; the
// session socket's lock lets one of them run, and the other exits saying
// that one is already running, which is not a failure here: both clients
// then reach the one that runs.

const (
	// autostartWait bounds the wait for a daemon connect started to
	// answer: it binds its sockets before it starts any hosted server.
	autostartWait = 15 * time.Second
	// autostartLogName is the daemon's log in the state directory; one
	// over autostartLogBytes is renamed to autostartLogName.1 at the next
	// start, so that two generations are kept.
	autostartLogName  = "daemon.log"
	autostartLogBytes = 4 << 20
)

// endpoint is a pair of sockets where a daemon may listen.
type endpoint struct{ socket, control string }

// attempt is an endpoint tried, and why no daemon answered there.
type attempt struct {
	path string
	err  error
}

// endpoints are where connect looks for the daemon, in order: cfg's
// sockets, then, when those are the defaults, the other default
// directories a daemon started in another environment listens in
// (config.Config.DefaultSocketDirs).
func endpoints(cfg *config.Config) []endpoint {
	out := []endpoint{{cfg.Daemon.Socket, cfg.Daemon.ControlSocket}}
	for _, dir := range cfg.DefaultSocketDirs() {
		out = append(out, endpoint{filepath.Join(dir, filepath.Base(cfg.Daemon.Socket)), filepath.Join(dir, "control.sock")})
	}
	return out
}

// noDaemon reports whether err says that nothing listens at a socket (no
// file, or one left by a daemon that died): the one case connect may try
// elsewhere, or start a daemon. A daemon that refuses the session, or a
// socket this user may not use, is an answer.
func noDaemon(err error) bool {
	var u *control.UnreachableError
	return errors.As(err, &u) && u.NoDaemon()
}

// notFound is connect's failure when no daemon answers at any endpoint
// (and none could be started: why, when start is set).
type notFound struct {
	tried    []attempt
	defaults bool // the socket paths are the defaults (none was configured)
	start    error
	log      string // the started daemon's log
}

func (e *notFound) Error() string {
	var b strings.Builder
	b.WriteString("no daemon answers at ")
	for i, a := range e.tried {
		if i > 0 {
			b.WriteString(", ")
		}
		var u *control.UnreachableError
		why := a.err.Error()
		if errors.As(a.err, &u) {
			why = u.Err.Error()
		}
		fmt.Fprintf(&b, "%s (%s)", a.path, why)
	}
	if e.defaults && os.Getenv("XDG_RUNTIME_DIR") == "" && len(e.tried) > 0 {
		// MCP clients start their servers with a small environment: the
		// daemon a login shell started listens under the runtime
		// directory this process cannot name.
		fmt.Fprintf(&b, "; XDG_RUNTIME_DIR is unset here (MCP clients often leave it out), so the default is %s: set XDG_RUNTIME_DIR in this server's \"env\" in the client's configuration, or pass --control-socket PATH",
			filepath.Dir(e.tried[0].path))
	}
	switch {
	case e.start != nil && e.log != "":
		fmt.Fprintf(&b, "; starting one failed: %v (its log: %s)", e.start, e.log)
	case e.start != nil:
		fmt.Fprintf(&b, "; starting one failed: %v", e.start)
	default:
		b.WriteString("; start one with 'snodod serve', or leave out --no-start and connect starts it")
	}
	return b.String()
}

// defaultSockets reports whether cfg's socket paths are the defaults.
func defaultSockets(cfg *config.Config) bool {
	return cfg.Source("daemon.socket").Kind == config.FromDefault && cfg.Source("daemon.control_socket").Kind == config.FromDefault
}

// startDaemon starts `snodod serve` for cfg, as opts were given to this
// command, detached, and waits until it answers on cfg's control socket.
// It returns the log file the daemon writes to, and why it did not start.
func startDaemon(cfg *config.Config, opts config.Options) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find snodod's own executable: %w", err)
	}
	args := []string{"serve"}
	if opts.File != "" {
		abs, err := filepath.Abs(opts.File)
		if err != nil {
			return "", err
		}
		args = append(args, "--config", abs)
	}
	keys := make([]string, 0, len(opts.Flags))
	for key := range opts.Flags {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		args = append(args, fmt.Sprintf("%s=%v", opts.Flags[key], opts.Overrides[key]))
	}
	logPath, logf, err := openDaemonLog(cfg)
	if err != nil {
		return "", err
	}
	defer logf.Close() // the daemon has its own
	offset, _ := logf.Seek(0, io.SeekEnd)
	fmt.Fprintf(logf, "%s snodod connect (pid %d) starts the daemon: %s %s\n",
		time.Now().Format(time.RFC3339), os.Getpid(), exe, strings.Join(args, " "))
	cmd := exec.Command(exe, args...)
	cmd.Dir = "/" // it holds no client's directory
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no terminal, no client's process group
	if err := cmd.Start(); err != nil {
		return logPath, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), autostartWait)
	defer cancel()
	client := &control.Client{Socket: cfg.Daemon.ControlSocket}
	wait := 10 * time.Millisecond
	for {
		probe, stop := context.WithTimeout(ctx, time.Second)
		_, err := client.Status(probe)
		stop()
		if err == nil {
			return logPath, nil
		}
		select {
		case err := <-exited:
			exited = nil
			// The loser of a race with another start says that one
			// runs (or holds the lock, starting): wait for it.
			if msg := fatalLines(logPath, offset); !strings.Contains(msg, "is already running") {
				if msg == "" {
					msg = fmt.Sprint(err)
				}
				return logPath, errors.New(msg)
			}
		case <-ctx.Done():
			return logPath, fmt.Errorf("it did not answer on %s within %s", cfg.Daemon.ControlSocket, autostartWait)
		case <-time.After(wait):
			wait = min(2*wait, 200*time.Millisecond)
		}
	}
}

// openDaemonLog opens the log of a daemon connect starts, in the state
// directory (the socket directory when there is none), for appending.
func openDaemonLog(cfg *config.Config) (string, *os.File, error) {
	dir := config.StateDir(nil)
	if dir == "" {
		dir = filepath.Dir(cfg.Daemon.ControlSocket)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, fmt.Errorf("create the daemon's log directory: %w", err)
	}
	path := filepath.Join(dir, autostartLogName)
	if fi, err := os.Stat(path); err == nil && fi.Size() > autostartLogBytes {
		_ = os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return "", nil, fmt.Errorf("open the daemon's log: %w", err)
	}
	return path, f, nil
}

// fatalLines is what a daemon that exited at start said, from offset of
// its log: the lines of `snodod serve: …`, which say why, joined.
func fatalLines(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	var lines []string
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "snodod serve: "); ok {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}
