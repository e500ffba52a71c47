package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/snodod/snodod/session"
)

// Crash survival under systemd (docs/operations.md): each
// session's descriptors and its crash record (journal.go) are in systemd's
// descriptor store (fdstore.go). When the daemon is killed (SIGKILL, a
// panic, the OOM killer), systemd starts it again (Restart=on-failure) and
// passes the stored descriptors back, named session-<id>, after the
// sockets; recoverSessions resumes each session from its record: the same
// id, device, view and runtime state, its listen streams reopened, and
// each request that was in flight answered -32603 "snodod restarted; this
// request was lost". What the crashed process had read and not yet
// admitted is lost; so is a frame it was writing. Without systemd a crash
// still ends every session.

// openJournal makes the crash record of e's session when the store is in
// use (e.journal stays nil otherwise): in jf, the memfd its predecessor
// used, else in a new one. files are the session's descriptors, which the
// record identifies. It takes ownership of jf.
func (d *Daemon) openJournal(e *entry, files []*os.File, jf *os.File) {
	if !d.store.enabled {
		if jf != nil {
			jf.Close()
		}
		return
	}
	at := e.at
	base := crashRecord{Via: at.via, View: at.view, Cwd: at.cwd, Control: at.via == "connect"}
	for _, f := range files {
		fid, err := identify(f)
		if err != nil {
			d.log.Warn("a session's descriptor cannot be identified; it will not survive a crash", "session", e.id, "error", err)
			if jf != nil {
				jf.Close()
			}
			return
		}
		base.Files = append(base.Files, fid)
	}
	onError := func(err error) {
		d.log.Warn("the session's crash record cannot be kept; it will not survive a crash", "session", e.id, "error", err)
	}
	var j *journal
	var err error
	if jf != nil {
		if j, err = mapJournal(jf, base, onError); err != nil {
			jf.Close()
		}
	} else {
		j, err = newJournal(e.id, base, onError)
	}
	if err != nil {
		onError(err)
		return
	}
	e.journal = j
}

// closeJournal ends the crash record of e's session once the session has
// ended: its descriptors leave the store, unless the session was handed
// over (the new process goes on with them). s is nil for a session that
// never ran.
func (d *Daemon) closeJournal(e *entry, s *session.Session) {
	j := e.journal
	if j == nil {
		return
	}
	if s == nil || s.Reason() != session.ReasonHandedOver {
		d.store.remove(fdStoreName(e.id))
	}
	j.close()
}

// journalFile returns a duplicate of the crash record of e's session, to
// hand over with the session; nil without one.
func (d *Daemon) journalFile(e *entry) *os.File {
	if e.journal == nil {
		return nil
	}
	f, err := dupFile(e.journal.f, "crash record")
	if err != nil {
		d.log.Warn("the crash record of a session cannot be passed on", "session", e.id, "error", err)
		return nil
	}
	return f
}

// recoverSessions resumes the sessions whose descriptors systemd passed
// back after a crash (stored: by name, session-<id>). A session that
// cannot be resumed is dropped from the store and its descriptors closed:
// its client sees its connection end.
func (d *Daemon) recoverSessions(stored map[string][]*os.File) {
	names := make([]string, 0, len(stored))
	for name := range stored {
		names = append(names, name)
	}
	slices.Sort(names)
	resumed := 0
	for _, name := range names {
		files := stored[name]
		if err := d.recoverSession(name, files); err != nil {
			d.log.Error("a session kept through a crash cannot be resumed; ending it", "name", name, "error", err)
			d.store.remove(name)
			continue
		}
		resumed++
	}
	if resumed > 0 {
		d.log.Info("resumed the sessions kept through a crash", "sessions", resumed)
	}
}

// recoverSession resumes one session from its stored descriptors.
func (d *Daemon) recoverSession(name string, files []*os.File) error {
	id, err := strconv.ParseUint(strings.TrimPrefix(name, "session-"), 10, 64)
	if err != nil || id == 0 {
		closeFiles(files)
		return fmt.Errorf("%q names no session", name)
	}
	var rec *crashRecord
	var lost []json.RawMessage
	var jf *os.File
	var others []*os.File
	for _, f := range files {
		if rec == nil {
			if r, l, err := readJournal(f); err == nil {
				rec, lost, jf = r, l, f
				continue
			} else if err != errNotJournal {
				closeFiles(files)
				return err
			}
		}
		others = append(others, f)
	}
	if rec == nil {
		closeFiles(files)
		return fmt.Errorf("no crash record among its %d descriptors", len(files))
	}
	// systemd passes them in an order of its own: each goes where its
	// identity is in the record.
	ordered := make([]*os.File, len(rec.Files))
	for _, f := range others {
		fid, err := identify(f)
		i := slices.Index(rec.Files, fid)
		for i >= 0 && ordered[i] != nil { // two descriptors of one description
			next := slices.Index(rec.Files[i+1:], fid)
			if next < 0 {
				i = -1
				break
			}
			i += 1 + next
		}
		if err != nil || i < 0 {
			f.Close()
			continue
		}
		ordered[i] = f
	}
	for _, f := range ordered {
		if f == nil {
			closeFiles(append(ordered, jf))
			return fmt.Errorf("its record names %d descriptors; not all came back", len(rec.Files))
		}
	}
	rec.Session.ID = id
	rec.Session.Lost = lost
	m := movedSession{Session: rec.Session, Via: rec.Via, View: rec.View, Cwd: rec.Cwd, Control: rec.Control, Journal: true}
	return d.resumeSession(m, append(ordered, jf))
}

// fdsPerSession bounds the descriptors a session keeps in the store: its
// device (one or two), the control connection of its connect, its crash
// record. storeSpare is the room the shipped units leave besides them
// (FileDescriptorStoreMax = daemon.max_sessions × 4 + 16,
// docs/operations.md).
const (
	fdsPerSession = 4
	storeSpare    = 16
)

// checkStore warns when the store is smaller than the shipped units'
// FileDescriptorStoreMax rule for daemon.max_sessions: sessions beyond it
// would not survive a crash. The warning's figure is the one it checks.
func (d *Daemon) checkStore() {
	if !d.store.enabled {
		return
	}
	if need, short := storeShort(d.store.max, d.gen.Load().limits.MaxSessions); short {
		d.log.Warn("systemd's descriptor store is smaller than daemon.max_sessions needs; sessions beyond it will not survive a crash",
			"FileDescriptorStoreMax", d.store.max, "needed", need)
	}
}

// storeShort reports the store size maxSessions need, and whether a store
// of size (0: unknown, as before systemd 254) is known to be smaller.
func storeShort(size, maxSessions int) (need int, short bool) {
	need = maxSessions*fdsPerSession + storeSpare
	return need, size > 0 && size < need
}
