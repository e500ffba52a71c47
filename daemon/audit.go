package daemon

import (
	"os"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/audit"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

// The audit log (docs/observability.md, "Audit log"): the daemon's
// Observer tells auditSink of every request; the sink hands it to the
// audit.Log of the [audit] settings in force, if any. Run opens it; a
// reload (SIGHUP) opens the one of changed settings, closing the old
// one once it is no longer told, or reopens the file of unchanged ones
// (after logrotate moved it).

// auditSink is the daemon's part of the audit log. Its RequestEnded may
// be called from any goroutine; apply and close from one at a time.
type auditSink struct {
	log     atomic.Pointer[audit.Log]
	mu      sync.Mutex
	cfg     config.Audit // the settings of log
	secrets []string
	dropped atomic.Uint64 // across the logs of every reload
}

// RequestEnded tells the log in force of e.
func (a *auditSink) RequestEnded(e server.RequestEnd) {
	if l := a.log.Load(); l != nil {
		l.RequestEnded(e)
	}
}

// Idle is true while no log is in force: when the sink is the daemon's
// only Observer (no metrics, no traces) a request then reads no clock
// and tells nothing (server.Idler), and a reload that opens a log makes
// the requests after it observed again.
func (a *auditSink) Idle() bool { return a.log.Load() == nil }

// Dropped is how many records the queue had no room for.
func (a *auditSink) Dropped() uint64 { return a.dropped.Load() }

// apply makes cfg's [audit] settings the log's: it opens a log for new
// settings (none when off), and reopens the file of unchanged ones. On
// error the log in force stays.
func (d *Daemon) applyAudit(cfg *config.Config) error {
	a := &d.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	secrets := cfg.SecretValues()
	old := a.log.Load()
	if old != nil && reflect.DeepEqual(a.cfg, cfg.Audit) && reflect.DeepEqual(a.secrets, secrets) {
		return old.Reopen()
	}
	var l *audit.Log
	if cfg.Audit.On() {
		var err error
		l, err = audit.Open(audit.Options{File: cfg.Audit.File, Journald: cfg.Audit.Journald,
			MaxSize: int64(cfg.Audit.MaxSize), MaxFiles: cfg.Audit.MaxFiles, Arguments: cfg.Audit.Arguments,
			Secrets: secrets, Dropped: &a.dropped, Logger: d.log})
		if err != nil {
			return err
		}
	}
	a.log.Store(l)
	a.cfg, a.secrets = cfg.Audit, secrets
	if old != nil {
		old.Close() // what it queued is written; a request still telling it queues into the old channel no more
	}
	if l != nil {
		d.log.Info("audit log", "file", cfg.Audit.File, "journald", cfg.Audit.Journald, "arguments", cfg.Audit.Arguments)
	}
	return nil
}

// closeAudit writes what is queued and closes the log.
func (d *Daemon) closeAudit() {
	a := &d.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.log.Swap(nil); l != nil {
		l.Close()
	}
}

// peerOf is a socket session's peer: its uid, pid and executable
// (/proc/PID/exe, "" when it cannot be read, as for another user's
// process). pid 0 (a session resumed by an upgrade) leaves the pid and
// executable unknown.
func peerOf(uid, pid int) server.Peer {
	p := server.Peer{Known: true, UID: uid, PID: pid}
	if pid > 0 {
		p.Exe, _ = os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	}
	return p
}

// syncAudit returns once the log in force has written what was queued
// (tests, benchmarks).
func (d *Daemon) syncAudit() {
	if l := d.audit.log.Load(); l != nil {
		l.Sync()
	}
}
