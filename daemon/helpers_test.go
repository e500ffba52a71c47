package daemon

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(activationHelper())
	}
	if os.Getenv(successorEnv) != "" && os.Getenv(UpgradeEnv) != "" {
		if os.Getenv(successorEnv) == "adopt" {
			os.Exit(adoptingSuccessor())
		}
		os.Exit(refusingSuccessor())
	}
	goleak.VerifyTestMain(m,
		// os/signal's dispatcher starts with the first signal.Notify and
		// stays for the life of the process.
		goleak.IgnoreTopFunction("os/signal.signal_recv"),
		goleak.IgnoreTopFunction("os/signal.loop"),
	)
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// shortDir returns a new directory with a short path: a Unix socket's path
// must fit in 108 bytes, and t.TempDir() paths can be longer.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// testLogger discards the daemon's log unless SNODOD_TEST_LOG=1.
func testLogger() *slog.Logger {
	if os.Getenv("SNODOD_TEST_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// loadConfig loads the configuration a test daemon in dir uses: the
// session socket dir/s.sock, a short grace, and over on top. It reads no
// file and none of the developer's environment.
func loadConfig(dir string, over map[string]any) (*config.Config, error) {
	o := map[string]any{
		"daemon.socket":         filepath.Join(dir, "s.sock"),
		"daemon.shutdown_grace": 2 * time.Second,
	}
	maps.Copy(o, over)
	return config.Load(config.Options{Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}, Overrides: o})
}

func testConfig(t *testing.T, dir string, over map[string]any) *config.Config {
	t.Helper()
	cfg, err := loadConfig(dir, over)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// demo registers the demo tools, as `snodod serve --demo` does.
func demo(s *server.Server) { catalog.Demo(s) }

// running is a daemon serving in the background.
type running struct {
	d    *Daemon
	cfg  *config.Config
	stop context.CancelFunc
	errc chan error
}

// startDaemon runs a daemon until the test ends, and waits until both its
// sockets answer.
func startDaemon(t *testing.T, cfg *config.Config, opts Options) *running {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	if opts.Catalog == nil {
		opts.Catalog = demo
	}
	d, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{d: d, cfg: cfg, stop: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := r.wait(t); err != nil {
			t.Errorf("Run: %v", err)
		}
		// Every session ended, every entry of the table was reaped.
		if err := d.sessions.checkEmpty(); err != nil {
			t.Errorf("the session table after Run: %v", err)
		}
	})
	select {
	case <-d.ready:
	case err := <-r.errc:
		r.errc <- err
		t.Fatalf("Run: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon is not ready")
	}
	return r
}

// wait returns Run's result, failing the test when it takes too long.
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.errc:
		r.errc <- err // for a second wait
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// client is a connection to the session socket.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialSession(t *testing.T, path string) *client {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReaderSize(c, 1<<20)}
}

func (c *client) send(lines ...string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, strings.Join(lines, "\n")+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// line reads one line, without its newline; "" at end of input.
func (c *client) line() string {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	s, err := c.r.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		c.t.Fatalf("read: %v (got %q)", err, s)
	}
	return strings.TrimSuffix(s, "\n")
}

// eof asserts that the daemon closed the connection.
func (c *client) eof() {
	c.t.Helper()
	if rest := c.line(); rest != "" {
		c.t.Fatalf("after the last line: %q, want end of input", rest)
	}
}

// initialize runs the handshake and returns the initialize result line.
func (c *client) initialize() string {
	c.t.Helper()
	c.send(initLine)
	got := c.line()
	if !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":1,"result":`) {
		c.t.Fatalf("initialize: %q", got)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return got
}

// call sends a tools/call and returns the line answering id.
func (c *client) call(id int, tool, args string) string {
	c.t.Helper()
	c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, id, tool, args))
	return c.answer(id)
}

// answer reads lines until the one answering id.
func (c *client) answer(id int) string {
	c.t.Helper()
	prefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, id)
	for {
		l := c.line()
		if l == "" {
			c.t.Fatalf("end of input before the answer to %d", id)
		}
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
}

// rawControl sends one request line on the control socket and returns the
// reply lines until the daemon closes the connection.
func rawControl(t *testing.T, path, request string) []map[string]any {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, request+"\n"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var out []map[string]any
	sc := bufio.NewScanner(c)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}
