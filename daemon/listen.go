package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// AlreadyRunningError is returned by Run when another process answers on
// one of the daemon's socket paths, or holds its lock.
type AlreadyRunningError struct {
	// Path is the socket that answers.
	Path string
	// Key is the configuration key naming it: daemon.socket or
	// daemon.control_socket.
	Key string
	// Locked is true when the other daemon was seen by its lock rather
	// than by an answer (it is starting or stopping).
	Locked bool
}

func (e *AlreadyRunningError) Error() string {
	if e.Locked {
		return fmt.Sprintf("snodod is already running (it holds %s.lock); stop it or choose another %s", e.Path, e.Key)
	}
	return fmt.Sprintf("snodod is already running (socket %s answers); stop it or choose another %s", e.Path, e.Key)
}

// listener is one of the daemon's listening sockets.
type listener struct {
	name string // "session" or "control"
	path string // the socket's path; "" for an unnamed activated socket
	ln   *net.UnixListener
	// lock is held while the socket is served, so that two daemons
	// starting at once cannot both decide a socket is stale and replace
	// each other's. Nil for the control socket and a socket systemd passed.
	lock *os.File
	// created is false for a socket systemd passed.
	created bool
}

// stop stops listening: the socket is closed and a socket the daemon
// created is unlinked, so nobody connects to it any more. Close releases
// the rest. Both may be called more than once.
func (l *listener) stop() { _ = l.ln.Close() }

// close stops listening and releases the lock. A socket the daemon created is unlinked (net's
// default for a listener it made); one passed by systemd is left alone,
// since systemd owns it and listens on it again after we exit. The lock
// file is removed while it is still locked, then released: a daemon that
// opened it before the removal and locks it after finds it unlinked and
// starts over (lockSocket), so no two daemons ever hold locks at once.
func (l *listener) close() {
	l.stop()
	if l.lock != nil {
		_ = os.Remove(l.lock.Name())
		_ = l.lock.Close()
	}
}

// release closes the listener and its lock, leaving the socket file and
// the lock file in place: after an upgrade the new process serves them
// (it holds duplicates of both descriptors, and so the lock).
func (l *listener) release() {
	l.ln.SetUnlinkOnClose(false)
	_ = l.ln.Close()
	if l.lock != nil {
		_ = l.lock.Close()
	}
}

// listenUnix makes the socket at path, named for key in messages: its
// directory is created with mode 0700 (and refused if others can enter it),
// a stale socket file is replaced, and a live one is an
// *AlreadyRunningError. With lock, path+".lock" is locked first: the
// session socket's lock stands for the whole daemon, so its control socket
// needs none.
func listenUnix(name, path, key string, lock bool) (*listener, error) {
	if err := prepareDir(filepath.Dir(path), key); err != nil {
		return nil, err
	}
	var lockFile *os.File
	if lock {
		var err error
		if lockFile, err = lockSocket(path, key); err != nil {
			return nil, err
		}
	}
	unlock := func() {
		if lockFile != nil {
			lockFile.Close()
		}
	}
	if err := removeStale(path, key); err != nil {
		unlock()
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		unlock()
		return nil, fmt.Errorf("listen on %s (%s): %w", path, key, err)
	}
	// bind(2) creates the file with 0777 minus the umask; other users
	// cannot reach it in the meantime, because the directory is 0700.
	// (A process-wide umask change would race with other goroutines.)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		unlock()
		return nil, fmt.Errorf("set the mode of %s: %w", path, err)
	}
	return &listener{name: name, path: path, ln: ln, lock: lockFile, created: true}, nil
}

// prepareDir creates dir with mode 0700 when it is missing, and refuses a
// directory that another uid owns or that lets group or others in: the
// socket's own mode is not enough on every system (some BSDs ignore it), and
// a directory someone else can write to lets them replace the socket. A
// symlink in its place is refused too, wherever it points: whoever can
// change the link (or its target) decides where the sockets go, and the
// checks below would judge the target, not the path clients use.
func prepareDir(dir, key string) error {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return fmt.Errorf("socket directory %s is a symlink (to %s); snodod does not follow it: remove it, or set %s to a path in the real directory",
			dir, target, key)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the socket directory %s (%s): %w", dir, key, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s (%s): %w", dir, key, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory; choose another %s", dir, key)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("socket directory %s is owned by uid %d, not by snodod's uid %d; choose a directory of your own for %s, or chown %d %s",
			dir, st.Uid, os.Geteuid(), key, os.Geteuid(), dir)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("socket directory %s has mode %04o, which lets other users in; run chmod 700 %s, or choose another directory for %s",
			dir, perm, dir, key)
	}
	return nil
}

// lockSocket takes an exclusive flock on path+".lock", held until the
// returned file is closed (the kernel releases it when the process dies,
// so a lock is never stale). A lock taken on a file that was removed or
// replaced since it was opened (its owner's clean exit removes it) locks
// nothing anyone else sees: it is dropped and the file opened again.
func lockSocket(path, key string) (*os.File, error) {
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock %s (%s): %w", path, key, err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				if dialable(path) {
					return nil, &AlreadyRunningError{Path: path, Key: key}
				}
				return nil, &AlreadyRunningError{Path: path, Key: key, Locked: true}
			}
			return nil, fmt.Errorf("lock %s.lock (%s): %w", path, key, err)
		}
		if current(f) {
			return f, nil
		}
		f.Close()
		if attempt == 10 { // another process keeps replacing it
			return nil, fmt.Errorf("lock %s.lock (%s): the file keeps being replaced", path, key)
		}
	}
}

// current reports whether the open file f is still the one at its path.
func current(f *os.File) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(f.Name())
	return err == nil && os.SameFile(held, now)
}

// removeStale removes a socket file that no process listens on. A Unix
// socket's file outlives its listener when the process dies without
// closing it (kill -9, a crash), and bind(2) then fails with EADDRINUSE.
// Whether the file is stale can only be told by connecting: ECONNREFUSED
// means nobody listens, while a successful connect means a daemon is
// running and must be left alone.
func removeStale(path, key string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s (%s): %w", path, key, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket; remove it or choose another %s", path, key)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return &AlreadyRunningError{Path: path, Key: key}
	case errors.Is(err, syscall.ECONNREFUSED):
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove the stale socket %s: %w", path, err)
		}
		return nil
	default:
		return fmt.Errorf("cannot tell whether a daemon answers on %s (%s): %w", path, key, err)
	}
}

// dialable reports whether something accepts connections at path.
func dialable(path string) bool {
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
