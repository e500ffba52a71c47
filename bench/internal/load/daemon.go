package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/snodod/snodod/bench/internal/wire"
)

// Daemon is a running `snodod serve` with a session socket in a directory
// of its own.
type Daemon struct {
	cmd    *exec.Cmd
	dir    string
	Socket string
	stderr *tail
	levels *levelCounter
	waited chan struct{}
	// extraDirs are removed with dir (a hosted server's configuration).
	extraDirs []string
}

// Control is the daemon's control socket.
func (d *Daemon) Control() string { return filepath.Join(d.dir, "c.sock") }

// StartDaemon starts `bin serve --demo` with its sockets in a new
// temporary directory, allowing maxSessions sessions (all of them the
// harness's uid's), and waits until its
// session socket accepts.
func StartDaemon(bin string, maxSessions int, env []string) (*Daemon, error) {
	dir, err := os.MkdirTemp("", "mcpbench-")
	if err != nil {
		return nil, err
	}
	d := &Daemon{dir: dir, Socket: filepath.Join(dir, "s.sock"), stderr: &tail{max: 8 << 10}, waited: make(chan struct{})}
	d.cmd = exec.Command(bin, "serve", "--demo",
		"--socket", d.Socket,
		"--control-socket", d.Control(),
		"--max-sessions", strconv.Itoa(maxSessions),
		// Every session of the harness is its own uid's.
		"--max-sessions-per-uid", strconv.Itoa(maxSessions))
	d.cmd.Env = append(os.Environ(), env...)
	d.levels = &levelCounter{}
	logs := io.MultiWriter(d.stderr, d.levels)
	d.cmd.Stdout, d.cmd.Stderr = logs, logs
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start snodod serve: %w", err)
	}
	go func() {
		_ = d.cmd.Wait()
		close(d.waited)
	}()
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("unix", d.Socket)
		if err == nil {
			c.Close()
			return d, nil
		}
		select {
		case <-d.waited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("snodod serve exited (%s): %s", d.cmd.ProcessState, d.Stderr())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.Stop()
			return nil, fmt.Errorf("snodod serve: no session socket after 15 s: %s", d.Stderr())
		}
	}
}

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Stderr is the end of the daemon's log.
func (d *Daemon) Stderr() string { return d.stderr.String() }

// Logged returns how many log lines the daemon wrote at WARN and at
// ERROR, and the last of them.
func (d *Daemon) Logged() (warn, errs int, last string) { return d.levels.counts() }

// Alive reports whether the daemon is still running.
func (d *Daemon) Alive() bool {
	select {
	case <-d.waited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM, waits up to 15 s (then kills), removes the
// directory and tells how the daemon ended.
func (d *Daemon) Stop() string {
	defer os.RemoveAll(d.dir)
	defer func() {
		for _, dir := range d.extraDirs {
			os.RemoveAll(dir)
		}
	}()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.waited:
		return d.cmd.ProcessState.String()
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.waited
		return "killed after 15 s without exiting on SIGTERM"
	}
}

// Dial opens a session, retrying while the daemon's accept backlog is full.
func (d *Daemon) Dial() (net.Conn, error) {
	var err error
	for wait := time.Millisecond; wait < 2*time.Second; wait *= 2 {
		var c net.Conn
		c, err = net.Dial("unix", d.Socket)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		time.Sleep(wait)
	}
	return nil, err
}

// Session is one client session of the daemon.
type Session struct {
	*Conn
	nc net.Conn
}

// Open dials a session and does the handshake of d.
func (d *Daemon) Open(dialect wire.Dialect, timeout time.Duration) (*Session, error) {
	nc, err := d.Dial()
	if err != nil {
		return nil, err
	}
	s := &Session{Conn: NewConn(nc, nc, 16), nc: nc}
	if err := s.Handshake(dialect, timeout); err != nil {
		nc.Close()
		return nil, err
	}
	return s, nil
}

// Close ends the session.
func (s *Session) Close() {
	s.Discard()
	s.nc.Close()
}

// openMany opens n sessions, at most 64 dials at a time.
func (d *Daemon) openMany(n int, dialect wire.Dialect) ([]*Session, error) {
	out := make([]*Session, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{}, 64)
	for i := range n {
		wg.Go(func() {
			gate <- struct{}{}
			defer func() { <-gate }()
			out[i], errs[i] = d.Open(dialect, 30*time.Second)
		})
	}
	wg.Wait()
	if first := firstErr(errs); first != nil {
		failed := 0
		for i := range out {
			if out[i] != nil {
				out[i].Close()
			} else {
				failed++
			}
		}
		return nil, fmt.Errorf("%d of %d sessions failed to open: %w", failed, n, first)
	}
	return out, nil
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func closeAll(ss []*Session) {
	for _, s := range ss {
		s.Close()
	}
}

// levelCounter counts the WARN and ERROR lines of a log/slog text log.
type levelCounter struct {
	mu         sync.Mutex
	partial    []byte
	warn, errs int
	last       string
}

func (c *levelCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partial = append(c.partial, p...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			break
		}
		line := c.partial[:i]
		switch {
		case bytes.Contains(line, []byte("level=ERROR")):
			c.errs++
			c.last = string(line)
		case bytes.Contains(line, []byte("level=WARN")):
			c.warn++
			c.last = string(line)
		}
		c.partial = c.partial[i+1:]
	}
	return len(p), nil
}

func (c *levelCounter) counts() (warn, errs int, last string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.warn, c.errs, c.last
}
