package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/proc/proctest"
)

// Hosted servers survive `snodod upgrade` (docs/operations.md,
// "Upgrading"): a server-memory graph built before the upgrade, through a
// Go SDK client whose session is handed over too, reads the same after it,
// served by the same process (snodod status --json: the same pid, no
// restart counted, the same sandbox level), never initialized twice (the
// client's own session did not initialize again either: the SDK would
// fail), and again after a second upgrade. Under "standard" the pid is the
// sandbox launcher's, the server's init in its PID namespace; "off" runs
// node itself.
func TestUpgradeKeepsServerMemory(t *testing.T) {
	memory := npmServer(t, "server-memory")
	for _, level := range []string{"standard", "off"} {
		t.Run(level, func(t *testing.T) {
			memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
			config := fmt.Sprintf(`
[sandbox]
level = %q

[mcpServers.memory]
command = "node"
args = [%q]
env = { MEMORY_FILE_PATH = %q }
sandbox = { paths = [%q] }
`, level, memory, memoryFile, filepath.Dir(memoryFile))
			if level == "standard" {
				config = strings.Replace(config, "level = \"standard\"", "level = \"standard\"\nrequired = true", 1)
			}
			d := startDaemon(t, config, nil)
			c := connectNPM(t, "2025-11-25", &mcp.CommandTransport{Command: d.command("connect", "memory")}, "connect memory")
			c.call(t, "create_entities", map[string]any{"entities": []map[string]any{
				{"name": "Ada", "entityType": "person", "observations": []string{"wrote the first program"}},
				{"name": "Engine", "entityType": "machine", "observations": []string{"analytical"}},
			}})
			c.call(t, "create_relations", map[string]any{"relations": []map[string]any{{"from": "Ada", "to": "Engine", "relationType": "programmed"}}})
			graph := resultText(c.call(t, "read_graph", nil))
			before := memoryRow(t, d.statusJSON(t))
			if before.PID <= 0 || before.State != "ready" {
				t.Fatalf("before the upgrade the server is %+v", before)
			}
			if before.Sandbox != level {
				t.Errorf("the server runs in sandbox %q, want %q", before.Sandbox, level)
			}
			if p, err := proc.ReadProcess(before.PID); err == nil {
				t.Logf("the server's pid %d (parent %d) under %q", before.PID, p.PPID, level)
			}

			d.upgrade(t)
			if !waitGone(d.cmd.Process.Pid, answerWithin) {
				t.Fatalf("the old daemon (pid %d) did not exit after the upgrade", d.cmd.Process.Pid)
			}
			if got := resultText(c.call(t, "read_graph", nil)); got != graph {
				t.Errorf("read_graph after the upgrade:\n%s\nwant the graph from before:\n%s", got, graph)
			}
			after := memoryRow(t, d.statusJSON(t))
			if after.PID != before.PID || after.Restarts != 0 || after.State != "ready" || after.Sandbox != before.Sandbox {
				t.Errorf("after the upgrade the server is pid %d, %d restarts, %s, sandbox %q; want pid %d, none, ready, %q",
					after.PID, after.Restarts, after.State, after.Sandbox, before.PID, before.Sandbox)
			}
			// It goes on working, and survives the next upgrade too (the
			// adopted process is handed over again).
			c.call(t, "add_observations", map[string]any{"observations": []map[string]any{{"entityName": "Ada", "contents": []string{"survived an upgrade"}}}})
			first := d.successor
			d.upgrade(t)
			if !waitGone(first, answerWithin) {
				t.Fatalf("the first successor (pid %d) did not exit after the second upgrade", first)
			}
			if got := resultText(c.call(t, "read_graph", nil)); !strings.Contains(got, "survived an upgrade") {
				t.Errorf("read_graph after the second upgrade: %s", got)
			}
			if again := memoryRow(t, d.statusJSON(t)); again.PID != before.PID || again.Restarts != 0 {
				t.Errorf("after the second upgrade the server is pid %d with %d restarts; want %d, none", again.PID, again.Restarts, before.PID)
			}
			// It ends with the daemon that adopted it.
			_ = c.cs.Close()
			d.stopSuccessor(t)
			if !waitGone(before.PID, answerWithin) {
				t.Errorf("the adopted server (pid %d) outlived the daemon that adopted it", before.PID)
			}
			if _, err := os.Stat(memoryFile); err != nil {
				t.Errorf("the memory file: %v", err)
			}
		})
	}
}

func memoryRow(t *testing.T, st *control.Status) control.Upstream {
	t.Helper()
	for _, u := range st.Upstreams {
		if u.Name == "memory" {
			return u
		}
	}
	t.Fatalf("status has no memory upstream: %+v", st.Upstreams)
	return control.Upstream{}
}

// The new daemon reads the configuration afresh: a server whose entry is
// the same is adopted (same pid), one whose entry changed is stopped and
// started anew (eager: at once), one the configuration no longer has is
// stopped; nothing is left running, nothing is killed as an orphan.
func TestUpgradeServersByConfig(t *testing.T) {
	fake := fakeUpstream(t)
	entry := func(name string, args ...string) string {
		q := make([]string, len(args))
		for i, a := range args {
			q[i] = fmt.Sprintf("%q", a)
		}
		return fmt.Sprintf("[mcpServers.%s]\ncommand = %q\nargs = [%s]\nstart = \"eager\"\n", name, fake, strings.Join(q, ", "))
	}
	d := startDaemon(t, entry("same")+entry("changed")+entry("gone"), nil)
	before := d.awaitStatus(t, "three upstreams ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 3 && st.Upstreams[0].State == "ready" && st.Upstreams[1].State == "ready" && st.Upstreams[2].State == "ready"
	})
	pids, tools := map[string]int{}, map[string]int{}
	for _, u := range before.Upstreams {
		pids[u.Name], tools[u.Name] = u.PID, u.Tools
	}
	d.writeConfig(t, entry("same")+entry("changed", "-tools", "3"))
	pid := d.upgrade(t)
	after := d.awaitStatus(t, "the new daemon's upstreams ready", answerWithin, func(st *control.Status) bool {
		return st.PID == pid && len(st.Upstreams) == 2 && st.Upstreams[0].State == "ready" && st.Upstreams[1].State == "ready"
	})
	for _, u := range after.Upstreams {
		switch u.Name {
		case "same":
			if u.PID != pids["same"] || u.Restarts != 0 {
				t.Errorf("the unchanged server is pid %d (%d restarts) after the upgrade, want %d, none", u.PID, u.Restarts, pids["same"])
			}
		case "changed":
			if u.PID == pids["changed"] || u.Tools != tools["changed"]+3 {
				t.Errorf("the changed server is pid %d with %d tools after the upgrade; want a new process (not %d) with its new arguments", u.PID, u.Tools, pids["changed"])
			}
		default:
			t.Errorf("after the upgrade an upstream %q", u.Name)
		}
	}
	for _, name := range []string{"changed", "gone"} {
		if !waitGone(pids[name], answerWithin) {
			t.Errorf("the %s server's old process %d still runs after the upgrade", name, pids[name])
		}
	}
	if strings.Contains(d.stderr.String(), "killed upstream processes a previous daemon left running") {
		t.Errorf("the new daemon killed upstream processes as orphans:\n%s", d.stderr.String())
	}
	d.stopSuccessor(t)
	if !waitGone(pids["same"], answerWithin) {
		t.Errorf("the adopted server %d outlived the daemon that adopted it", pids["same"])
	}
}

// The price of a server that can outlive its daemon: a daemon killed with
// SIGKILL no longer takes its servers along (no parent-death signal). One
// that heeds the end of its stdin exits (TestUpstreamOrphansAfterKill9);
// one that ignores it runs until the next daemon, which finds its group in
// the dead daemon's record and kills it.
func TestKeptServerAfterKill9(t *testing.T) {
	fake := fakeUpstream(t)
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := startDaemonIn(t, dir, fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nargs = [\"-ignore-eof\"]\nstart = \"eager\"\n", fake), nil)
	st := d.awaitStatus(t, "the upstream ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready"
	})
	server := st.Upstreams[0].PID
	t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGKILL) })
	d.signal(t, syscall.SIGKILL)
	d.waitExit(t, answerWithin)
	if !proctest.Alive(server) {
		t.Fatalf("the server %d died with its daemon: it was started with a parent-death signal, and no upgrade could hand it over", server)
	}
	startDaemonIn(t, dir, "# no upstreams\n", nil)
	if !waitGone(server, answerWithin) {
		t.Errorf("the server %d of the daemon killed with SIGKILL still runs after the next daemon started", server)
	}
}
