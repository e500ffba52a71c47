package daemon

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/session"
)

func socketPair() (*net.UnixConn, net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		conns[i], err = net.FileConn(f)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
	}
	return conns[0].(*net.UnixConn), conns[1], nil
}

// pipes is what `snodod connect` hands over: the daemon reads in and
// writes out; the test (the MCP client) writes toDaemon and reads
// fromDaemon.
type pipes struct {
	in, out              *os.File
	toDaemon, fromDaemon *os.File
	r                    *bufio.Reader
}

func newPipes(t *testing.T) *pipes {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &pipes{in: inR, out: outW, toDaemon: inW, fromDaemon: outR, r: bufio.NewReader(outR)}
	t.Cleanup(func() {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			f.Close()
		}
	})
	return p
}

func (p *pipes) line(t *testing.T) string {
	t.Helper()
	_ = p.fromDaemon.SetReadDeadline(time.Now().Add(20 * time.Second))
	s, err := p.r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("read: %v", err)
	}
	return strings.TrimSuffix(s, "\n")
}

// TestControlConnect hands a pipe pair to the daemon, as `snodod connect`
// does, and talks MCP over it.
func TestControlConnect(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	p := newPipes(t)
	h, err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Session != 1 {
		t.Errorf("session id %d", h.Session)
	}
	// Like `snodod connect`, keep nothing the daemon now serves open for
	// reading or writing here.
	p.in.Close()
	p.out.Close()
	if _, err := io.WriteString(p.toDaemon, initLine+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"piped"}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if got := p.line(t); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Fatalf("initialize: %s", got)
	}
	if got, want := p.line(t), `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"piped"}],"isError":false}}`; got != want {
		t.Errorf("echo: %s", got)
	}
	st := r.d.Status()
	if len(st.Sessions) != 1 || st.Sessions[0].Kind != "pipe" || st.Sessions[0].PeerPID != os.Getpid() || st.Sessions[0].PeerUID != os.Geteuid() {
		t.Errorf("status %+v", st.Sessions)
	}
	// End of input ends the session, and the client hears of it.
	p.toDaemon.Close()
	waited := make(chan error, 1)
	go func() { waited <- h.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("Wait: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Wait did not return after end of input")
	}
	if got := p.line(t); got != "" {
		t.Errorf("after the end: %q", got)
	}
	eventually.True(t, "the session to be reaped", func() bool { return r.d.count() == 0 })
}

// TestControlConnectSocket hands over one socket as both descriptors.
func TestControlConnectSocket(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	f, err := a.File()
	a.Close()
	if err != nil {
		t.Fatal(err)
	}
	h, err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Connect(t.Context(), f, f, control.ConnectOptions{})
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c := &client{t: t, c: b, r: bufio.NewReader(b)}
	c.initialize()
	if st := r.d.Status(); len(st.Sessions) != 1 || st.Sessions[0].Kind != "socket" {
		t.Errorf("status %+v", st.Sessions)
	}
	b.Close()
	if err := h.Wait(); err != nil {
		t.Errorf("Wait: %v", err)
	}
}

// TestControlConnectAtCapacity: the refused client's MCP peer reads the
// refusal line on the descriptor it passed, and connect gets the reason.
func TestControlConnectAtCapacity(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, map[string]any{"daemon.max_sessions": 1}), Options{})
	dialSession(t, r.cfg.Daemon.Socket).initialize()
	p := newPipes(t)
	_, err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	var refused *control.RefusedError
	if !errors.As(err, &refused) || refused.Message != "Server session capacity exhausted (daemon.max_sessions = 1)" {
		t.Fatalf("Connect: %v", err)
	}
	p.out.Close()
	if got, want := p.line(t), `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Server session capacity exhausted (daemon.max_sessions = 1)"}}`; got != want {
		t.Errorf("on the passed output: %s", got)
	}
	if got := p.line(t); got != "" {
		t.Errorf("then %q, want end of input (the daemon closed its copy)", got)
	}
}

// TestConnectDaemonGone: the daemon's drain ends the session cleanly and
// says so; a daemon that disappears without saying is ErrDaemonGone.
func TestConnectDaemonGone(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	p := newPipes(t)
	h, err := (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.stop()
	if err := h.Wait(); err != nil {
		t.Errorf("Wait after the drain: %v", err)
	}

	// A fake daemon that accepts and closes.
	path := dir + "/fake.sock"
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			b := make([]byte, 100)
			c.Read(b)
			c.Write([]byte(`{"ok":true,"session":3}` + "\n"))
			c.Close()
		}
	}()
	h, err = (&control.Client{Socket: path}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); !errors.Is(err, control.ErrDaemonGone) {
		t.Errorf("Wait: %v, want ErrDaemonGone", err)
	}
}

func TestConnectUnreachable(t *testing.T) {
	path := shortDir(t) + "/nobody.sock"
	p := newPipes(t)
	_, err := (&control.Client{Socket: path}).Connect(t.Context(), p.in, p.out, control.ConnectOptions{})
	var unreachable *control.UnreachableError
	if !errors.As(err, &unreachable) || err.Error() != "cannot reach the daemon at "+path+": no such file or directory" {
		t.Errorf("Connect: %v", err)
	}
	staleSocket(t, path)
	_, err = (&control.Client{Socket: path}).Status(t.Context())
	if !errors.As(err, &unreachable) || err.Error() != "cannot reach the daemon at "+path+": connection refused" {
		t.Errorf("QueryStatus: %v", err)
	}
}

func TestControlRequests(t *testing.T) {
	dir := shortDir(t)
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	ctl := r.cfg.Daemon.ControlSocket
	for _, tt := range []struct{ request, want string }{
		{`{"op":"reboot"}`, `unknown op "reboot"; the ops are connect, status, kill, upgrade, upstream, logs, login, logout, approve, diff and fault`},
		{`not json`, "request is not a JSON object: invalid character 'o' in literal null (expecting 'u')"},
		{`{"op":"connect"}`, "connect needs 2 descriptors (standard input and output) sent with the request, got 0"},
		{`{"op":"connect","relay":true}`, "relay is not served on the control socket; connect to the session socket (daemon.socket) instead"},
		{`{"op":"fault","session":1}`, "fault injection is off; start the daemon with SNODOD_TEST_FAULTS=1"},
	} {
		got := rawControl(t, ctl, tt.request)
		if len(got) != 1 || got[0]["ok"] != false || got[0]["error"] != tt.want {
			t.Errorf("%s: %v, want the error %q", tt.request, got, tt.want)
		}
	}
}

func TestControlFault(t *testing.T) {
	dir := shortDir(t)
	t.Cleanup(faults.Arm())
	r := startDaemon(t, testConfig(t, dir, nil), Options{})
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	fault := func(id uint64) error {
		return (&control.Client{Socket: r.cfg.Daemon.ControlSocket}).Fault(t.Context(), id)
	}
	var refused *control.RefusedError
	if err := fault(99); !errors.As(err, &refused) || refused.Message != "no session 99" {
		t.Errorf("fault 99: %v", err)
	}
	if err := fault(1); err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "a restart", func() bool {
		st := r.d.Status()
		return len(st.Sessions) == 1 && st.Sessions[0].Restarts == 1
	})
	// The client goes on, on the same connection.
	if got := c.call(5, "echo", `{"text":"again"}`); !strings.Contains(got, `"text":"again"`) {
		t.Errorf("after the restart: %s", got)
	}
}

// TestReadRequestFDs passes descriptors with a request split over several
// writes, and too many descriptors.
func TestReadRequestFDs(t *testing.T) {
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	p := newPipes(t)
	bu := b.(*net.UnixConn)
	go func() {
		_ = session.Control(p.in, func(fd int) error { return sendRequest(bu, []byte(`{"op":`), fd, fd) })
		time.Sleep(10 * time.Millisecond)
		bu.Write([]byte(`"connect"}` + "\n"))
	}()
	line, files, err := readRequest(a, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer closeFiles(files)
	if string(line) != `{"op":"connect"}` || len(files) != 2 {
		t.Fatalf("line %q, %d files", line, len(files))
	}
	if !sameFileAs(files[0], p.in) {
		t.Error("the passed descriptor is not the pipe")
	}

	// More descriptors than the daemon takes: refused, none leaked.
	fds := make([]int, maxPassedFDs+2)
	for i := range fds {
		fds[i] = int(p.in.Fd())
	}
	go sendRequest(bu, []byte("{}\n"), fds...)
	if _, _, err := readRequest(a, time.Now().Add(5*time.Second)); err == nil || !strings.Contains(err.Error(), "more than 4 descriptors") {
		t.Errorf("readRequest: %v", err)
	}
}

func sameFileAs(a, b *os.File) bool {
	var sa, sb unix.Stat_t
	return session.Control(a, func(fd int) error { return unix.Fstat(fd, &sa) }) == nil &&
		session.Control(b, func(fd int) error { return unix.Fstat(fd, &sb) }) == nil &&
		sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

func TestSameFile(t *testing.T) {
	p := newPipes(t)
	if sameFile(p.in, p.toDaemon) {
		t.Error("the two ends of a pipe are one file")
	}
	a, b, err := socketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer b.Close()
	f1, _ := a.File()
	f2, _ := a.File()
	defer f1.Close()
	defer f2.Close()
	if !sameFile(f1, f2) {
		t.Error("two descriptors of one socket are not one file")
	}
}
