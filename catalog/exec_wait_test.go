package catalog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// An exec tool's run in the shared executor, as the daemon serves it: it
// gives its executor slot back once its child runs (docs/transport.md §13.7),
// and its deadline is the tool's timeout, not session.request_timeout
// (docs/config.md, "Which deadline wins").

// executed submits a tools/call of name to ec, from a client of its own
// (a client sends one request at a time), and returns the channel of its
// outcome.
func executed(t *testing.T, ec *executor.Conn, srv *server.Server, id int64, name string) chan server.Outcome {
	t.Helper()
	c := newClient(t, srv, "2025-11-25", `{}`)
	out := make(chan server.Outcome, 1)
	run := func(ctx context.Context) server.Outcome {
		return c.dispatch(ctx, "tools/call", map[string]any{"name": name})
	}
	if err := ec.Submit(context.Background(), protocol.IntID(id), run, func(o server.Outcome) { out <- o }); err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return out
}

func newExecutor(t *testing.T, l executor.Limits) *executor.Executor {
	t.Helper()
	e, err := executor.New(l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// outcome waits for an outcome, at most a minute (a failure deadline).
func outcome(t *testing.T, ch chan server.Outcome, what string) server.Outcome {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(time.Minute):
		t.Fatalf("no outcome for %s", what)
		return server.Outcome{}
	}
}

// TestExecRunsGiveSlotsBack: every executor slot's worth of running exec
// tools and one more, and a fast request still gets a slot at once.
func TestExecRunsGiveSlotsBack(t *testing.T) {
	dir := t.TempDir()
	// The child records that it started and waits to be stopped.
	script := write(t, dir, "wait.sh", "#!/bin/sh\n: > \"$1/started-$$\"\nexec sleep 600\n")
	if err := os.Chmod(script, 0o755); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, executor.Limits{})
	runs := e.Limits().MaxConcurrency + 1
	_, srv := newHost(t, loadConfig(t, dir, fmt.Sprintf("[tools.wait]\ncommand = [%q, %q]\nmax_concurrency = %d\n", script, dir, runs)), catalog.HostOptions{})
	srv.AddTool(&server.Tool{Name: "fast", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return &server.CallToolResult{Content: []server.Content{server.TextContent("fast")}}, nil
		})
	ec := e.Conn()
	t.Cleanup(ec.CancelAll) // stops the children, also when the test fails
	for i := range runs {
		executed(t, ec, srv, int64(i), "wait")
	}
	started := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "started-*"))
		return len(m)
	}
	if !eventually.Within(30*time.Second, func() bool { return started() >= runs }) {
		t.Fatalf("%d of %d runs started; the others wait for an executor slot", started(), runs)
	}
	// A child records its start before its run detaches from its slot:
	// wait for the executor to see every run detached.
	var s executor.Stats
	if !eventually.Within(30*time.Second, func() bool { s = e.Stats(); return s.Running == 0 && s.Detached == runs }) {
		t.Fatalf("executor %+v, want nothing running and %d detached", s, runs)
	}
	fast := outcome(t, executed(t, ec, srv, int64(runs), "fast"), "the fast call")
	if b, _ := json.Marshal(fast.Result); fast.Err != nil || !strings.Contains(string(b), `"fast"`) {
		t.Errorf("fast call: %s %v", b, fast.Err)
	}
}

// TestExecDeadlineIsTheToolTimeout: with session.request_timeout shorter
// than a run, the run's own timeout decides, success or "timed out".
func TestExecDeadlineIsTheToolTimeout(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, executor.Limits{RequestTimeout: 200 * time.Millisecond})
	_, srv := newHost(t, loadConfig(t, dir, `
[tools.finishes]
command = ["sleep", "0.6"]
timeout = "5s"
[tools.overruns]
command = ["sleep", "60"]
timeout = "400ms"
`), catalog.HostOptions{})
	ec := e.Conn()
	t.Cleanup(ec.CancelAll)
	for i, tc := range []struct{ tool, want string }{
		{"finishes", `"isError":false`},
		{"overruns", "timed out after 400ms (tools.overruns.timeout)"},
	} {
		o := outcome(t, executed(t, ec, srv, int64(i), tc.tool), tc.tool)
		b, _ := json.Marshal(o.Result)
		if o.Err != nil || !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s %v, want a result with %s", tc.tool, b, o.Err, tc.want)
		}
	}
}
