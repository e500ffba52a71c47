package e2e_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// The fault suite: each fault, then proof that the daemon and
// the other sessions are unharmed and nothing leaked. Each case is bounded
// in time. Faults of one session (a client that stops reading, restarts)
// are in daemon_test.go; faults of a hosted server's process are in
// upstream/ (the Conn), until the daemon hosts servers.

// outOfFDs is what a client refused for want of descriptors reads.
const outOfFDs = "out of file descriptors (RLIMIT_NOFILE = 128); try again once other clients have left, or raise the daemon's limit (LimitNOFILE= in its unit, ulimit -n)"

// TestDescriptorExhaustion: under `ulimit -n 128`, 200 clients: each is
// either served or told in one line that the daemon is out of
// descriptors (none is reset or left waiting); `snodod connect` and
// `snodod status` say so too; once the clients leave, service recovers.
func TestDescriptorExhaustion(t *testing.T) {
	d := startWrapped(t, []string{"/bin/sh", "-c", `ulimit -n 128 && exec "$@"`, "sh"}, "", nil)
	conns := make([]*sessionConn, 0, 200)
	for i := range 200 {
		s, err := dialSession(d.socket)
		if err != nil {
			t.Fatalf("client %d cannot connect: %v", i, err)
		}
		t.Cleanup(func() { s.Close() })
		conns = append(conns, s)
	}
	served, refused := 0, 0
	var servedConns, refusedConns []*sessionConn
	for i, s := range conns {
		_ = s.send(initializeLine(0, "2025-06-18")) // a refused client's connection may be closed already
		r, line, err := s.next(answerWithin)
		switch {
		case err != nil:
			t.Fatalf("client %d got no line: %v (%q)", i, err, line)
		case r.Error != nil && r.Error.Code == -32603 && r.Error.Message == "Server "+outOfFDs:
			refused++
			refusedConns = append(refusedConns, s)
		case r.Error == nil && string(r.ID) == "0":
			served++
			servedConns = append(servedConns, s)
		default:
			t.Fatalf("client %d: %s", i, line)
		}
	}
	t.Logf("%d clients served, %d refused", served, refused)
	if served < 50 || refused == 0 {
		t.Fatalf("%d served and %d refused: the limit was not reached, or nothing was served", served, refused)
	}
	// The refused clients' descriptors are freed once they are told: more
	// clients are served, one by one, until the daemon is full again. Each
	// refused client is first seen closed by the daemon, so that no
	// descriptor is freed after the daemon is found full again (a hand-over
	// at the limit would then find the three it needs).
	for i, s := range refusedConns {
		_ = s.c.CloseWrite()
		if err := s.drainToEOF(answerWithin); err != nil {
			t.Fatalf("refused client %d: %v", i, err)
		}
	}
	for full := false; !full; {
		s, err := dialSession(d.socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		conns = append(conns, s)
		_ = s.send(initializeLine(0, "2025-06-18"))
		r, line, err := s.next(answerWithin)
		switch {
		case err != nil:
			t.Fatalf("a client got no line: %v (%q)", err, line)
		case r.Error != nil && r.Error.Message == "Server "+outOfFDs:
			// The daemon is full again once it has closed this client.
			_ = s.c.CloseWrite()
			if err := s.drainToEOF(answerWithin); err != nil {
				t.Fatalf("the refused client: %v", err)
			}
			full = true
		case r.Error != nil:
			t.Fatalf("a client: %s", line)
		default:
			servedConns = append(servedConns, s)
		}
	}
	// A hand-over needs three descriptors at once, more than a daemon at
	// its limit has; status needs one, which it may have: it is served or
	// told why not.
	connect := d.command("connect", "--handover")
	connect.Stdin = strings.NewReader("")
	if out, err := connect.CombinedOutput(); err == nil || !strings.Contains(string(out), "refused the session: the daemon is "+outOfFDs) {
		t.Errorf("snodod connect at the limit: %v\n%s\nwant it to say the daemon is out of file descriptors", err, out)
	}
	if out, err := d.command("status").CombinedOutput(); err != nil && !strings.Contains(string(out), "the daemon is "+outOfFDs) {
		t.Errorf("snodod status at the limit: %v\n%s\nwant its status, or that the daemon is out of file descriptors", err, out)
	}
	// The sessions served are unharmed.
	for i, s := range servedConns[:5] {
		if err := s.send(initializedLine); err != nil {
			t.Fatal(err)
		}
		if err := s.echo(i+1, "still served"); err != nil {
			t.Fatalf("a session served before the limit: %v", err)
		}
	}
	for _, s := range conns {
		s.Close()
	}
	d.awaitStatus(t, "the sessions end once their clients leave", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 0 })
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatalf("after the clients left: %v", err)
	}
	if err := s.echo(1, "recovered"); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	connect = d.command("connect", "--handover")
	connect.Stdin = strings.NewReader(initializeLine(0, "2025-06-18") + "\n")
	connect.Stdout = &stdout
	if out, err := runWithin(connect, answerWithin); err != nil || !strings.Contains(stdout.String(), `"id":0,"result"`) {
		t.Errorf("snodod connect after the clients left: %v\n%s\nstdout %s", err, out, stdout.String())
	}
	if n := strings.Count(d.stderr.String(), "out of file descriptors: new clients are refused"); n != 1 {
		t.Errorf("the log says %d times that the daemon ran out of descriptors, want once per shortage", n)
	}
	d.stop(t)
}

// runWithin runs cmd, killing it after d, and returns its standard error.
func runWithin(cmd *exec.Cmd, d time.Duration) (string, error) {
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return stderr.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return stderr.String(), fmt.Errorf("%s did not exit within %v", cmd.Path, d)
	}
}

// TestUnfinishedLinesBudget: with daemon.max_buffered_bytes = 3,000,000
// and the default line limit, two clients hold 1.9 MB and 1.1 MB of
// unfinished lines (exactly the budget: both kept); one byte more from the
// second takes the first's line, which is refused (-32600) when it next
// sends, and its following request is served; the second's line, 1.2 MB,
// is served whole. Then 40 clients each holding 1.9 MB: every one is
// either refused its line or served it, and all are served afterwards.
func TestUnfinishedLinesBudget(t *testing.T) {
	d := startDaemon(t, "[daemon]\nmax_buffered_bytes = 3000000\n", nil)
	refusal := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Message refused: the unfinished lines and pending output of all connections passed daemon.max_buffered_bytes (3000000 bytes) and this line was the longest unfinished one; send it again"}}`
	a, g := mustDial(t, d.socket), mustDial(t, d.socket)
	for _, s := range []*sessionConn{a, g} {
		if err := s.initialize("2025-06-18"); err != nil {
			t.Fatal(err)
		}
	}
	line, text := paddedEcho(7, 1_200_001) // g's whole line: 1,200,000 bytes before its newline
	write := func(s *sessionConn, b string) {
		t.Helper()
		_ = s.c.SetWriteDeadline(time.Now().Add(answerWithin))
		if _, err := s.c.Write([]byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	write(a, strings.Repeat(" ", 1_900_000))
	write(g, line[:1_100_000])
	// Both are held: the daemon is at its budget; a third client is served.
	third := mustDial(t, d.socket)
	if err := third.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := third.echo(1, "at the budget"); err != nil {
		t.Fatal(err)
	}
	write(g, line[1_100_000:1_100_001]) // 1,900,000 + 1,100,000 + 1: a's line is taken
	if err := third.echo(2, "past the budget"); err != nil {
		t.Fatal(err)
	}
	// The daemon reads g's byte when it reads it: until then a's newline
	// would complete a's line (blank, so unanswered).
	waitBuffered(t, d, 1_100_001)
	write(a, "\n")
	_, got, err := a.next(answerWithin)
	if err != nil || strings.TrimSpace(string(got)) != refusal {
		t.Fatalf("the client whose line was taken: %q %v\nwant %s", got, err, refusal)
	}
	if err := a.echo(3, "served after the refusal"); err != nil {
		t.Fatal(err)
	}
	write(g, line[1_100_001:]+"\n")
	r, err := g.answer("7", answerWithin)
	if err != nil {
		t.Fatal(err)
	}
	if echoed, err := toolText(r); err != nil || echoed != text {
		t.Fatalf("the client that grew: %d bytes echoed (%v), want its %d", len(echoed), err, len(text))
	}

	// Many clients at once: each is refused or served its line, never cut.
	conns := make([]*sessionConn, 40)
	for i := range conns {
		conns[i] = mustDial(t, d.socket)
		if err := conns[i].initialize("2025-06-18"); err != nil {
			t.Fatal(err)
		}
		write(conns[i], strings.Repeat(" ", 1_900_000))
	}
	refused := 0
	for i, s := range conns {
		id := 10 + i
		write(s, "\n"+echoLine(id, "after")+"\n")
		r, line, err := s.next(answerWithin)
		if err == nil && string(r.ID) == "null" && r.Error != nil && strings.Contains(r.Error.Message, "daemon.max_buffered_bytes") {
			refused++
			r, line, err = s.next(answerWithin)
		}
		if text, terr := toolText(r); err != nil || terr != nil || string(r.ID) != fmt.Sprint(id) || text != "after" {
			t.Fatalf("client %d: %q %v %v", i, line, err, terr)
		}
	}
	t.Logf("%d of 40 clients holding 1.9 MB each were refused their line", refused)
	if refused < 40-1 {
		t.Errorf("%d of 40 refused; a budget of 3,000,000 bytes holds one 1.9 MB line", refused)
	}
}

// TestKilledUnderSocketActivation: the test holds the listening sockets,
// as systemd does, and starts each daemon the way systemd and
// systemd-socket-activate do (descriptors 3 and 4, LISTEN_FDS,
// LISTEN_FDNAMES, and LISTEN_PID set to the daemon's pid by a shell that
// then execs it). A daemon killed with SIGKILL mid-request takes only its
// own sessions with it: a client that connects while no daemon runs waits
// in the socket's backlog and is served by the next daemon, and so are
// status and hand-overs; the killed daemon's orphaned upstream process
// group is gone; a drain leaves the sockets to their owner.
func TestKilledUnderSocketActivation(t *testing.T) {
	dir, err := os.MkdirTemp("", "sdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &daemonProc{dir: dir, socket: filepath.Join(dir, "s.sock"), control: filepath.Join(dir, "c.sock"),
		config: filepath.Join(dir, "config", "snodod", "config.toml"), stderr: &logFile{path: filepath.Join(dir, "daemon.log")}}
	var files []*os.File
	for _, path := range []string{d.socket, d.control} {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		f, err := ln.File()
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false) // systemd's socket stays
		ln.Close()
		t.Cleanup(func() { f.Close() })
		files = append(files, f)
	}
	// A hosted server whose grandchild outlives a daemon killed with
	// SIGKILL: the next daemon must kill it.
	pidfile := filepath.Join(dir, "grandchild.pid")
	d.writeConfig(t, fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nargs = [\"-grandchild\", %q]\nstart = \"eager\"\n", fakeUpstream(t), pidfile))
	d.env = append(isolatedEnv(dir), "LISTEN_FDS=2", "LISTEN_FDNAMES=session:control", "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	start := func() {
		t.Helper()
		d.exited = make(chan struct{})
		d.cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$; export LISTEN_PID; exec "$0" serve --demo`, binary)
		d.cmd.Env, d.cmd.ExtraFiles = d.env, files
		d.launch(t)
		d.awaitReady(t)
	}
	start()
	s := mustDial(t, d.socket)
	if err := s.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := s.send(callLine(2, "sleep", `{"ms":10000}`)); err != nil {
		t.Fatal(err)
	}
	d.awaitStatus(t, "the sleep is in flight", answerWithin, func(st *control.Status) bool { return st.Executor.Running == 1 })
	orphan := awaitPIDFile(t, pidfile, "the hosted server did not start its grandchild")
	t.Cleanup(func() { _ = syscall.Kill(orphan, syscall.SIGKILL) })
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	d.waitExit(t, answerWithin)
	for { // notifications written before the kill may still be read
		r, line, err := s.next(answerWithin)
		if err != nil {
			break
		}
		if r.Method == "" {
			t.Errorf("the killed daemon's session answered: %s", line)
		}
	}

	waiting, err := dialSession(d.socket)
	if err != nil {
		t.Fatalf("no daemon runs, but the socket is held: a client must still connect: %v", err)
	}
	t.Cleanup(func() { waiting.Close() })
	if err := waiting.send(initializeLine(0, "2025-06-18")); err != nil {
		t.Fatal(err)
	}
	start() // as Restart=on-failure does
	if !waitGone(orphan, answerWithin) {
		t.Errorf("the killed daemon's orphaned grandchild %d still runs under the next daemon", orphan)
	}
	if r, err := waiting.answer("0", answerWithin); err != nil || r.Error != nil {
		t.Fatalf("the client that waited for the next daemon: %+v %v", r, err)
	}
	if err := waiting.send(initializedLine); err != nil {
		t.Fatal(err)
	}
	if err := waiting.echo(1, "served by the next daemon"); err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	connect := d.command("connect", "--handover", "--socket", d.socket, "--control-socket", d.control)
	connect.Stdin = strings.NewReader(initializeLine(0, "2025-06-18") + "\n")
	connect.Stdout = &stdout
	if out, err := runWithin(connect, answerWithin); err != nil || !strings.Contains(stdout.String(), `"id":0,"result"`) {
		t.Errorf("snodod connect to the next daemon: %v\n%s\nstdout %s", err, out, stdout.String())
	}
	waiting.Close()
	d.stop(t)
	for _, p := range []string{d.socket, d.control} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != os.ModeSocket {
			t.Errorf("%s after the drain: %v, want systemd's socket left in place", p, err)
		}
	}
}

// TestClientHalfClosesOrTrickles: a client that shuts down its writing
// side gets the answers to what it sent, then the end of the connection;
// one that sends a byte a second (past write_timeout and request_timeout,
// which never bound reading) is served once its line is complete; others
// are served meanwhile, and no session is left behind.
func TestClientHalfClosesOrTrickles(t *testing.T) {
	d := startDaemon(t, "[session]\nwrite_timeout = \"500ms\"\nrequest_timeout = \"2s\"\n", nil)
	half := mustDial(t, d.socket)
	if err := half.initialize("2025-06-18"); err != nil {
		t.Fatal(err)
	}
	if err := half.send(callLine(2, "sleep", `{"ms":300}`), echoLine(3, "before the half-close")); err != nil {
		t.Fatal(err)
	}
	if err := half.c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for range 2 {
		r, line, err := half.next(answerWithin)
		if err != nil || r.Error != nil {
			t.Fatalf("after the half-close: %q %v", line, err)
		}
		got[string(r.ID)] = true
	}
	if !got["2"] || !got["3"] {
		t.Errorf("answers after the half-close: %v, want 2 and 3", got)
	}
	if err := half.drainToEOF(answerWithin); err != nil {
		t.Errorf("the half-closed connection: %v, want end of file after the answers", err)
	}

	trickle, other := mustDial(t, d.socket), mustDial(t, d.socket)
	for _, s := range []*sessionConn{trickle, other} {
		if err := s.initialize("2025-06-18"); err != nil {
			t.Fatal(err)
		}
	}
	line := echoLine(9, "trickled") + "\n"
	for i := range 6 {
		if _, err := trickle.c.Write([]byte{line[i]}); err != nil {
			t.Fatalf("byte %d: %v", i, err)
		}
		if err := other.echo(10+i, "meanwhile"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the fault under test: a byte a second
	}
	if _, err := trickle.c.Write([]byte(line[6:])); err != nil {
		t.Fatal(err)
	}
	r, err := trickle.answer("9", answerWithin)
	if text, terr := toolText(r); err != nil || terr != nil || text != "trickled" {
		t.Fatalf("the trickled request: %q %v %v", text, err, terr)
	}
	trickle.Close()
	other.Close()
	d.awaitStatus(t, "no session is left", answerWithin, func(st *control.Status) bool { return len(st.Sessions) == 0 })
}

// waitBuffered waits until the daemon holds want bytes of unfinished
// lines (snodod status: buffered_bytes).
func waitBuffered(t *testing.T, d *daemonProc, want int64) {
	t.Helper()
	var got int64
	if !eventually.Within(answerWithin, func() bool { got = d.statusJSON(t).BufferedBytes; return got == want }) {
		t.Fatalf("the daemon holds %d bytes of unfinished lines, want %d", got, want)
	}
}
