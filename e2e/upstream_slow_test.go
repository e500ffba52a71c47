package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// One hosted server that never finishes its handshake must not touch the
// others (docs/upstreams.md §4, upstreams.list_wait): the
// repros over the real binary with the official Go SDK client. The fake
// upstream is "good"; "hang" is `sleep 1000`, which never answers; "slow"
// is the fake behind a gate file the test creates, so that it becomes
// ready when the test says, and every assertion is one of order.

// hangEntry is a server that never finishes its handshake.
const hangEntry = `
[mcpServers.hang]
command = "sleep"
args = ["1000"]
`

// gatedEntry is the fake behind a gate: its handshake waits until gate exists.
func gatedEntry(name, fake, gate string) string {
	return fmt.Sprintf(`
[mcpServers.%s]
command = "/bin/sh"
args = ["-c", "while [ ! -e '%s' ]; do sleep 0.01; done; exec '%s'"]
`, name, gate, fake)
}

// TestUpstreamHangStdio is the first repro: `snodod stdio --config F`
// with a good server and one that hangs answered list-tools after 30 s
// with -32603 and no tools at all. With the default list_wait the list
// answers with the good server's tools, and a call of the good one works.
func TestUpstreamHangStdio(t *testing.T) {
	fake := fakeUpstream(t)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("[mcpServers.good]\ncommand = %q\n", fake)+hangEntry), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "stdio", "--config", config)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cmd.Env = isolatedEnv(dir)
	t.Cleanup(func() {
		if strings.Contains(stderr.String(), "DATA RACE") || t.Failed() {
			t.Logf("snodod's standard error:\n%s", stderr.String())
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), answerWithin)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	names := toolNames(t, cs)
	if !slices.Contains(names, "good__echo") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "hang__") }) {
		t.Errorf("tools with one server hanging: %q", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "good__echo", Arguments: map[string]any{"x": 1}})
	if err != nil || res.IsError {
		t.Errorf("good__echo: %v %+v", err, res)
	}
}

// TestUpstreamHangAfterReload is the daemon's repro: a SIGHUP adds a
// server that hangs beside one already listed; list-tools answers with
// the listed one's tools, at the first list (which starts it) and the
// next, status shows the hanging process's pid and since when it starts, and a
// reload that removes it stops it at once.
func TestUpstreamHangAfterReload(t *testing.T) {
	fake := fakeUpstream(t)
	good := fmt.Sprintf("[upstreams]\nlist_wait = \"200ms\"\n[mcpServers.good]\ncommand = %q\n", fake)
	d := startDaemon(t, good, nil)
	c := connectGoVia(t, d, "2025-11-25")
	// A call waits for good's start, however slow the machine: the first
	// list then finds it listed, rather than racing its start against the
	// 200 ms list_wait.
	if res, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "good__echo", Arguments: map[string]any{"x": 1}}); err != nil || res.IsError {
		t.Fatalf("good__echo: %v %+v", err, res)
	}
	if names := toolNames(t, c.cs); !slices.Contains(names, "good__echo") {
		t.Fatalf("tools before the reload: %q", names)
	}
	d.writeConfig(t, good+hangEntry)
	d.signal(t, syscall.SIGHUP)
	d.awaitStatus(t, "hang configured", answerWithin, func(st *control.Status) bool { return len(st.Upstreams) == 2 })
	for range 2 { // the first list starts hang; the second finds it starting
		names := toolNames(t, c.cs)
		if !slices.Contains(names, "good__echo") || slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "hang__") }) {
			t.Errorf("tools with hang starting: %q", names)
		}
	}
	var hang control.Upstream
	d.awaitStatus(t, "hang starting with its pid", answerWithin, func(st *control.Status) bool {
		for _, r := range st.Upstreams {
			if r.Name == "hang" {
				hang = r
			}
		}
		return hang.State == control.StateStarting && hang.PID != 0 && !hang.StartingSince.IsZero()
	})
	if !proctest.Alive(hang.PID) {
		t.Fatalf("status pid %d is no live process", hang.PID)
	}
	out, err := d.command("status").Output()
	if err != nil || !strings.Contains(string(out), "hang: starting for ") || !strings.Contains(string(out), fmt.Sprint(hang.PID)) {
		t.Errorf("snodod status: %v\n%s", err, out)
	}

	d.writeConfig(t, good)
	d.signal(t, syscall.SIGHUP)
	if !waitGone(hang.PID, answerWithin) {
		t.Errorf("the removed server's process %d still runs while it starts (start_timeout 2 min)", hang.PID)
	}
}

// TestUpstreamSlowListChanged: a list answers before a slow server is
// ready, and list_changed follows when it is, to a legacy client (the
// notification) and a 2026 one (its listen stream, which the Go SDK opens
// for its ToolListChangedHandler); the next list has the slow server's
// tools.
func TestUpstreamSlowListChanged(t *testing.T) {
	fake := fakeUpstream(t)
	for _, version := range []string{"2025-11-25", v2026} {
		t.Run(version, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "gate")
			d := startDaemon(t, fmt.Sprintf("[upstreams]\nlist_wait = \"100ms\"\n[mcpServers.good]\ncommand = %q\nstart = \"eager\"\n", fake)+gatedEntry("slow", fake, gate), nil)
			// good is listed before the client comes: the only list change
			// it can hear is slow's.
			d.awaitStatus(t, "good ready", answerWithin, func(st *control.Status) bool {
				return slices.ContainsFunc(st.Upstreams, func(r control.Upstream) bool { return r.Name == "good" && r.State == control.StateReady })
			})
			c := connectGoVia(t, d, version, goClientOptions)
			names := toolNames(t, c.cs)
			if slices.Contains(names, "slow__echo") || !slices.Contains(names, "good__echo") {
				t.Fatalf("tools before slow's gate opened: %q", names)
			}
			st, err := d.status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range st.Upstreams {
				if r.Name == "slow" && r.State == control.StateReady {
					t.Fatalf("slow ready before its gate opened: %+v", r)
				}
			}
			var before int
			c.locked(func() { before = c.toolsChanged })
			if err := os.WriteFile(gate, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if !eventually.Within(answerWithin, func() (ok bool) { c.locked(func() { ok = c.toolsChanged > before }); return }) {
				t.Fatal("no tools list_changed once the slow server was ready")
			}
			if names := toolNames(t, c.cs); !slices.Contains(names, "slow__echo") || !slices.Contains(names, "good__echo") {
				t.Errorf("tools once slow is ready: %q", names)
			}
		})
	}
}
