package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/internal/syncbuf"
)

// binary is the snodod binary under test, built with the race detector by
// TestMain.
var binary string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv(httpClientEnv) != "" { // this binary run as another user's HTTP client
		return httpClientMain()
	}
	dir, err := os.MkdirTemp("", "snodod-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// Every process a test leaves behind (a daemon's upstream that
	// escaped, a grandchild) becomes this process's child, where the
	// check after the tests finds it.
	if err := proctest.Subreaper(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	binary = filepath.Join(dir, "snodod")
	build := exec.Command("go", "build", "-race", "-o", binary, "github.com/snodod/snodod/cmd/snodod")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building snodod with -race:", err)
		return 1
	}
	code := m.Run()
	for _, leak := range proctest.Leftovers() {
		fmt.Fprintln(os.Stderr, "e2e: process leak:", leak)
		code = 1
	}
	if code == 0 {
		// The Go SDK's client ends the goroutines it starts once its
		// session is closed; the one that delivers a cancellation in the
		// background (mcp/transport.go) ends soon after, within the
		// retries goleak.Find allows.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: leaked goroutines:", err)
			return 1
		}
	}
	return code
}

// serverCommand returns the command that runs `snodod stdio --demo`, and
// registers a check, run when the test ends, that the race detector found
// nothing. Its standard error is kept, and logged when the test fails.
func serverCommand(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "stdio", "--demo")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cmd.Env = isolatedEnv(t.TempDir())
	t.Cleanup(func() {
		out := stderr.String()
		if strings.Contains(out, "DATA RACE") {
			t.Errorf("the race detector reported a race in snodod:\n%s", out)
		} else if t.Failed() {
			t.Logf("snodod's standard error:\n%s", out)
		}
	})
	return cmd
}

// isolatedEnv is this process's environment for a snodod under test: none
// of the developer's SNODOD_* settings, configuration file, runtime
// directory or systemd variables, but dir/config and dir/run in their
// place (and dir/state, where hosted servers' catalogs are cached), and a race detector that makes the process exit with status 66.
func isolatedEnv(dir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "SNODOD_"), strings.HasPrefix(name, "LISTEN_"),
			name == "XDG_RUNTIME_DIR", name == "XDG_CONFIG_HOME", name == "XDG_STATE_HOME", name == "NOTIFY_SOCKET",
			name == "WATCHDOG_USEC", name == "WATCHDOG_PID", name == "GORACE":
		default:
			env = append(env, kv)
		}
	}
	return append(env,
		"XDG_RUNTIME_DIR="+filepath.Join(dir, "run"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"GORACE=exitcode=66 atexit_sleep_ms=10")
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer = syncbuf.Buffer

// recorder keeps every message that crossed a connection, as decoded
// JSON-RPC envelopes, so that tests can look for lines the client library
// would hide (responses to cancelled requests, stray notifications).
type recorder struct {
	mu      sync.Mutex
	in, out []envelope
}

// envelope is the part of a JSON-RPC message the tests look at.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

func (r *recorder) add(to *[]envelope, m jsonrpc.Message) {
	b, err := jsonrpc.EncodeMessage(m)
	var e envelope
	if err == nil {
		err = json.Unmarshal(b, &e)
	}
	if err != nil {
		e.Method = "(undecodable: " + err.Error() + ")"
	}
	r.mu.Lock()
	*to = append(*to, e)
	r.mu.Unlock()
}

// incoming returns the messages received so far.
func (r *recorder) incoming() []envelope {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]envelope(nil), r.in...)
}

// sentID returns the id of the first request sent with method whose
// params contain fragment.
func (r *recorder) sentID(method, fragment string) (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.out {
		if e.Method == method && e.ID != nil && strings.Contains(string(e.Params), fragment) {
			return e.ID, true
		}
	}
	return nil, false
}

// recordingTransport is an mcp.Transport whose connection reports every
// message to a recorder.
type recordingTransport struct {
	inner mcp.Transport
	rec   *recorder
}

func (t *recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: c, rec: t.rec}, nil
}

type recordingConn struct {
	mcp.Connection
	rec *recorder
}

func (c *recordingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		c.rec.add(&c.rec.in, m)
	}
	return m, err
}

func (c *recordingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	c.rec.add(&c.rec.out, m)
	return c.Connection.Write(ctx, m)
}
