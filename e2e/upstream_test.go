package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// Hosted servers (docs/upstreams.md) behind the real binary: the fake upstream
// for what only a daemon process shows (orphans after kill -9), and the
// reference servers from npm (upstream_npm_test.go).

var (
	fakeOnce sync.Once
	fakeBin  string
	fakeErr  error
)

// fakeUpstream builds internal/fakeupstream once per test run.
func fakeUpstream(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		dir := filepath.Dir(binary)
		fakeBin = filepath.Join(dir, "fakeupstream")
		out, err := exec.Command("go", "build", "-o", fakeBin, "github.com/snodod/snodod/internal/fakeupstream").CombinedOutput()
		if err != nil {
			fakeErr = fmt.Errorf("build the fake upstream: %v\n%s", err, out)
		}
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeBin
}

// TestUpstreamOrphansAfterKill9: a daemon killed with SIGKILL leaves its
// upstream's grandchild behind (the child itself, which carries no
// parent-death signal so that an upgrade can hand it over, exits at the
// end of its stdin); the next daemon on the same sockets kills it.
func TestUpstreamOrphansAfterKill9(t *testing.T) {
	fake := fakeUpstream(t)
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	pidfile := filepath.Join(dir, "grandchild.pid")
	config := fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nargs = [\"-grandchild\", %q]\nstart = \"eager\"\n", fake, pidfile)
	d := startDaemonIn(t, dir, config, nil)
	d.awaitStatus(t, "the upstream ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready"
	})
	grandchild := awaitPIDFile(t, pidfile, "the fake did not start its grandchild")
	t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
	d.signal(t, syscall.SIGKILL)
	d.waitExit(t, answerWithin)
	time.Sleep(100 * time.Millisecond) // the parent-death signal is asynchronous
	if !proctest.Alive(grandchild) {
		t.Fatalf("the grandchild %d died with the daemon: nothing for the next one to clean up", grandchild)
	}
	// The next daemon has no upstreams (its configuration replaces the
	// first's): it still kills what the first left.
	d2 := startDaemonIn(t, dir, "# no upstreams\n", nil)
	if !waitGone(grandchild, answerWithin) {
		t.Errorf("the orphaned grandchild %d still runs after a new daemon started", grandchild)
	}
	// It logs what it killed once the group is gone: the line may follow
	// the grandchild's death by a moment.
	if !eventually.Within(answerWithin, func() bool {
		return strings.Contains(d2.stderr.String(), "killed upstream processes a previous daemon left running")
	}) {
		t.Errorf("the new daemon did not say what it killed:\n%s", d2.stderr.String())
	}
}

// TestUpstreamConnectViewErrors: an unknown view is refused with the
// configured names, on the client's stdout and stderr.
func TestUpstreamConnectViewErrors(t *testing.T) {
	fake := fakeUpstream(t)
	d := startDaemon(t, fmt.Sprintf("[mcpServers.fake]\ncommand = %q\n", fake), nil)
	cmd := d.command("connect", "nope")
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("connect nope: %v", err)
	}
	if !strings.Contains(string(out), `the configured upstreams are fake`) || !strings.Contains(string(exit.Stderr), "the configured upstreams are fake") {
		t.Errorf("stdout %s\nstderr %s", out, exit.Stderr)
	}
	// connect NAME with the Go SDK client: the pass-through view.
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: d.command("connect", "fake")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if info := cs.InitializeResult().ServerInfo; info.Name != "fakeupstream" {
		t.Errorf("serverInfo %+v, want the upstream's own", info)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
}
