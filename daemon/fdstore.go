package daemon

import (
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// systemd's file descriptor store (sd_notify(3) FDSTORE=1; systemd.io's
// FILE_DESCRIPTOR_STORE): under a unit with FileDescriptorStoreMax=,
// every session's descriptors and its crash record (journal.go) are kept
// by the service manager, named session-<id>, so that after a crash the
// restarted daemon gets them back (LISTEN_FDS, crash.go) and the clients
// never see their connection close. A session that ends is removed
// (FDSTOREREMOVE=1). The store is used whenever NOTIFY_SOCKET is set:
// systemd 254 and later say FileDescriptorStoreMax= in $FDSTORE (and set
// none for 0), earlier ones say nothing, so an absent $FDSTORE cannot tell
// a store of 0 from an older systemd. The shipped units set the setting;
// a unit without it gets systemd's warnings, one per session.

// fdStoreName names a session's descriptors in the store.
func fdStoreName(id uint64) string { return "session-" + strconv.FormatUint(id, 10) }

// fdStore sends sessions' descriptors to the store. Its methods may be
// called from any goroutine; when the store is not in use they do nothing.
type fdStore struct {
	enabled bool
	socket  string // NOTIFY_SOCKET
	max     int    // FileDescriptorStoreMax= as $FDSTORE says it; 0 when it does not
	log     *slog.Logger
	failed  sync.Once

	mu   sync.Mutex
	held bool // not the main process yet (an upgrade): queue
	// queue holds, while held, what to store: duplicates of the
	// descriptors, by name, in order.
	queue []queuedStore
}

type queuedStore struct {
	name  string
	files []*os.File
}

func newFDStore(log *slog.Logger) *fdStore {
	s := &fdStore{socket: os.Getenv("NOTIFY_SOCKET"), log: log}
	s.enabled = s.socket != ""
	if v, ok := os.LookupEnv("FDSTORE"); ok {
		n, err := strconv.Atoi(v)
		s.enabled = s.enabled && err == nil && n > 0
		s.max = max(n, 0)
	}
	return s
}

// store keeps files in the store under name (they stay the caller's).
func (s *fdStore) store(name string, files ...*os.File) {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	if s.held {
		var dups []*os.File
		for _, f := range files {
			if d, err := dupFile(f, f.Name()); err == nil {
				dups = append(dups, d)
			}
		}
		s.queue = append(s.queue, queuedStore{name: name, files: dups})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.send("FDSTORE=1\nFDNAME="+name, files...)
}

// remove drops name's descriptors from the store.
func (s *fdStore) remove(name string) {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	if s.held {
		kept := s.queue[:0]
		for _, q := range s.queue {
			if q.name == name {
				closeFiles(q.files)
				continue
			}
			kept = append(kept, q)
		}
		s.queue = kept
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.send("FDSTOREREMOVE=1\nFDNAME=" + name)
}

// hold queues what is stored until release: systemd accepts descriptors
// from the main process only (NotifyAccess=main), and a process an
// upgrade started is not the main one until the old daemon says so.
func (s *fdStore) hold() {
	s.mu.Lock()
	s.held = true
	s.mu.Unlock()
}

// release stores what was queued and stores at once from now on.
func (s *fdStore) release() {
	s.mu.Lock()
	q := s.queue
	s.queue, s.held = nil, false
	s.mu.Unlock()
	for _, e := range q {
		s.send("FDSTORE=1\nFDNAME="+e.name, e.files...)
		closeFiles(e.files)
	}
}

// send sends one notification with files attached (SCM_RIGHTS), as
// sd_pid_notify_with_fds(3) does: a datagram to NOTIFY_SOCKET, an abstract
// socket when it starts with "@".
func (s *fdStore) send(state string, files ...*os.File) {
	if err := notifyWithFiles(s.socket, state, files...); err != nil {
		s.failed.Do(func() {
			s.log.Warn("sd_notify with descriptors failed; sessions may not survive a crash", "error", err)
		})
	}
}

func notifyWithFiles(socket, state string, files ...*os.File) error {
	// A connected datagram socket takes no ancillary data in Go
	// (WriteMsgUnix refuses it), so this is sendmsg(2) on a socket of its
	// own, as libsystemd does. x/sys/unix reads a leading "@" as the
	// abstract namespace.
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var rights []byte
	if len(files) > 0 {
		fds, err := rawFDs(files)
		if err != nil {
			return err
		}
		rights = unix.UnixRights(fds...)
	}
	err = unix.Sendmsg(fd, []byte(state), rights, &unix.SockaddrUnix{Name: socket}, 0)
	runtime.KeepAlive(files)
	return err
}
