package session

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/thejerf/suture/v4"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/snodod/snodod/internal/faults"
	"github.com/snodod/snodod/internal/syncbuf"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// leakCheck verifies, after every other cleanup of the test, that no
// goroutine outlives it. Call it first.
func leakCheck(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

// catalog is a small runtime: echo, fill (n bytes of text) and block
// (runs until released or cancelled).
type catalog struct {
	*server.Server
	started chan string   // block's id-less start signal, one per call
	release chan struct{} // closed: every block returns "released"
	once    sync.Once
}

func newCatalog(t testing.TB) *catalog {
	s, err := server.New(server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &catalog{Server: s, started: make(chan string, 100), release: make(chan struct{})}
	type echoIn struct {
		Text string `json:"text"`
	}
	server.AddTool(s, &server.Tool{Name: "echo"}, func(_ context.Context, _ *server.CallToolRequest, in echoIn) (*server.CallToolResult, any, error) {
		return &server.CallToolResult{Content: []server.Content{server.TextContent(in.Text)}}, nil, nil
	})
	type fillIn struct {
		N int `json:"n"`
	}
	server.AddTool(s, &server.Tool{Name: "fill"}, func(_ context.Context, _ *server.CallToolRequest, in fillIn) (*server.CallToolResult, any, error) {
		return &server.CallToolResult{Content: []server.Content{server.TextContent(pattern(in.N))}}, nil, nil
	})
	type blockIn struct {
		Name string `json:"name"`
	}
	server.AddTool(s, &server.Tool{Name: "block"}, func(ctx context.Context, _ *server.CallToolRequest, in blockIn) (*server.CallToolResult, any, error) {
		c.started <- in.Name
		select {
		case <-c.release:
			return &server.CallToolResult{Content: []server.Content{server.TextContent("released")}}, nil, nil
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	})
	t.Cleanup(c.Release)
	return c
}

// Release lets every block call return.
func (c *catalog) Release() { c.once.Do(func() { close(c.release) }) }

func (c *catalog) waitStarted(t *testing.T, name string) {
	t.Helper()
	select {
	case got := <-c.started:
		if got != name {
			t.Fatalf("block %q started, want %q", got, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("block %q did not start", name)
	}
}

// pattern is n bytes of printable ASCII that JSON leaves unescaped, varied
// enough that a lost, doubled or translated byte shows.
func pattern(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;:-_+=()[]{}!?@#$%^*~|"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[(i*7+i/97)%len(alphabet)]
	}
	return string(b)
}

// config is a Config on a fresh catalog and executor.
func config(t *testing.T, cat *catalog) Config {
	exec, err := executor.New(executor.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Close)
	t.Cleanup(faults.Arm()) // sessions made now take injected faults
	return Config{Dispatcher: cat, Executor: exec}
}

// fault makes s's running instance fail once, as a bug in its coordinator
// would (internal/faults); it returns once an instance took it or s ended.
func fault(s *Session) { faults.Inject(s) }

// run serves s in the background. stop cancels Serve's ctx (daemon
// shutdown); a cleanup cancels it too and waits for Serve to return.
func run(t *testing.T, s *Session) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-served:
			if !errors.Is(err, suture.ErrDoNotRestart) {
				t.Errorf("Serve returned %v, want ErrDoNotRestart", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return within 20s")
		}
	})
	return cancel
}

func waitDone(t *testing.T, s *Session) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("session did not end within 10s")
	}
}

// client is the test's end of a device.
type client struct {
	t     *testing.T
	w     io.Writer
	lines chan string // closed at EOF

	mu      sync.Mutex
	read    int64 // bytes of the lines received, newlines included
	written int64 // bytes sent
}

func newClient(t *testing.T, end clientEnd) *client {
	c := &client{t: t, w: end.w, lines: make(chan string, 1000)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(c.lines)
		br := bufio.NewReaderSize(end.r, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			c.mu.Lock()
			c.read += int64(len(l))
			c.mu.Unlock()
			c.lines <- l[:len(l)-1]
		}
	}()
	t.Cleanup(func() {
		end.closeAll()
		<-done
	})
	return c
}

func (c *client) send(lines ...string) {
	c.t.Helper()
	for _, l := range lines {
		n, err := io.WriteString(c.w, l+"\n")
		c.mu.Lock()
		c.written += int64(n)
		c.mu.Unlock()
		if err != nil {
			c.t.Fatalf("write request: %v", err)
		}
	}
}

func (c *client) next() string {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("EOF, want a line")
		}
		return l
	case <-time.After(10 * time.Second):
		c.t.Fatal("no line within 10s")
	}
	return ""
}

// eof expects the device's output to be closed, with no line before.
func (c *client) eof() {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if ok {
			c.t.Fatalf("unexpected line %s", l)
		}
	case <-time.After(10 * time.Second):
		c.t.Fatal("no EOF within 10s")
	}
}

func (c *client) bytesRead() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

func (c *client) bytesWritten() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.written
}

// Devices. Each returns the Device and the client's end; the client's
// descriptors are closed by a cleanup.

type clientEnd struct {
	r          io.Reader
	w          io.Writer
	closeInput func() // end of input, as the client makes it
	closeAll   func() // the client goes away
}

// pipeDevice is a client's handed-over stdin and stdout. blocking makes
// the device's descriptors blocking, as they arrive over SCM_RIGHTS.
func pipeDevice(t *testing.T, blocking bool, peer Peer) (*Device, clientEnd) {
	inR, inW := pipe(t, blocking, 0)
	outR, outW := pipe(t, blocking, 1)
	dev, err := NewDevice(inR, outW, peer)
	if err != nil {
		t.Fatal(err)
	}
	closeAll := func() { inW.Close(); outR.Close() }
	t.Cleanup(closeAll)
	return dev, clientEnd{r: outR, w: inW, closeInput: func() { inW.Close() }, closeAll: closeAll}
}

// pipe returns a pipe; with blocking, the device's end (devEnd 0 for the
// read end, 1 for the write end) is blocking and unknown to Go's poller, as
// a descriptor received over SCM_RIGHTS. The client's end stays pollable,
// so closing it stops a reader. A pipe's two ends are two open file
// descriptions: one's mode does not change the other's.
func pipe(t *testing.T, blocking bool, devEnd int) (r, w *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if !blocking {
		return r, w
	}
	ends := []*os.File{r, w}
	f := ends[devEnd]
	var dup int
	if err := Control(f, func(fd int) error {
		dup, err = unix.Dup(fd)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := unix.SetNonblock(dup, false); err != nil {
		t.Fatal(err)
	}
	ends[devEnd] = os.NewFile(uintptr(dup), f.Name())
	return ends[0], ends[1]
}

// socketDevice is a session-socket connection whose descriptor is still
// blocking, the harder case: the Device must make it non-blocking.
func socketDevice(t *testing.T, peer Peer) (*Device, clientEnd) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[0]), "socket")
	dev, err := NewDevice(f, f, peer)
	if err != nil {
		t.Fatal(err)
	}
	cf := os.NewFile(uintptr(fds[1]), "client")
	conn, err := net.FileConn(cf)
	cf.Close()
	if err != nil {
		t.Fatal(err)
	}
	closeAll := func() { conn.Close() }
	t.Cleanup(closeAll)
	return dev, clientEnd{r: conn, w: conn, closeInput: func() { conn.(*net.UnixConn).CloseWrite() }, closeAll: closeAll}
}

// ptyDevice opens a pty and leaves it as a client would: canonical mode,
// echo on, its description blocking (a shell's terminal). The device gets
// the session side (the tty); the client the master, re-made pollable
// (creack/pty's ioctls call Fd(), which puts the master into blocking mode,
// and a blocked read would then survive Close). ttyFd is a dup of the tty
// for the test's checks; orig is the termios the client left.
func ptyDevice(t *testing.T, peer Peer) (dev *Device, end clientEnd, ttyFd int, orig *unix.Termios) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	if err := Control(tty, func(fd int) error {
		ttyFd, err = unix.Dup(fd)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(ttyFd) })
	if err := unix.SetNonblock(ttyFd, false); err != nil {
		t.Fatal(err)
	}
	if orig, err = unix.IoctlGetTermios(ttyFd, unix.TCGETS); err != nil {
		t.Fatal(err)
	}
	mfd, err := unix.Dup(int(master.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	master.Close()
	if err := unix.SetNonblock(mfd, true); err != nil {
		t.Fatal(err)
	}
	m := os.NewFile(uintptr(mfd), "ptmx")
	closeAll := func() { m.Close() }
	t.Cleanup(closeAll)
	if dev, err = NewDevice(tty, tty, peer); err != nil {
		t.Fatal(err)
	}
	return dev, clientEnd{r: m, w: m, closeInput: closeAll, closeAll: closeAll}, ttyFd, orig
}

// Requests.

const meta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// call is a 2026-era tools/call.
func call(id any, tool string, args any) string {
	return line(id, "tools/call", map[string]any{"name": tool, "arguments": args, "_meta": json.RawMessage(meta)})
}

// lcall is a legacy tools/call.
func lcall(id any, tool string, args any) string {
	return line(id, "tools/call", map[string]any{"name": tool, "arguments": args})
}

func line(id any, method string, params any) string {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func initialize(version string) string {
	return `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
}

// response is a decoded output line.
type response struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		ResultType      string `json:"resultType"`
		ProtocolVersion string `json:"protocolVersion"`
		Content         []struct {
			Text string `json:"text"`
		} `json:"content"`
		Tools []json.RawMessage `json:"tools"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, l string) response {
	t.Helper()
	var r response
	if err := json.Unmarshal([]byte(l), &r); err != nil {
		t.Fatalf("not JSON: %v: %.200q", err, l)
	}
	return r
}

// text expects a text result for id and returns its text.
func text(t *testing.T, l string, id string) string {
	t.Helper()
	r := decode(t, l)
	if string(r.ID) != id || r.Result == nil || len(r.Result.Content) != 1 {
		t.Fatalf("want a text result for %s, got %.300s", id, l)
	}
	return r.Result.Content[0].Text
}

func errLine(id string, code int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%q}}`, id, code, msg)
}

// logBuffer collects JSON log records from any goroutine.
type logBuffer struct{ syncbuf.Buffer }

func (b *logBuffer) records(t *testing.T) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line: %v: %s", err, l)
		}
		out = append(out, m)
	}
	return out
}

func captureLogs() (*logBuffer, *slog.Logger) {
	b := &logBuffer{}
	return b, slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
