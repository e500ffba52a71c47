package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/session"
	"github.com/snodod/snodod/upstream"
)

// An upgrade (`snodod upgrade`, SIGUSR2; docs/operations.md) replaces the
// running daemon by a new process, usually a new binary, without closing a
// session. The running daemon:
//
//  1. stops accepting (connections wait in the listen backlog) and lets
//     the handshakes under way finish, so that the session ids are final;
//  2. starts the new binary with the same arguments and its end of a
//     private socket (upgrade_wire.go), and sends it the listeners (the
//     sockets, the lock, the HTTP listener) and the next session id;
//  3. waits, up to upgradeReadyTimeout, for the new process to say it
//     serves. If it fails to start, says an error, exits or stays silent,
//     it is killed, and this daemon accepts again as if nothing happened:
//     the upgrade fails with the new process's error;
//  4. hands every session over (session.HandOver: reading stops, requests
//     in flight finish within daemon.upgrade_grace), each as soon as it is
//     paused, with its descriptors and the control connection of the
//     `snodod connect` that waits for it;
//  5. once the new process has every session serving, hands it every
//     idle shared hosted server (their records and pipes, when it said,
//     ready, that it adopts them: upstream/instance_handover.go) and stops
//     the others, tells systemd that
//     the new process is the main one (MAINPID=), stops accepting HTTP,
//     serves every HTTP request it has read or still reads on a kept-alive
//     connection, each answer closing its connection (Connection: close),
//     and exits 0 once those are closed (within daemon.shutdown_grace),
//     leaving the sockets in place.
//
// If anything fails in step 4 or 5 before the new process said it serves
// every session, the new process is killed and this daemon resumes the
// sessions itself, from the records and descriptors it kept until then.

// upgradeReadyTimeout bounds the wait for the new process to say it
// serves (docs/operations.md, "Upgrading").
const upgradeReadyTimeout = 10 * time.Second

// upgradeAdoptMargin is added to daemon.upgrade_grace to bound the whole
// hand-over of the sessions.
const upgradeAdoptMargin = 10 * time.Second

// upgradeRequest asks Run for an upgrade; reply gets its outcome.
type upgradeRequest struct {
	binary string // "" for the daemon's own executable
	reply  chan upgradeOutcome
	// replied is closed by the requester once it has answered its client,
	// so that the old daemon does not exit under its reply.
	replied chan struct{}
}

type upgradeOutcome struct {
	pid int // the new process
	err error
}

// UpgradeError is why an upgrade failed; the daemon that was asked to
// upgrade goes on serving.
type UpgradeError struct{ Reason string }

func (e *UpgradeError) Error() string {
	return "upgrade failed: " + e.Reason + "; the running daemon goes on serving"
}

// runState is what Run holds that an upgrade changes.
type runState struct {
	root      *suture.Supervisor
	listeners []*listener
	acceptors []suture.ServiceToken
	upstreams suture.ServiceToken // the upstream manager under root
	upgraded  bool                // the new process serves the listeners: leave them in place

	upstreamsOnce sync.Once // a process an upgrade started adds them late
}

// startUpstreams adds the upstream manager under the root supervisor,
// once: the hosted servers start.
func (d *Daemon) startUpstreams(rs *runState) {
	rs.upstreamsOnce.Do(func() { rs.upstreams = rs.root.Add(d.ups) })
}

func (d *Daemon) startAccepting(rs *runState) {
	for _, l := range rs.listeners {
		// A stopped acceptor interrupted Accept with a deadline in the
		// past; a new one must not find it.
		_ = l.ln.SetDeadline(time.Time{})
		rs.acceptors = append(rs.acceptors, rs.root.Add(&acceptor{d: d, l: l}))
	}
}

func (d *Daemon) stopAccepting(rs *runState) {
	for _, tok := range rs.acceptors {
		_ = rs.root.RemoveAndWait(tok, time.Second)
	}
	rs.acceptors = nil
}

// requestUpgrade asks Run for an upgrade to binary and waits for its
// outcome; done must be closed once the caller has answered its client.
func (d *Daemon) requestUpgrade(ctx context.Context, binary string, done chan struct{}) (int, error) {
	req := upgradeRequest{binary: binary, reply: make(chan upgradeOutcome, 1), replied: done}
	select {
	case d.upgrades <- req:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-d.stopped:
		return 0, &UpgradeError{Reason: "the daemon is stopping"}
	}
	out := <-req.reply
	return out.pid, out.err
}

// upgradeNow runs an upgrade on Run's goroutine and reports whether it
// succeeded: Run then returns, leaving everything to the new process.
func (d *Daemon) upgradeNow(rs *runState, req upgradeRequest) bool {
	pid, err := d.upgrade(rs, req.binary)
	if err != nil {
		d.log.Error("upgrade failed; this daemon goes on serving", "error", err)
	} else {
		d.log.Info("upgraded: the new process serves every session; exiting", "pid", pid)
	}
	if req.reply != nil {
		req.reply <- upgradeOutcome{pid: pid, err: err}
		select {
		case <-req.replied:
		case <-time.After(replyTimeout):
		}
	}
	rs.upgraded = err == nil
	return rs.upgraded
}

// upgrade is the whole upgrade of the comment above.
func (d *Daemon) upgrade(rs *runState, binary string) (pid int, err error) {
	if len(d.opts.UpgradeArgs) == 0 {
		return 0, &UpgradeError{Reason: "this daemon was started without the arguments to start its successor with (daemon.Options.UpgradeArgs)"}
	}
	if binary == "" {
		binary = d.executable
	}
	// In a process an upgrade started, the hosted servers may not run yet.
	d.startUpstreams(rs)
	d.stopAccepting(rs)
	accepting := false
	defer func() {
		if !accepting && err != nil {
			d.startAccepting(rs)
		}
	}()
	d.sessions.awaitHandshakes() // every connection accepted has its session, or its refusal

	var next successor
	next, err = d.startSuccessor(binary, rs.listeners)
	if err != nil {
		return 0, err
	}
	sent, err := d.handOverSessions(next)
	if err == nil {
		err = next.finish()
	}
	if err != nil {
		next.kill()
		d.resumeLocally(sent)
		return 0, &UpgradeError{Reason: err.Error()}
	}
	for _, m := range sent {
		closeFiles(m.files) // the new process has its own
	}
	// The hosted servers that are idle are handed over (their calls in
	// flight were answered with their sessions' in-flight requests); the
	// others stop here before they start there: the new process would
	// take this one's for a crash's orphans.
	if next.adoptsServers() {
		d.ups.KeepServers()
	}
	if err := rs.root.RemoveAndWait(rs.upstreams, d.gen.Load().limits.ShutdownGrace+drainMargin); err != nil {
		d.log.Warn("the hosted servers did not stop in time for the upgrade", "error", err)
	}
	for _, k := range d.ups.KeptServers() {
		if err := next.sendServer(k); err != nil {
			// The new daemon does not know it: it is ended here, while it
			// is still this process's child (only this process reaps it,
			// so its group id names it unless it has just exited), and
			// starts anew there.
			d.log.Error("upgrade: a hosted server could not be handed over; killing it", "upstream", k.Name, "pid", k.Conn.PID, "error", err)
			_ = syscall.Kill(-k.Conn.PID, syscall.SIGKILL)
		}
		closeFiles(k.Files)
	}
	next.promote()
	return next.pid(), nil
}

// newProcess is the successor of an upgrade that starts a new process (a
// new binary, usually): the process started, and its end of the private
// socket.
type newProcess struct {
	cmd    *exec.Cmd
	wire   *wire
	notify *notifier
	log    *slog.Logger
	exited chan struct{} // closed once the process has exited
	status error         // its exit, once exited is closed
	// servers is set when it said, ready, that it adopts hosted servers.
	servers bool
}

var _ successor = (*newProcess)(nil)

func (s *newProcess) pid() int { return s.cmd.Process.Pid }

func (s *newProcess) send(m movedSession, files []*os.File) error {
	return s.wire.send(upgradeMsg{Type: "session", Session: &m}, files...)
}

func (s *newProcess) adoptsServers() bool { return s.servers }

func (s *newProcess) sendServer(k upstream.KeptServer) error {
	return s.wire.send(upgradeMsg{Type: "upstream", Upstream: &k}, k.Files...)
}

// kill ends the new process and waits for it.
func (s *newProcess) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.wire.close()
}

// promote tells systemd the new process is the main one, tells the
// process, and lets it go on without this one.
func (s *newProcess) promote() {
	pid := strconv.Itoa(s.pid())
	s.notify.send("MAINPID="+pid, "STATUS=upgraded; the new process (pid "+pid+") serves")
	if err := s.wire.send(upgradeMsg{Type: "main"}); err != nil {
		s.log.Warn("could not tell the new process it is the main one", "error", err)
	}
	s.wire.close()
}

// startSuccessor starts binary with the daemon's arguments and the private
// socket, sends it the listeners, and waits until it says it serves.
func (d *Daemon) startSuccessor(binary string, listeners []*listener) (*newProcess, error) {
	ours, theirs, err := filePair()
	if err != nil {
		return nil, &UpgradeError{Reason: "create the upgrade socket: " + err.Error()}
	}
	w, err := newWire(ours)
	if err != nil {
		theirs.Close()
		return nil, &UpgradeError{Reason: err.Error()}
	}
	cmd := exec.Command(binary, d.opts.UpgradeArgs...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{theirs} // descriptor 3
	cmd.Env = append(os.Environ(), UpgradeEnv+"=3")
	err = proc.StartCommand(cmd) // not an orphan to reap (internal/proc)
	theirs.Close()
	if err != nil {
		w.close()
		return nil, &UpgradeError{Reason: fmt.Sprintf("start %s: %v", binary, err)}
	}
	s := &newProcess{cmd: cmd, wire: w, notify: d.notify, log: d.log, exited: make(chan struct{})}
	go func() {
		s.status = proc.WaitCommand(cmd)
		close(s.exited)
	}()
	d.log.Info("upgrade: the new process started", "binary", binary, "pid", s.pid())
	fail := func(reason string) (*newProcess, error) {
		s.kill()
		return nil, &UpgradeError{Reason: reason}
	}
	recs, files, err := d.listenerFiles(listeners)
	defer closeFiles(files)
	if err != nil {
		return fail(err.Error())
	}
	if err := w.send(upgradeMsg{Type: "hello", Format: upgradeFormat, PID: os.Getpid(), NextID: d.sessions.lastID(), Version: d.version(), Listeners: recs}, files...); err != nil {
		return fail(successorError(s, "could not be sent the listeners: "+err.Error()))
	}
	type answer struct {
		m   upgradeMsg
		err error
	}
	got := make(chan answer, 1)
	go func() {
		m, fs, err := w.recv(time.Now().Add(upgradeReadyTimeout))
		closeFiles(fs)
		got <- answer{m, err}
	}()
	select {
	case a := <-got:
		switch {
		case a.err != nil:
			return fail(successorError(s, fmt.Sprintf("did not say it serves within %v: %v", upgradeReadyTimeout, a.err)))
		case a.m.Type == "error":
			return fail(binary + ": " + a.m.Error)
		case a.m.Type != "ready":
			return fail(fmt.Sprintf("it said %q, not ready", a.m.Type))
		}
		s.servers = a.m.Servers
	case <-s.exited:
		// What it said before it exited is the better reason.
		if a := <-got; a.err == nil && a.m.Type == "error" {
			return fail(binary + ": " + a.m.Error)
		}
		return fail(successorError(s, ""))
	}
	return s, nil
}

// successorError says what became of a new process that failed: that it
// exited before it served, with its status, when it has exited (within a
// moment), else what.
func successorError(s *newProcess, what string) string {
	select {
	case <-s.exited:
		return fmt.Sprintf("the new process exited before it served (%v); its log is this daemon's standard error", s.status)
	case <-time.After(time.Second):
		return "the new process " + what
	}
}

// movedFiles is a session sent to the new process, and the descriptors
// this daemon keeps until the new one serves it; from is its entry here.
type movedFiles struct {
	m     movedSession
	files []*os.File
	from  *entry
}

// handOverSessions pauses every session and sends each to the successor
// as soon as it is paused. It returns what it sent, also on error.
func (d *Daemon) handOverSessions(next successor) ([]movedFiles, error) {
	grace := d.gen.Load().limits.UpgradeGrace
	ctx, cancel := context.WithTimeout(context.Background(), grace+upgradeAdoptMargin)
	defer cancel()
	list := d.sessions.started()
	paused := make(chan movedFiles, len(list))
	var wg sync.WaitGroup
	for _, e := range list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m, ok := d.pause(ctx, e); ok {
				paused <- m
			}
		}()
	}
	go func() {
		wg.Wait()
		close(paused)
	}()
	var sent []movedFiles
	var err error
	for m := range paused {
		if err == nil {
			err = next.send(m.m, m.files)
		}
		sent = append(sent, m) // kept, to resume them here if the upgrade fails
	}
	if err != nil {
		return sent, fmt.Errorf("send a session to the new process: %w", err)
	}
	return sent, ctx.Err()
}

// pause hands the session of e over: it returns false for a session that
// ended meanwhile.
func (d *Daemon) pause(ctx context.Context, e *entry) (movedFiles, bool) {
	// Taken before the session ends and they are forgotten or closed.
	ctl, jf := d.waiterConn(e), d.journalFile(e)
	rec, files, err := e.s.HandOver(ctx)
	if err != nil {
		closeFiles(slices.DeleteFunc([]*os.File{ctl, jf}, func(f *os.File) bool { return f == nil }))
		if !errors.Is(err, session.ErrNotHandedOver) {
			d.log.Error("a session could not be handed over", "session", e.id, "error", err)
		}
		return movedFiles{}, false
	}
	at := e.at
	m := movedFiles{m: movedSession{Session: rec, Via: at.via, View: at.view, Cwd: at.cwd}, files: files, from: e}
	if ctl != nil {
		m.m.Control = true
		m.files = append(m.files, ctl)
	}
	if jf != nil {
		m.m.Journal = true
		m.files = append(m.files, jf)
	}
	return m, true
}

// finish tells the new process that every session was sent, and waits
// until it serves them all.
func (s *newProcess) finish() error {
	if err := s.wire.send(upgradeMsg{Type: "done"}); err != nil {
		return fmt.Errorf("tell the new process the sessions are sent: %w", err)
	}
	m, fs, err := s.wire.recv(time.Now().Add(upgradeAdoptMargin))
	closeFiles(fs)
	switch {
	case err != nil:
		return fmt.Errorf("the new process did not say it serves the sessions: %w", err)
	case m.Type == "error":
		return errors.New("the new process: " + m.Error)
	case m.Type != "adopted":
		return fmt.Errorf("the new process said %q, not adopted", m.Type)
	}
	return nil
}

// exitUpgraded ends Run after an upgrade: the supervisors stop (nothing is
// left under them but the HTTP listener, whose requests finish within
// daemon.shutdown_grace, and the acceptors, which are stopped).
func (d *Daemon) exitUpgraded(cancelRoot context.CancelFunc, rootDone <-chan error) {
	d.startDrain()
	d.retireHTTP() // the new process serves the HTTP listener: finish what was read, refuse nothing
	cancelRoot()
	bound := d.gen.Load().limits.ShutdownGrace + drainMargin
	select {
	case <-rootDone:
	case <-time.After(bound):
		d.log.Warn("the HTTP listener did not stop in time after the upgrade", "bound", bound)
	}
}
