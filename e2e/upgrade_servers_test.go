package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/proc"
)

// Hosted servers survive `snodod upgrade` (issue 24): a server-memory
// graph built before the upgrade, through a Go SDK client whose session
// is handed over too, reads the same after it, served by the same process
// (snodod status --json: the same pid, no restart counted, the same
// sandbox level), never initialized twice (the client's own session did
// not initialize again either: the SDK would fail). Under "standard" the
// pid is the sandbox launcher's, the server's init in its PID namespace;
// "off" runs node itself.
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
			// It goes on working, and ends with the daemon that adopted it.
			c.call(t, "add_observations", map[string]any{"observations": []map[string]any{{"entityName": "Ada", "contents": []string{"survived an upgrade"}}}})
			if got := resultText(c.call(t, "read_graph", nil)); !strings.Contains(got, "survived an upgrade") {
				t.Errorf("read_graph after add_observations: %s", got)
			}
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
