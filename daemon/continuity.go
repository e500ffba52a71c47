package daemon

import (
	"net"
	"os"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/upstream"
)

// Continuity is how the sessions outlive the process that serves them
// (docs/operations.md). A process comes to serve in one of two ways, its
// origin:
//
//   - it starts afresh, on new sockets or on systemd's, and under
//     systemd's descriptor store resumes the sessions a crashed
//     predecessor kept there, each from its crash record (freshStart,
//     below; crash.go, journal.go, fdstore.go);
//   - an upgrade started it: it takes the listeners, then the sessions,
//     from the daemon that started it, over their private socket
//     (takeover, adopt.go; upgrade_wire.go).
//
// and it leaves in one way, to its successor (upgrade.go): the process an
// upgrade starts, which takes over.
//
// Whatever the way, a session travels as a movedSession (its
// session.Record, where it is served, which descriptors come with it):
// pause writes one from a table entry, and resumeSession reads one,
// handed over or rebuilt from a crash record, into a new entry of the
// table (table.go). Run knows neither way: it asks its origin for the
// listeners, then to resume what the predecessor left.
//
// The hosted servers travel too, after the sessions: the old daemon's
// manager hands each idle shared server over instead of stopping it
// (upstream/instance_handover.go), the successor sends it (sendServer:
// its record and its three pipes), and the new daemon's manager adopts it
// before it serves (takeover.adoptSessions). The processes never stop,
// and were never the new daemon's children: they start without a
// parent-death signal (proc.StartKept), and the new daemon watches them
// through pidfds (proc.Adopt).

// origin is where a process's listeners and sessions come from. Run calls
// listen, then, once it serves the listeners, resume; refuse when it
// cannot serve after all.
type origin interface {
	// listen returns the listeners to serve, and the HTTP listener when
	// the predecessor passed one.
	listen(cfg *config.Config) ([]*listener, net.Listener, error)
	// resume resumes the sessions the predecessor left, calls
	// startUpstreams once the predecessor's hosted servers are gone
	// (at once, or later on another goroutine), and says this process
	// is ready: to systemd, or to the predecessor.
	resume(startUpstreams func())
	// refuse tells the predecessor waiting for this process, if any,
	// why it cannot serve.
	refuse(err error)
}

// newOrigin returns the origin of a process started with opts.
func (d *Daemon) newOrigin(opts Options) origin {
	if opts.Upgrade != nil {
		return &takeover{d: d, f: opts.Upgrade}
	}
	return &freshStart{d: d}
}

// freshStart is the origin of a daemon no upgrade started: systemd's
// sockets or new ones, and the sessions systemd kept through a crash.
type freshStart struct {
	d      *Daemon
	stored map[string][]*os.File // the crash's sessions, by name, until resume
}

func (o *freshStart) listen(cfg *config.Config) ([]*listener, net.Listener, error) {
	ls, stored, err := o.d.listen(cfg)
	o.stored = stored
	return ls, nil, err
}

func (o *freshStart) resume(startUpstreams func()) {
	startUpstreams()
	if o.stored != nil {
		o.d.recoverSessions(o.stored)
		o.stored = nil
	}
	o.d.notify.send("READY=1", o.d.statusLine())
}

func (o *freshStart) refuse(error) {}

// successor is the process an upgrade hands the daemon over to, once it
// serves the listeners (startSuccessor). Its methods are called from
// Run's goroutine, in this order: send for each session, finish, then
// promote, or kill at any point.
type successor interface {
	pid() int
	// send hands it one paused session and its descriptors, which stay
	// the caller's.
	send(m movedSession, files []*os.File) error
	// finish tells it every session was sent, and waits until it serves
	// them all.
	finish() error
	// adoptsServers says it takes hosted servers over (sendServer).
	adoptsServers() bool
	// sendServer hands it one hosted server (after finish, before
	// promote); the server's files stay the caller's.
	sendServer(k upstream.KeptServer) error
	// promote makes it the main process (systemd follows it; it starts
	// its hosted servers) and lets it go on alone.
	promote()
	// kill ends it, and waits for its end; the caller resumes the
	// sessions it sent.
	kill()
}
