package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

// budgetServers hosts server-everything, server-filesystem and
// server-memory, started at once; with the daemon's demo (serve --demo)
// they are the four of docs/bench.md's "Tool budget".
func budgetServers(t *testing.T, files string) string {
	everything, memory, fsServer := npmServer(t, "server-everything"), npmServer(t, "server-memory"), npmServer(t, "server-filesystem")
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	return fmt.Sprintf(`
[mcpServers.everything]
command = "node"
args = [%q]
start = "eager"

[mcpServers.memory]
command = "node"
args = [%q]
env = { MEMORY_FILE_PATH = %q }
sandbox = { paths = [%q] }
start = "eager"

[mcpServers.fs]
command = "node"
args = [%q, %q]
start = "eager"
`, everything, memory, memoryFile, filepath.Dir(memoryFile), fsServer, files)
}

// listedTools is one tools/list of s: the names and the result's bytes.
func listedTools(t *testing.T, s *sessionConn, id int) ([]string, int) {
	t.Helper()
	if err := s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, id)); err != nil {
		t.Fatal(err)
	}
	r, err := s.answer(fmt.Sprint(id), answerWithin)
	if err != nil || r.Error != nil {
		t.Fatalf("tools/list: %v %+v", err, r.Error)
	}
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(r.Result, &res); err != nil || res.NextCursor != "" {
		t.Fatalf("tools/list result %.200s: %v (a second page)", r.Result, err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names, len(r.Result)
}

// TestBudgetNPM is the aggregated view of the real servers with and
// without a budget of 20: the list fits, search_tools finds a tool of
// each server, call_tool reads a file, and the bytes of both lists are
// logged (docs/bench.md, "Tool budget").
func TestBudgetNPM(t *testing.T) {
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "notes.txt"), []byte("budgeted hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := budgetServers(t, files)
	listed := func(st *control.Status) bool {
		n := 0
		for _, u := range st.Upstreams {
			if u.Tools > 0 {
				n++
			}
		}
		return n == 3
	}
	var full, budgeted []string
	var fullBytes, budgetedBytes int
	for _, budget := range []string{"", "[upstreams]\nmax_tools = 20\n"} {
		d := startDaemon(t, budget+servers, nil)
		d.awaitStatus(t, "the three servers listed", answerWithin, listed)
		s := mustDial(t, d.socket)
		if err := s.initialize("2025-11-25"); err != nil {
			t.Fatal(err)
		}
		if budget == "" {
			// The status counts a server's tools a moment before the
			// view lists them.
			eventually.True(t, "every server listed", func() bool {
				names, _ := listedTools(t, s, 1)
				return slices.Contains(names, "fs__read_text_file") && slices.Contains(names, "memory__read_graph") && slices.Contains(names, "everything__get-sum")
			})
			full, fullBytes = listedTools(t, s, 2)
			continue
		}
		id := 10
		for _, c := range []struct{ query, want string }{
			{"read the complete contents of a text file", "fs__read_text_file"},
			{"read the entire knowledge graph", "memory__read_graph"},
			{"returns the sum of two numbers", "everything__get-sum"},
		} {
			var text string
			if !eventually.Within(answerWithin, func() bool {
				id++
				if err := s.send(callLine(id, "search_tools", fmt.Sprintf(`{"query":%q,"limit":3}`, c.query))); err != nil {
					t.Fatal(err)
				}
				r, err := s.answer(fmt.Sprint(id), answerWithin)
				if err != nil {
					t.Fatal(err)
				}
				text, _ = toolText(r)
				return strings.Contains(text, `"name":"`+c.want+`"`)
			}) {
				t.Errorf("search_tools %q: want %s in %s", c.query, c.want, text)
			}
		}
		budgeted, budgetedBytes = listedTools(t, s, 3)
		if err := s.send(callLine(20, "call_tool", fmt.Sprintf(`{"name":"fs__read_text_file","arguments":{"path":%q}}`, filepath.Join(files, "notes.txt")))); err != nil {
			t.Fatal(err)
		}
		r, err := s.answer("20", answerWithin)
		if text, terr := toolText(r); err != nil || terr != nil || text != "budgeted hello" {
			t.Errorf("call_tool fs__read_text_file: %v %v %q", err, terr, text)
		}
	}
	if len(full) < 70 || slices.Contains(full, "search_tools") {
		t.Errorf("without a budget: %d tools (search_tools among them: %v), want every one and not the budget's", len(full), slices.Contains(full, "search_tools"))
	}
	if len(budgeted) > 20 || !slices.Contains(budgeted, "search_tools") || !slices.Contains(budgeted, "call_tool") {
		t.Errorf("with a budget of 20: %d tools %v", len(budgeted), budgeted)
	}
	t.Logf("listed with the budget: %v", budgeted)
	t.Logf("tools/list of the aggregated view: %d tools, %d bytes (~%d tokens at 4 bytes a token); with max_tools = 20: %d tools, %d bytes (~%d tokens)",
		len(full), fullBytes, fullBytes/4, len(budgeted), budgetedBytes, budgetedBytes/4)
}

// TestBudgetTypeScript is the budget in snodod stdio (the aggregated view
// of the demo and server-memory, max_tools = 10) with the TypeScript SDK's
// client: the list fits, search_tools finds memory's tool, call_tool calls
// it, calls the demo's own test_tool_with_progress (left out of the list)
// with its progress relayed, and sleep with a cancel that ends the call
// while the session goes on.
func TestBudgetTypeScript(t *testing.T) {
	node, dir := nodeClient(t)
	memory := npmServer(t, "server-memory")
	home := t.TempDir()
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	config := fmt.Sprintf(`
[upstreams]
max_tools = 10

[mcpServers.memory]
command = "node"
args = [%q]
env = { MEMORY_FILE_PATH = %q }
sandbox = { paths = [%q] }
`, memory, memoryFile, filepath.Dir(memoryFile))
	if err := os.MkdirAll(filepath.Join(home, "config", "snodod"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config", "snodod", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "budget.mjs", binary)
	cmd.Dir = dir
	cmd.Env = isolatedEnv(home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node budget.mjs: %v\n%s", err, stderr.String())
	}
	var s struct {
		Errors     map[string]string
		Listed     []string
		Found      []string
		Graph      string
		Progressed bool
		Progress   int
		Cancelled  string
		After      string
		Stderr     string
	}
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("summary %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	for step, err := range s.Errors {
		t.Errorf("step %s failed: %s", step, err)
	}
	if len(s.Listed) > 10 || !slices.Contains(s.Listed, "search_tools") || !slices.Contains(s.Listed, "call_tool") || slices.Contains(s.Listed, "test_tool_with_progress") {
		t.Errorf("listed %d: %v, want at most 10 with search_tools and call_tool, not test_tool_with_progress", len(s.Listed), s.Listed)
	}
	if !slices.Contains(s.Found, "memory__read_graph") {
		t.Errorf("search_tools found %v", s.Found)
	}
	if !strings.Contains(s.Graph, "entities") {
		t.Errorf("call_tool memory__read_graph: %q", s.Graph)
	}
	if !s.Progressed || s.Progress == 0 {
		t.Errorf("call_tool test_tool_with_progress: answered %v with %d progress reports", s.Progressed, s.Progress)
	}
	if s.Cancelled != "aborted" || s.After != "still here" {
		t.Errorf("cancelled call_tool: %q, then %q", s.Cancelled, s.After)
	}
	if strings.Contains(s.Stderr, "level=ERROR") {
		t.Errorf("snodod stdio logged an error:\n%s", s.Stderr)
	}
}
