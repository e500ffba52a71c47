package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/mcpclient"
)

// Hosted servers survive an upgrade (docs/operations.md, "Upgrading";
// docs/architecture.md §10): the daemon being replaced calls KeepServers
// before it stops the manager, and every shared instance (share = "all")
// of a server on stdio that is ready with nothing in flight is then
// handed over (mcpclient.Conn.HandOver) instead of stopped; KeptServers
// returns them once Serve has returned. The new daemon calls Adopt for
// each before its manager serves: an instance of the same name and the
// same fingerprint (docs/upstreams.md §4: what a reload would restart
// for) takes the process over at its first start (mcpclient.Adopt: no
// second initialize), lists its catalog again, and is ready, with the
// old instance's restart count; one whose entry changed or is gone is
// stopped (and, changed, started anew as after a reload). Everything
// else (an instance per cwd or per session, a remote server, a server
// busy at that moment) stops and starts again as before.

// KeptServer is a hosted server handed over by an upgrade: its instance
// and its connection, and Files (the server's stdin, stdout and stderr)
// that travel beside the record.
type KeptServer struct {
	Name string `json:"name"`
	// Fingerprint is the entry's (fingerprint): a different one in the
	// new configuration restarts the server.
	Fingerprint string               `json:"fingerprint"`
	Restarts    int                  `json:"restarts,omitempty"`
	ReadySince  time.Time            `json:"ready_since"`
	Sandbox     *sandbox.Report      `json:"sandbox,omitempty"`
	Conn        mcpclient.HandedOver `json:"conn"`
	Files       []*os.File           `json:"-"`
}

// keepWait bounds the wait for a health ping in flight before a server
// is handed over.
const keepWait = time.Second

// handOver is the Manager's state of a hand-over, in either process.
type handOver struct {
	mu      sync.Mutex
	keeping bool                   // KeepServers was called: hand over instead of stopping
	kept    []KeptServer           // handed over, until KeptServers
	adopted map[string]*KeptServer // by name: to be taken by the shared instance's first start
}

// records reports whether the manager records its process groups (a state
// directory, and not NoRecord): only then do its servers start kept
// (without a parent-death signal), the record standing in for it after a
// crash.
func (m *Manager) records() bool { return m.cache.dir != "" && !m.opts.NoRecord }

// KeepServers makes the shutdown that follows (the end of Serve's ctx)
// hand the eligible servers over instead of stopping them.
func (m *Manager) KeepServers() {
	m.ho.mu.Lock()
	m.ho.keeping = true
	m.ho.mu.Unlock()
}

// KeptServers returns the servers handed over since KeepServers, once
// Serve has returned; the caller owns their files.
func (m *Manager) KeptServers() []KeptServer {
	m.ho.mu.Lock()
	defer m.ho.mu.Unlock()
	k := m.ho.kept
	m.ho.kept = nil
	return k
}

// Adopt takes a server the daemon this one replaces handed over, before
// Serve; it owns k.Files. A server this configuration does not have as it
// was (its name, its fingerprint, share = "all") is stopped at once.
func (m *Manager) Adopt(k KeptServer) {
	m.mu.Lock()
	u := m.ups[k.Name]
	m.mu.Unlock()
	why := ""
	switch {
	case u == nil:
		why = "it is no longer configured"
	case u.fingerprint != k.Fingerprint:
		why = "its entry changed; it starts anew"
	case u.isRemote() || u.conf().Share != "all" || u.conf().Disabled:
		why = "its entry changed"
	}
	if why != "" {
		m.log.Info("upgrade: stopping a hosted server the previous daemon handed over", "upstream", k.Name, "pid", k.Conn.PID, "why", why)
		m.stopKept(k)
		return
	}
	m.ho.mu.Lock()
	defer m.ho.mu.Unlock()
	if m.ho.adopted == nil {
		m.ho.adopted = map[string]*KeptServer{}
	}
	if old := m.ho.adopted[k.Name]; old != nil {
		m.stopKept(*old)
	}
	m.ho.adopted[k.Name] = &k
}

// stopKept stops a handed-over server this process does not serve: it
// is adopted, then stopped gracefully (stdin closed, SIGTERM, SIGKILL),
// on a goroutine of its own, within the stop grace.
func (m *Manager) stopKept(k KeptServer) {
	conn, err := mcpclient.Adopt(k.Conn, k.Files, mcpclient.Command{StopGrace: m.stopGrace() / 2}, mcpclient.Options{Name: k.Name, Logger: m.log})
	if err != nil {
		m.log.Warn("upgrade: a hosted server handed over could not be adopted to be stopped", "upstream", k.Name, "pid", k.Conn.PID, "error", err)
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.stopGrace())
		defer cancel()
		conn.Stop(ctx)
	}()
}

// takeAdopted returns the server handed over for in, if any, once.
func (m *Manager) takeAdopted(in *instance) *KeptServer {
	if in.key != "" {
		return nil
	}
	m.ho.mu.Lock()
	defer m.ho.mu.Unlock()
	k := m.ho.adopted[in.u.name]
	delete(m.ho.adopted, in.u.name)
	return k
}

// keep hands conn over instead of stopping it, at the end of Serve's ctx
// after KeepServers, when in is eligible; it reports whether it did.
func (in *instance) keep(conn *mcpclient.Conn) bool {
	m := in.u.m
	m.ho.mu.Lock()
	keeping := m.ho.keeping
	m.ho.mu.Unlock()
	if !keeping || in.key != "" || in.u.isRemote() || in.busy() {
		return false
	}
	// A health ping may be on its way: it is waited for, a moment.
	for deadline := time.Now().Add(keepWait); conn.InFlight() > 0 && time.Now().Before(deadline); {
		select {
		case <-conn.Done():
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	h, files, err := conn.HandOver()
	if err != nil {
		m.log.Info("upgrade: a hosted server is stopped, not handed over", "upstream", in.u.name, "pid", conn.PID(), "why", err)
		return false
	}
	in.mu.Lock()
	k := KeptServer{Name: in.u.name, Fingerprint: in.u.fingerprint, Restarts: in.restarts, ReadySince: in.readySince,
		Sandbox: in.sandboxReport, Conn: *h, Files: files}
	in.conn = nil
	in.setLocked(StateStopped)
	in.mu.Unlock()
	m.ho.mu.Lock()
	m.ho.kept = append(m.ho.kept, k)
	m.ho.mu.Unlock()
	m.log.Info("upgrade: a hosted server is handed over to the new daemon", "upstream", in.u.name, "pid", h.PID)
	return true
}

// adopt serves the process k hands over as in's: its catalog listed again
// (tools/list and the others; never a second initialize) within
// start_timeout, then ready, as spawn leaves a started one. On error the
// process has been stopped.
func (in *instance) adopt(ctx context.Context, k *KeptServer) (*mcpclient.Conn, error) {
	m := in.u.m
	if !m.reserveChild() {
		m.stopKept(*k)
		return nil, errNoChildSlot
	}
	cmd := in.cmd
	cmd.Stderr = in.u.ring
	if rec := m.GroupRecord(); rec != nil {
		cmd.Record = rec
	}
	conn, err := mcpclient.Adopt(k.Conn, k.Files, cmd, in.options())
	if err != nil {
		m.releaseChild()
		return nil, err
	}
	startCtx, cancel := context.WithTimeout(ctx, in.u.conf().StartTimeout)
	defer cancel()
	cat, err := listCatalog(startCtx, conn, m.log.With("upstream", in.u.name))
	if err != nil {
		stopNow(conn)
		m.releaseChild()
		return nil, fmt.Errorf("list the catalog of the server handed over: %w", err)
	}
	in.u.listed(cat)
	in.mu.Lock()
	in.conn, in.lastUsed = conn, time.Now()
	in.readySince = k.ReadySince
	in.restarts = k.Restarts
	in.sandboxReport = k.Sandbox
	in.lastAttempt = time.Now()
	in.setLocked(StateReady)
	in.mu.Unlock()
	in.resubscribe(conn)
	in.u.ring.Mark(fmt.Sprintf("snodod: %s adopted from the previous daemon (pid %d)", in.u.name, conn.PID()))
	m.log.Info("upstream ready", "upstream", in.u.name, "instance", in.label, "pid", conn.PID(), "era", conn.Era(), "version", conn.Version(), "adopted", true)
	return conn, nil
}

// serveAdopted runs in's first start on the process handed over, if
// any: it reports whether the loop should go on (ok), and whether the
// next start should be at once (again: the adoption failed, and the
// server was running before the upgrade).
func (in *instance) serveAdopted(ctx context.Context) (ok, again bool) {
	k := in.u.m.takeAdopted(in)
	if k == nil {
		return true, false
	}
	conn, err := in.adopt(ctx, k)
	if err != nil {
		if errors.Is(err, errNoChildSlot) {
			return true, true
		}
		in.u.m.log.Warn("upgrade: the hosted server handed over cannot be served; starting it anew", "upstream", in.u.name, "pid", k.Conn.PID, "error", err)
		return true, true
	}
	return in.serve(ctx, conn), false
}
