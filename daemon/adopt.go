package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/session"
)

// The new process's side of an upgrade (see upgrade.go): Run takes the
// listeners from the daemon that started it instead of listening, says
// ready once it serves them, then resumes each session it is sent, and
// says adopted when the last has arrived. It tells systemd it is ready only
// once the old daemon has made it the main process.

// takeover is the origin of a process an upgrade started: the listeners
// and sessions of the daemon that started it, over the private socket.
type takeover struct {
	d *Daemon
	f *os.File // the socket (Options.Upgrade), until listen
	w *wire
}

// listen reads the listeners the daemon that started this one sends.
func (o *takeover) listen(*config.Config) ([]*listener, net.Listener, error) {
	d := o.d
	w, err := newWire(o.f)
	o.f = nil
	if err != nil {
		return nil, nil, err
	}
	o.w = w
	// systemd is told of this process, and the sessions' descriptors are
	// stored, once it is the main one (fdstore.go).
	d.notify.held.Store(true)
	d.store.hold()
	ls, httpLn, err := d.adoptListeners(w)
	if err != nil {
		o.refuse(err)
		return nil, nil, err
	}
	// The watchdog is this process's from now on: WATCHDOG_PID named the
	// daemon that started it (sd_watchdog_enabled(3)).
	if os.Getenv("WATCHDOG_PID") != "" {
		os.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	}
	return ls, httpLn, nil
}

// resume tells the daemon that started this one that it serves, and
// begins adopting the sessions it sends (READY=1 waits until this process
// is the main one).
func (o *takeover) resume(startUpstreams func()) {
	d, w := o.d, o.w
	if err := w.send(upgradeMsg{Type: "ready", PID: os.Getpid(), Version: d.version(), Servers: proc.CanAdopt()}); err != nil {
		d.log.Error("upgrade: the running daemon cannot be told this one serves", "error", err)
	}
	d.late.Add(1)
	go func() {
		defer d.late.Done()
		// The hosted servers start once the old daemon's have stopped
		// (it says "main" then), or once it is gone: until then requests
		// that need one wait, and the catalog cache answers lists.
		defer startUpstreams()
		defer d.store.release()
		defer d.notify.held.Store(false)
		d.adoptSessions(w)
	}()
}

// refuse tells the daemon that started this one why it cannot serve.
func (o *takeover) refuse(err error) {
	if o.w != nil {
		_ = o.w.send(upgradeMsg{Type: "error", Error: err.Error()})
		o.w.close()
		o.w = nil
	}
}

// adoptListeners reads the hello of the daemon that started this one.
func (d *Daemon) adoptListeners(w *wire) (ls []*listener, httpLn net.Listener, err error) {
	m, files, err := w.recv(time.Now().Add(upgradeReadyTimeout))
	if err != nil {
		return nil, nil, fmt.Errorf("upgrade: read the listeners: %w", err)
	}
	defer func() {
		if err != nil {
			for _, l := range ls {
				l.release()
			}
			if httpLn != nil {
				httpLn.Close()
			}
		}
	}()
	defer closeFiles(files) // the listeners hold duplicates
	switch {
	case m.Type != "hello":
		return nil, nil, fmt.Errorf("upgrade: got %q, not hello", m.Type)
	case m.Format != upgradeFormat:
		return nil, nil, fmt.Errorf("upgrade: the running daemon (%s) speaks hand-over format %d, this binary %d; upgrade by a restart instead",
			m.Version, m.Format, upgradeFormat)
	case len(files) != len(m.Listeners):
		return nil, nil, fmt.Errorf("upgrade: %d listeners came with %d descriptors", len(m.Listeners), len(files))
	}
	var lock *os.File
	for i, rec := range m.Listeners {
		f := files[i]
		switch rec.Name {
		case "lock":
			if lock, err = dupFile(f, rec.Path); err != nil {
				return nil, nil, err
			}
		case "http":
			if httpLn, err = net.FileListener(f); err != nil {
				return nil, nil, fmt.Errorf("upgrade: the HTTP listener: %w", err)
			}
		case "session", "control":
			ln, err := net.FileListener(f)
			if err != nil {
				return nil, nil, fmt.Errorf("upgrade: the %s socket: %w", rec.Name, err)
			}
			ul, ok := ln.(*net.UnixListener)
			if !ok {
				ln.Close()
				return nil, nil, fmt.Errorf("upgrade: the %s socket is not a Unix socket", rec.Name)
			}
			// A socket the daemon made is this daemon's to remove at
			// its drain; one systemd passed stays.
			ul.SetUnlinkOnClose(rec.Created)
			ls = append(ls, &listener{name: rec.Name, path: rec.Path, ln: ul, created: rec.Created})
		default:
			return nil, nil, fmt.Errorf("upgrade: an unknown listener %q", rec.Name)
		}
	}
	for _, l := range ls {
		if l.name == "session" {
			l.lock = lock
			lock = nil
		}
	}
	if lock != nil {
		lock.Close()
	}
	d.sessions.skipTo(m.NextID)
	d.log.Info("upgrade: took the listeners of the running daemon", "pid", m.PID, "version", m.Version)
	return ls, httpLn, nil
}

// listenerFiles returns the records and duplicates of the listeners for
// the new process: the sockets, the session socket's lock, and the HTTP
// listener. The caller closes the files.
func (d *Daemon) listenerFiles(listeners []*listener) ([]listenerRecord, []*os.File, error) {
	var recs []listenerRecord
	var files []*os.File
	add := func(rec listenerRecord, c syscall.Conn) error {
		f, err := dupFile(c, rec.Name)
		if err != nil {
			return fmt.Errorf("pass the %s listener: %w", rec.Name, err)
		}
		recs, files = append(recs, rec), append(files, f)
		return nil
	}
	for _, l := range listeners {
		if err := add(listenerRecord{Name: l.name, Path: l.path, Created: l.created}, l.ln); err != nil {
			closeFiles(files)
			return nil, nil, err
		}
		if l.lock != nil {
			if err := add(listenerRecord{Name: "lock", Path: l.lock.Name()}, l.lock); err != nil {
				closeFiles(files)
				return nil, nil, err
			}
		}
	}
	if d.http != nil {
		if c, ok := d.http.ln.(syscall.Conn); ok {
			if err := add(listenerRecord{Name: "http"}, c); err != nil {
				closeFiles(files)
				return nil, nil, err
			}
		}
	}
	return recs, files, nil
}

// adoptSessions resumes each session the old daemon sends, until it says
// this process is the main one or goes away.
func (d *Daemon) adoptSessions(w *wire) {
	defer w.close()
	// A drain does not wait for a daemon that stays silent.
	stop := context.AfterFunc(d.draining, func() { w.c.Close() })
	defer stop()
	adopted, servers := 0, 0
	for {
		m, files, err := w.recv(time.Time{})
		if err != nil {
			d.log.Warn("upgrade: the running daemon went away", "error", err, "sessions", adopted)
			return
		}
		switch m.Type {
		case "session":
			if m.Session == nil || m.Session.Session == nil {
				closeFiles(files)
				continue
			}
			if err := d.resumeSession(*m.Session, files); err != nil {
				d.log.Error("upgrade: a session could not be resumed", "session", m.Session.Session.ID, "error", err)
				continue
			}
			adopted++
		case "done":
			closeFiles(files)
			d.log.Info("upgrade: every session serves here", "sessions", adopted)
			if err := w.send(upgradeMsg{Type: "adopted"}); err != nil {
				d.log.Warn("upgrade: the running daemon cannot be told", "error", err)
			}
		case "upstream":
			// A hosted server handed over: the manager, which does not
			// serve yet, takes it (upstream/instance_handover.go).
			if m.Upstream == nil {
				closeFiles(files)
				continue
			}
			k := *m.Upstream
			k.Files = files
			d.ups.Adopt(k)
			servers++
		case "main":
			closeFiles(files)
			if servers > 0 {
				d.log.Info("upgrade: hosted servers handed over", "servers", servers)
			}
			d.notify.held.Store(false)
			d.notify.send("READY=1", d.statusLine())
			return
		default:
			closeFiles(files)
		}
	}
}

// RefuseUpgrade tells the daemon that started this process for an upgrade
// why it cannot serve (a configuration it refuses, say), when f, the
// descriptor UpgradeEnv names, is not nil; the caller exits afterwards. It
// is for a failure before a Daemon exists: Run says its own.
func RefuseUpgrade(f *os.File, reason error) {
	if f == nil {
		return
	}
	w, err := newWire(f)
	if err != nil {
		return
	}
	defer w.close()
	_ = w.send(upgradeMsg{Type: "error", Error: reason.Error()})
}

// resumeSession starts, in this process, a session handed over with its
// descriptors: files are the device's, then the control connection of its
// `snodod connect` (m.Control), then its crash record (m.Journal). It
// takes ownership of files.
func (d *Daemon) resumeSession(m movedSession, files []*os.File) error {
	rec := m.Session
	n := rec.Device.Files
	want := n
	if m.Control {
		want++
	}
	if m.Journal {
		want++
	}
	if len(files) != want {
		closeFiles(files)
		return fmt.Errorf("%d descriptors, want %d", len(files), want)
	}
	devFiles, rest := files[:n], files[n:]
	var ctlFile, jf *os.File
	if m.Control {
		ctlFile, rest = rest[0], rest[1:]
		defer ctlFile.Close() // ctl and the store hold duplicates
	}
	if m.Journal {
		jf = rest[0]
	}
	var ctl *net.UnixConn
	if ctlFile != nil {
		if c, err := net.FileConn(ctlFile); err == nil {
			if ctl, _ = c.(*net.UnixConn); ctl == nil {
				c.Close()
			}
		}
		if ctl == nil {
			closeFiles(append(devFiles, jf))
			return errors.New("the control connection of its snodod connect cannot be served")
		}
	}
	fail := func(err error) error {
		if ctl != nil {
			ctl.Close()
		}
		return err
	}
	at := place{via: m.Via, view: m.View, cwd: m.Cwd}
	e := d.sessions.resume(rec.ID, rec.Device.Peer.UID, at)
	if e == nil {
		closeFiles(append(devFiles, jf))
		return fail(fmt.Errorf("session %d cannot enter the table: the daemon is draining, or serves that id already", rec.ID))
	}
	var ctlFiles []*os.File
	if ctlFile != nil {
		ctlFiles = []*os.File{ctlFile}
	}
	cfg, err := d.sessionConfig(e, d.gen.Load(), append(slices.Clip(devFiles), ctlFiles...), jf)
	if err != nil {
		closeFiles(devFiles)
		d.sessions.reap(e)
		return fail(err)
	}
	s, err := session.Resume(rec, devFiles, cfg)
	if err != nil {
		cfg.Ended(nil) // releases the view and the record, and reaps e
		return fail(err)
	}
	d.serve(e, s, ctlFiles)
	d.log.Info("session resumed", "session", rec.ID, "via", m.Via, "kind", rec.Device.Kind, "peer_pid", rec.Device.Peer.PID, "lost", len(rec.Lost))
	if ctl != nil {
		d.waiters.Add(1)
		go func() {
			defer d.waiters.Done()
			defer ctl.Close()
			d.awaitEnd(ctl, e)
		}()
	}
	return nil
}

// resumeLocally resumes here the sessions a failed upgrade had paused,
// each under its id once its entry, which its hand-over ended, is reaped.
func (d *Daemon) resumeLocally(sent []movedFiles) {
	for _, m := range sent {
		select {
		case <-d.sessions.reapedCh(m.from):
		case <-time.After(upgradeAdoptMargin): // resumeSession says why it cannot
		}
		if err := d.resumeSession(m.m, m.files); err != nil {
			d.log.Error("a session paused for a failed upgrade could not be resumed", "session", m.m.Session.ID, "error", err)
		}
	}
	if len(sent) > 0 {
		d.log.Warn("the upgrade failed after sessions were paused; they are served here again", "sessions", len(sent))
	}
}

// filePair returns the two ends of a new Unix stream socket pair.
func filePair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "upgrade"), os.NewFile(uintptr(fds[1]), "upgrade"), nil
}

// dupFile duplicates c's descriptor (close-on-exec) without changing its
// mode, which os.File.Fd and net's File would.
func dupFile(c syscall.Conn, name string) (*os.File, error) {
	var dup int
	err := session.Control(c, func(fd int) error {
		var err error
		dup, err = unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(dup), name), nil
}
