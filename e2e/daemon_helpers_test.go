package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// The helpers of daemon_test.go: a `snodod serve --demo` of each test's
// own, and a raw NDJSON client of its session socket.

// answerWithin bounds the wait for one answer line, however loaded the
// machine: the tests that measure something say so themselves.
const answerWithin = 30 * time.Second

// daemonProc is a running `snodod serve --demo` with its own runtime and
// configuration directories, so that `snodod connect` and `snodod status`
// started with env find it at the default paths.
type daemonProc struct {
	dir     string   // the test's directory: run/ and config/ are in it
	env     []string // the environment of the daemon and of its clients
	socket  string   // the session socket
	control string   // the control socket
	config  string   // the default configuration file (may not exist)
	cmd     *exec.Cmd
	// stderr is the daemon's log, a file: a daemon an upgrade started
	// writes to it too, and the test's Wait never waits for it.
	stderr *logFile
	exited chan struct{} // closed once the process has been waited for
	// successor is the pid of the daemon the last upgrade started (it is
	// not this process's child); 0 before an upgrade (upgrade_test.go).
	successor int
}

// newDaemonProc is a daemon, not started, whose XDG directories are under
// dir (isolatedEnv): where its sockets, configuration file and log are.
func newDaemonProc(dir string) *daemonProc {
	return &daemonProc{
		dir:     dir,
		socket:  filepath.Join(dir, "run", "snodod", "snodod.sock"),
		control: filepath.Join(dir, "run", "snodod", "control.sock"),
		config:  filepath.Join(dir, "config", "snodod", "config.toml"),
		stderr:  &logFile{path: filepath.Join(dir, "daemon.log")},
	}
}

// startDaemon writes config (TOML; none when empty) to the default
// configuration file and starts `snodod serve --demo args...` with
// extraEnv, then waits until it answers on its control socket. When the
// test ends, a daemon still running is killed (a test that stops it checks
// its exit), and its standard error is checked for the race detector's
// reports.
func startDaemon(t *testing.T, config string, extraEnv []string, args ...string) *daemonProc {
	t.Helper()
	return startWrapped(t, nil, config, extraEnv, args...)
}

// startWrapped is startDaemon with the daemon run by the command wrapper
// (its arguments, then the daemon's command line), such as a shell that
// lowers a limit first; nil runs the daemon itself.
func startWrapped(t *testing.T, wrapper []string, config string, extraEnv []string, args ...string) *daemonProc {
	t.Helper()
	// Unix socket paths must fit in 108 bytes: t.TempDir's may not.
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return startWrappedIn(t, wrapper, dir, config, extraEnv, args...)
}

// startDaemonIn is startDaemon in a directory of the caller's: a second
// daemon there finds the first one's state.
func startDaemonIn(t *testing.T, dir, config string, extraEnv []string, args ...string) *daemonProc {
	t.Helper()
	return startWrappedIn(t, nil, dir, config, extraEnv, args...)
}

func startWrappedIn(t *testing.T, wrapper []string, dir, config string, extraEnv []string, args ...string) *daemonProc {
	t.Helper()
	d := newDaemonProc(dir)
	d.exited = make(chan struct{})
	if err := os.MkdirAll(filepath.Join(dir, "run"), 0o700); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		d.writeConfig(t, config)
	}
	d.env = append(isolatedEnv(dir), extraEnv...)

	argv := append(append(append([]string(nil), wrapper...), binary, "serve", "--demo"), args...)
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Env = d.env
	d.launch(t)
	d.awaitReady(t)
	return d
}

// launch starts d.cmd with its standard error appended to d.stderr's file.
// When the test ends, a daemon still running is killed (a test that stops
// it checks its exit), and so is the one its last upgrade started, and
// their log is checked for the race detector's reports.
func (d *daemonProc) launch(t *testing.T) {
	t.Helper()
	logf, err := os.OpenFile(d.stderr.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stderr = logf
	err = d.cmd.Start()
	logf.Close() // the daemon has its own
	if err != nil {
		t.Fatal(err)
	}
	stop := watch(d.cmd, d.exited)
	t.Cleanup(func() {
		stop()
		if d.successor != 0 {
			_ = syscall.Kill(d.successor, syscall.SIGKILL)
			waitGone(d.successor, answerWithin)
		}
		out := d.stderr.String()
		if strings.Contains(out, "DATA RACE") {
			t.Errorf("the race detector reported a race in snodod serve:\n%s", out)
		} else if t.Failed() {
			t.Logf("snodod serve's standard error:\n%s", out)
		}
	})
}

// watch waits for the started cmd in the background and closes exited
// once it has exited. stop kills cmd unless it has exited already, and
// returns when it has: a test's cleanup calls it before it reads what the
// process wrote.
func watch(cmd *exec.Cmd, exited chan struct{}) (stop func()) {
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}
}

// awaitReady waits until the daemon answers on its control socket.
func (d *daemonProc) awaitReady(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(answerWithin)
	for {
		if _, err := d.status(t.Context()); err == nil {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("the daemon does not answer on %s: %v", d.control, err)
		}
		select {
		case <-d.exited:
			t.Fatalf("the daemon exited at start (%v)", d.cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// writeConfig replaces the default configuration file.
func (d *daemonProc) writeConfig(t *testing.T, config string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(d.config), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// signal sends sig to the daemon.
func (d *daemonProc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal the daemon: %v", err)
	}
}

// waitExit waits up to within for the daemon to exit, and returns its exit
// status (-1 after a signal).
func (d *daemonProc) waitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-d.exited:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("the daemon did not exit within %v", within)
		return 0
	}
}

// stop sends SIGTERM and checks that the daemon drains and exits 0.
func (d *daemonProc) stop(t *testing.T) {
	t.Helper()
	d.signal(t, syscall.SIGTERM)
	// The default daemon.shutdown_grace (10 s) plus a margin.
	if status := d.waitExit(t, 20*time.Second); status != 0 {
		t.Errorf("the daemon exited with status %d after SIGTERM, want 0", status)
	}
}

// status asks the daemon for its status over the control socket.
func (d *daemonProc) status(ctx context.Context) (*control.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return (&control.Client{Socket: d.control}).Status(ctx)
}

// fault makes session id's coordinator fail once, as a bug would, through
// the control socket's "fault" operation: a test hook the daemon honours
// only when run with SNODOD_TEST_FAULTS=1 (internal/faults). It returns
// once the failed instance has answered what it had in flight.
func (d *daemonProc) fault(ctx context.Context, id uint64) error {
	return (&control.Client{Socket: d.control}).Fault(ctx, id)
}

// awaitStatus polls the status until cond holds, for up to within, and
// returns the status that satisfied it.
func (d *daemonProc) awaitStatus(t *testing.T, what string, within time.Duration, cond func(*control.Status) bool) *control.Status {
	t.Helper()
	var st *control.Status
	var err error
	if !eventually.Within(within, func() bool {
		st, err = d.status(t.Context())
		return err == nil && cond(st)
	}) {
		b, _ := json.Marshal(st)
		t.Fatalf("%s: not within %v (status %s, error %v)", what, within, b, err)
	}
	return st
}

// command returns `snodod args...` in the daemon's environment, so that it
// finds the daemon at the default paths.
func (d *daemonProc) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = d.env
	return cmd
}

// statusJSON runs `snodod status --json` and decodes its output.
func (d *daemonProc) statusJSON(t *testing.T) *control.Status {
	t.Helper()
	cmd := d.command("status", "--json")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("snodod status --json: %v\n%s", err, stderr.String())
	}
	var st control.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("snodod status --json printed %s: %v", out, err)
	}
	return &st
}

// The lines of a session.

const initializedLine = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

func initializeLine(id int, version string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`, id, version)
}

func callLine(id int, tool, args string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args)
}

func echoLine(id int, text string) string {
	b, _ := json.Marshal(map[string]string{"text": text})
	return callLine(id, "echo", string(b))
}

// tools2026Line is a stateless 2026-07-28 tools/list.
func tools2026Line(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":%q,"io.modelcontextprotocol/clientCapabilities":{}}}}`, id, v2026)
}

// paddedEcho returns an echo request whose line, with its newline, is
// exactly size bytes, and the text it carries.
func paddedEcho(id, size int) (line, text string) {
	frame := echoLine(id, "")
	text = strings.Repeat("x", size-len(frame)-1)
	return echoLine(id, text), text
}

// reply is one line a session wrote.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// toolText returns the text of a tools/call result's single text block.
func toolText(r reply) (string, error) {
	if r.Error != nil {
		return "", fmt.Errorf("error %d %q", r.Error.Code, r.Error.Message)
	}
	var res struct {
		Content []struct{ Type, Text string }
		IsError bool
	}
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return "", fmt.Errorf("result %.200s: %v", r.Result, err)
	}
	if len(res.Content) != 1 || res.Content[0].Type != "text" || res.IsError {
		return "", fmt.Errorf("result %.200s, want one text block", r.Result)
	}
	return res.Content[0].Text, nil
}

// sessionConn is a raw NDJSON client of the session socket. Its methods
// return errors rather than failing the test, so that goroutines may use
// them.
type sessionConn struct {
	c *net.UnixConn
	r *bufio.Reader
}

func dialSession(path string) (*sessionConn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	uc := c.(*net.UnixConn)
	return &sessionConn{c: uc, r: bufio.NewReaderSize(uc, 64<<10)}, nil
}

// mustDial dials the session socket or fails the test; the connection is
// closed when the test ends.
func mustDial(t *testing.T, path string) *sessionConn {
	t.Helper()
	s, err := dialSession(path)
	if err != nil {
		t.Fatalf("dial the session socket: %v", err)
	}
	t.Cleanup(func() { s.c.Close() })
	return s
}

func (s *sessionConn) Close() error { return s.c.Close() }

// send writes lines, each with its newline.
func (s *sessionConn) send(lines ...string) error {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_ = s.c.SetWriteDeadline(time.Now().Add(answerWithin))
	_, err := s.c.Write([]byte(b.String()))
	return err
}

// next reads the next line.
func (s *sessionConn) next(within time.Duration) (reply, []byte, error) {
	_ = s.c.SetReadDeadline(time.Now().Add(within))
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		return reply{}, line, err
	}
	var r reply
	if err := json.Unmarshal(line, &r); err != nil {
		return reply{}, line, fmt.Errorf("undecodable line %.200q: %v", line, err)
	}
	return r, line, nil
}

// answer reads lines until the answer to id, skipping notifications; an
// answer to another id is an error.
func (s *sessionConn) answer(id string, within time.Duration) (reply, error) {
	deadline := time.Now().Add(within)
	for {
		r, line, err := s.next(time.Until(deadline))
		if err != nil {
			return r, fmt.Errorf("waiting for the answer to %s: %w", id, err)
		}
		if r.Method != "" && r.ID == nil {
			continue
		}
		if string(r.ID) != id {
			return r, fmt.Errorf("waiting for the answer to %s, got %.300s", id, line)
		}
		return r, nil
	}
}

// initialize opens a legacy session at version.
func (s *sessionConn) initialize(version string) error {
	if err := s.send(initializeLine(0, version)); err != nil {
		return err
	}
	r, err := s.answer("0", answerWithin)
	if err != nil {
		return err
	}
	var res struct{ ProtocolVersion string }
	if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || res.ProtocolVersion != version {
		return fmt.Errorf("initialize at %s: result %s, error %+v", version, r.Result, r.Error)
	}
	return s.send(initializedLine)
}

// echo calls echo with text as request id and checks the answer.
func (s *sessionConn) echo(id int, text string) error {
	if err := s.send(echoLine(id, text)); err != nil {
		return err
	}
	r, err := s.answer(fmt.Sprint(id), answerWithin)
	if err != nil {
		return err
	}
	got, err := toolText(r)
	if err != nil {
		return fmt.Errorf("echo %d: %w", id, err)
	}
	if got != text {
		return fmt.Errorf("echo %d = %.100q, want %.100q", id, got, text)
	}
	return nil
}

// drainToEOF reads and discards until the connection ends, and returns
// what ended it: nil for end of file.
func (s *sessionConn) drainToEOF(within time.Duration) error {
	_ = s.c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 64<<10)
	for {
		_, err := s.r.Read(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ptys and `snodod connect`.

// openPTY opens a pty; both ends are closed when the test ends. The
// master is made non-blocking (pty.Open leaves it blocking), so that
// closing it interrupts a read and writes obey deadlines.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	fd, err := unix.FcntlInt(m.Fd(), unix.F_DUPFD_CLOEXEC, 0)
	m.Close()
	if err != nil {
		tty.Close()
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		tty.Close()
		t.Fatal(err)
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	t.Cleanup(func() {
		master.Close()
		tty.Close()
	})
	return master, tty
}

// termios returns the settings of the terminal f, without changing f's
// blocking mode (Fd would), which it shares with the daemon.
func termios(t *testing.T, f *os.File) *unix.Termios {
	t.Helper()
	sc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var tio *unix.Termios
	var ierr error
	if err := sc.Control(func(fd uintptr) { tio, ierr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		t.Fatal(err)
	}
	if ierr != nil {
		t.Fatalf("TCGETS on %s: %v", f.Name(), ierr)
	}
	return tio
}

func isCanonical(t *testing.T, f *os.File) bool {
	tio := termios(t, f)
	return tio.Lflag&(unix.ICANON|unix.ECHO) == unix.ICANON|unix.ECHO
}

func isRaw(t *testing.T, f *os.File) bool {
	tio := termios(t, f)
	return tio.Lflag&(unix.ICANON|unix.ECHO) == 0 && tio.Oflag&unix.OPOST == 0
}

// readLines reads r's lines into the returned channel, which is closed
// when reading fails.
func readLines(r io.Reader) <-chan []byte {
	ch := make(chan []byte, 16)
	go func() {
		defer close(ch)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			ch <- line
		}
	}()
	return ch
}

// connectProc is a running `snodod connect`.
type connectProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
}

// startConnectOn runs `snodod connect --handover` with tty as its standard
// input and output (not as its controlling terminal) and its standard
// error on a pipe.
func startConnectOn(t *testing.T, d *daemonProc, tty *os.File) *connectProc {
	t.Helper()
	cmd := d.command("connect", "--handover")
	cmd.Stdin, cmd.Stdout = tty, tty
	return startConnect(t, cmd)
}

func startConnect(t *testing.T, cmd *exec.Cmd) *connectProc {
	t.Helper()
	c := &connectProc{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan struct{})}
	if cmd.Stderr == nil { // else the test reads it, a terminal say
		cmd.Stderr = c.stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop := watch(cmd, c.exited)
	t.Cleanup(func() {
		stop()
		if strings.Contains(c.stderr.String(), "DATA RACE") {
			t.Errorf("the race detector reported a race in snodod connect:\n%s", c.stderr.String())
		}
	})
	return c
}

// wait waits for connect to exit, and checks its status; a clean exit
// writes nothing to standard error.
func (c *connectProc) wait(t *testing.T, want int) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(answerWithin):
		t.Fatalf("snodod connect did not exit; standard error:\n%s", c.stderr.String())
	}
	if got := c.cmd.ProcessState.ExitCode(); got != want {
		t.Errorf("snodod connect exited %d, want %d; standard error:\n%s", got, want, c.stderr.String())
	} else if want == 0 && c.stderr.String() != "" {
		t.Errorf("snodod connect wrote to standard error:\n%s", c.stderr.String())
	}
}

// connectGoVia connects a Go SDK client to the daemon through `snodod
// connect` at version, with the client options opts makes for c (none
// when nil). Closing the session when the test ends closes connect's
// input: the session ends and connect must exit 0, silently.
func connectGoVia(t *testing.T, d *daemonProc, version string, opts ...func(c *goClient) *mcp.ClientOptions) *goClient {
	t.Helper()
	c := &goClient{rec: &recorder{}, progress: map[any][]*mcp.ProgressNotificationParams{}}
	var options *mcp.ClientOptions
	for _, o := range opts {
		options = o(c)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "snodod-e2e-connect", Version: "1"}, options)
	cmd := d.command("connect")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	transport := &recordingTransport{inner: &mcp.CommandTransport{Command: cmd}, rec: c.rec}
	cs, err := client.Connect(t.Context(), transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v\nsnodod connect: %s", version, err, stderr.String())
	}
	c.cs = cs
	t.Cleanup(func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: snodod connect did not exit cleanly: %v\n%s", err, stderr.String())
		} else if out := stderr.String(); out != "" {
			t.Errorf("snodod connect wrote to standard error:\n%s", out)
		}
	})
	return c
}

// logFile is a daemon's log, as a file every process of the daemon
// appends to.
type logFile struct{ path string }

// String returns the log so far.
func (l *logFile) String() string {
	b, _ := os.ReadFile(l.path)
	return string(b)
}

// waitGone waits up to within for process pid to be gone (or a zombie: it
// may be no child of ours to reap), and reports whether it is.
func waitGone(pid int, within time.Duration) bool {
	return eventually.Within(within, func() bool { return !proctest.Alive(pid) })
}

// awaitPIDFile waits for a live process's pid in pidfile (the fake
// upstream's -grandchild writes one, again after a restart) and returns
// it; without one within answerWithin the test fails with msg.
func awaitPIDFile(t *testing.T, pidfile, msg string) int {
	t.Helper()
	var pid int
	if !eventually.Within(answerWithin, func() bool {
		b, err := os.ReadFile(pidfile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0 && proctest.Alive(pid)
	}) {
		t.Fatal(msg)
	}
	return pid
}

// children returns the pids of pid's live (not zombie) children.
func children(t *testing.T, pid int) []int {
	t.Helper()
	all, err := proc.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range all {
		if p.PPID == pid && !p.Exited() {
			out = append(out, p.PID)
		}
	}
	return out
}
