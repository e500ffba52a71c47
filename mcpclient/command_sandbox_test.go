package mcpclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/proc/proctest"
	"github.com/snodod/snodod/internal/sandbox"
)

func needSandbox(t *testing.T) {
	t.Helper()
	if k := sandbox.Probe(); !k.Namespaces || !k.View {
		t.Skipf("no namespaces for a sandbox here: %+v", k)
	}
}

// TestSandboxedCommand: a Command with a sandbox starts through the
// launcher, hands its report to Sandboxed before the handshake, serves
// calls, and a crash is the server's own exit status (from the init in
// its PID namespace), with its stderr.
func TestSandboxedCommand(t *testing.T) {
	needSandbox(t)
	cmd := fakeCommand()
	cmd.Sandbox = sandbox.Policy{Level: sandbox.Standard, Home: filepath.Join(t.TempDir(), "home")}
	var mu sync.Mutex
	var reports []sandbox.Report
	cmd.Sandboxed = func(r sandbox.Report) {
		mu.Lock()
		reports = append(reports, r)
		mu.Unlock()
	}
	c := startCommand(t, cmd, Options{})
	mu.Lock()
	if len(reports) != 1 || reports[0].Level != sandbox.Standard || !reports[0].Enforced(sandbox.FeaturePIDNamespace) {
		t.Errorf("reports %v, want one of standard with its PID namespace", reports)
	}
	mu.Unlock()
	if got := toolText(t, c, "echo", map[string]any{"text": "boxed"}, CallOptions{}); !strings.Contains(got, "boxed") {
		t.Errorf("echo: %q", got)
	}
	_, err := c.Call(context.Background(), "tools/call", toolParams(t, "crash", map[string]any{"code": 3, "stderr": "panic: boxed"}, nil), CallOptions{})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || ee.Signal != 0 || !strings.Contains(ee.Stderr, "panic: boxed") {
		t.Fatalf("crash = %#v, want the server's exit status 3 with its stderr", err)
	}
	<-c.Done()
}

// TestSandboxedCommandCannotStart: a launcher that cannot start the server
// (here its program lies under a hidden path, so the view does not hold
// it) fails the start with the launcher's reason, and leaves nothing.
func TestSandboxedCommandCannotStart(t *testing.T) {
	needSandbox(t)
	proctest.Cleanup(t)
	hidden := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(filepath.Join(hidden, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(hidden, "bin", "server")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := Command{Path: prog, Env: []string{"PATH=/usr/bin:/bin"},
		Sandbox: sandbox.Policy{Level: sandbox.Standard, Home: filepath.Join(t.TempDir(), "home"), Hide: []string{hidden}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, cmd, Options{Name: "boxed"})
	if err == nil {
		stop(c)
		t.Fatal("a server the view does not hold started")
	}
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != -1 || !strings.Contains(err.Error(), "sandbox: start "+prog) {
		t.Errorf("Connect = %v, want the launcher's reason", err)
	}
}
