//lint:file-ignore SA1019 server-everything relays the sampling the SDK deprecates (SEP-2577).

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/internal/eventually"
)

// The reference servers from npm (pinned in e2e/node/package.json,
// installed by npm ci --prefix e2e/node) hosted by one daemon, behind
// snodod connect (aggregated) and snodod connect NAME (pass-through), with
// the official Go SDK client here and the TypeScript one in
// e2e/node/upstream.mjs.

// npmServer returns the entry point of a reference server, skipping the
// test (failing it under CI) when the packages are not installed.
func npmServer(t *testing.T, pkg string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("node", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err == nil {
		_, err = os.Stat(dir)
	}
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		msg := "the npm servers need node and their packages; run: npm ci --prefix e2e/node (" + err.Error() + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dir
}

// npmDaemon is a daemon hosting everything, memory (shared), mem-session
// (one per session, its file in the client's directory) and fs, each in
// the standard sandbox (docs/security.md, "Sandbox"): memory is given the
// directory of its file (an environment variable names it, which the
// sandbox does not guess from), fs sees its argument's directory,
// mem-session its client's directory (its root).
type npmDaemon struct {
	*daemonProc
	files string // the directory fs serves
}

func startNPMDaemon(t *testing.T) *npmDaemon {
	t.Helper()
	everything, memory, fsServer := npmServer(t, "server-everything"), npmServer(t, "server-memory"), npmServer(t, "server-filesystem")
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "a.txt"), []byte("hello from a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	config := fmt.Sprintf(`
[sandbox]
level = "standard"
required = true

[mcpServers.everything]
command = "node"
args = [%q]

[mcpServers.memory]
command = "node"
args = [%q]
env = { MEMORY_FILE_PATH = %q }
sandbox = { paths = [%q] }

[mcpServers.mem-session]
command = "node"
args = [%q]
share = "session"
env = { MEMORY_FILE_PATH = "${client.cwd}/memory.jsonl" }

[mcpServers.fs]
command = "node"
args = [%q, %q]
`, everything, memory, memoryFile, filepath.Dir(memoryFile), memory, fsServer, files)
	d := &npmDaemon{daemonProc: startDaemon(t, config, nil, "--http", "127.0.0.1:0"), files: files}
	t.Cleanup(func() {
		select {
		case <-d.exited:
			return
		default:
		}
		pid := d.cmd.Process.Pid
		d.stop(t)
		if left := children(t, pid); len(left) > 0 {
			t.Errorf("node processes left after the daemon stopped: %v", left)
		}
	})
	return d
}

// client connects the Go SDK client through snodod connect [view] at
// version, working in dir ("": the test's), with handlers for sampling,
// elicitation, progress and resource updates.
type npmClient struct {
	cs       *mcp.ClientSession
	mu       sync.Mutex
	progress int
	updates  []string
	asked    []string
}

func (d *npmDaemon) connect(t *testing.T, view, version, dir string) *npmClient {
	t.Helper()
	args := []string{"connect"}
	if view != "" {
		args = append(args, view)
	}
	cmd := d.command(args...)
	cmd.Dir = dir
	return connectNPM(t, version, &mcp.CommandTransport{Command: cmd}, "connect "+view)
}

// connectHTTP connects the Go SDK's streamable client to the daemon's HTTP
// endpoint: the aggregated view, or with a view its pass-through path
// (http.path + "/NAME").
func (d *npmDaemon) connectHTTP(t *testing.T, view, version string) *npmClient {
	t.Helper()
	st := d.statusJSON(t)
	if st.HTTP == nil {
		t.Fatal("snodod status shows no HTTP listener")
	}
	url := "http://" + st.HTTP.Listen + st.HTTP.Path
	if view != "" {
		url += "/" + view
	}
	return connectNPM(t, version, &mcp.StreamableClientTransport{Endpoint: url}, url)
}

// connectNPM connects the Go SDK client over transport at version, with
// the handlers npmClient records.
func connectNPM(t *testing.T, version string, transport mcp.Transport, what string) *npmClient {
	t.Helper()
	c := &npmClient{}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-go", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			c.mu.Lock()
			c.asked = append(c.asked, "sampling")
			c.mu.Unlock()
			return &mcp.CreateMessageResult{Role: "assistant", Model: "e2e-model", Content: &mcp.TextContent{Text: "sampled by the Go client"}}, nil
		},
		// server-everything's form has enums a generic filler cannot
		// know: the answer declines, which the server reports as such.
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.mu.Lock()
			c.asked = append(c.asked, "elicitation")
			c.mu.Unlock()
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress++
			c.mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.mu.Lock()
			c.updates = append(c.updates, req.Params.URI)
			c.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*answerWithin)
	defer cancel()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s at %s: %v", what, version, err)
	}
	c.cs = cs
	t.Cleanup(func() { _ = cs.Close() })
	return c
}

func (c *npmClient) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*answerWithin)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: isError %s", name, resultText(res))
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.StructuredContent != nil {
		j, _ := json.Marshal(res.StructuredContent)
		b.Write(j)
	}
	return b.String()
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tool.Name)
	}
	return out
}

func TestUpstreamNPMServers(t *testing.T) {
	d := startNPMDaemon(t)
	for _, version := range []string{"2025-11-25", "2025-06-18"} {
		t.Run("everything passed through at "+version, func(t *testing.T) { everythingPassThrough(t, d.connect(t, "everything", version, "")) })
		t.Run("everything passed through over HTTP at "+version, func(t *testing.T) { everythingPassThrough(t, d.connectHTTP(t, "everything", version)) })
	}
	t.Run("everything at 2026-07-28, sampling parked", func(t *testing.T) {
		c := d.connect(t, "everything", v2026, "")
		if got := resultText(c.call(t, "echo", map[string]any{"message": "hi"})); !strings.Contains(got, "hi") {
			t.Errorf("echo %q", got)
		}
		res := c.call(t, "trigger-sampling-request", map[string]any{"prompt": "say something", "maxTokens": 10})
		if got := resultText(res); !strings.Contains(got, "sampled by the Go client") {
			t.Errorf("parked sampling: %q", got)
		}
	})
	t.Run("over HTTP at 2026-07-28", func(t *testing.T) {
		for _, view := range []string{"everything", ""} {
			c := d.connectHTTP(t, view, v2026)
			name := "echo"
			if view == "" {
				name = "everything__echo"
			}
			if got := resultText(c.call(t, name, map[string]any{"message": "stateless"})); !strings.Contains(got, "stateless") {
				t.Errorf("%s over HTTP: %q", name, got)
			}
		}
	})
	t.Run("aggregated", func(t *testing.T) {
		c := d.connect(t, "", "2025-11-25", "")
		tools := toolNames(t, c.cs)
		for _, want := range []string{"status", "everything__echo", "memory__read_graph", "fs__read_text_file"} {
			if !slices.Contains(tools, want) {
				t.Errorf("tools lack %s: %v", want, tools)
			}
		}
		if got := resultText(c.call(t, "everything__echo", map[string]any{"message": "aggregated"})); !strings.Contains(got, "aggregated") {
			t.Errorf("echo %q", got)
		}
		got := resultText(c.call(t, "fs__read_text_file", map[string]any{"path": filepath.Join(d.files, "a.txt")}))
		if !strings.Contains(got, "hello from a file") {
			t.Errorf("read_text_file %q", got)
		}
		sandboxedView(t, d)
		res := c.call(t, "everything__trigger-elicitation-request", nil)
		if c.mu.Lock(); !slices.Contains(c.asked, "elicitation") {
			t.Errorf("the elicitation did not reach the client: %s", resultText(res))
		}
		c.mu.Unlock()
	})
	t.Run("memory shared by share all, separate by share session", func(t *testing.T) {
		a, b := d.connect(t, "memory", "2025-11-25", ""), d.connect(t, "memory", "2025-06-18", "")
		a.call(t, "create_entities", map[string]any{"entities": []map[string]any{{"name": "Alice", "entityType": "person", "observations": []string{"likes Go"}}}})
		if got := resultText(b.call(t, "read_graph", nil)); !strings.Contains(got, "Alice") {
			t.Errorf("share = all: the second client does not see the first one's entity: %s", got)
		}
		dirC, dirD := t.TempDir(), t.TempDir()
		c, e := d.connect(t, "mem-session", "2025-11-25", dirC), d.connect(t, "mem-session", "2025-11-25", dirD)
		c.call(t, "create_entities", map[string]any{"entities": []map[string]any{{"name": "Bob", "entityType": "person", "observations": []string{}}}})
		if got := resultText(e.call(t, "read_graph", nil)); strings.Contains(got, "Bob") {
			t.Errorf("share = session: another session sees Bob: %s", got)
		}
		if got := resultText(c.call(t, "read_graph", nil)); !strings.Contains(got, "Bob") {
			t.Errorf("share = session: Bob's own session lost him: %s", got)
		}
		st := d.statusJSON(t)
		n := 0
		for _, r := range st.Upstreams {
			if r.Name == "mem-session" && r.PID != 0 {
				n++
			}
		}
		if n != 2 {
			t.Errorf("mem-session instances %d, want one per session: %+v", n, st.Upstreams)
		}
	})
	t.Run("twenty clients, one process", func(t *testing.T) {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				c := d.connect(t, "everything", "2025-11-25", "")
				want := fmt.Sprintf("client %d", i)
				if got := resultText(c.call(t, "echo", map[string]any{"message": want})); !strings.Contains(got, want) {
					t.Errorf("client %d got %q", i, got)
				}
			})
		}
		wg.Wait()
		everything := 0
		for _, pid := range children(t, d.cmd.Process.Pid) {
			// A sandboxed server is the child of its launcher, the
			// daemon's child.
			for _, p := range append([]int{pid}, children(t, pid)...) {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
				if strings.Contains(string(cmdline), "server-everything") {
					everything++
				}
			}
		}
		if everything != 1 {
			t.Errorf("%d server-everything processes for 20 clients, want 1", everything)
		}
	})
	st := d.statusJSON(t)
	httpURL := "http://" + st.HTTP.Listen + st.HTTP.Path + "/everything"
	for _, tc := range []struct{ name, flag, arg string }{
		{"TypeScript SDK client", binary, "everything"},
		{"TypeScript SDK client over HTTP", "--http", httpURL},
	} {
		t.Run(tc.name, func(t *testing.T) { typeScriptEverything(t, d, tc.flag, tc.arg) })
	}
	if st = d.statusJSON(t); len(st.Upstreams) < 4 {
		t.Errorf("status rows %+v", st.Upstreams)
	}
}

// typeScriptEverything runs e2e/node/upstream.mjs with its two arguments
// (the binary and a view, or --http and a URL) and checks its summary.
func typeScriptEverything(t *testing.T, d *npmDaemon, first, second string) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*answerWithin)
	defer cancel()
	dir, _ := filepath.Abs("node")
	cmd := exec.CommandContext(ctx, "node", "upstream.mjs", first, second)
	cmd.Dir, cmd.Env = dir, d.env
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node upstream.mjs: %v\n%s", err, stderr)
	}
	var got struct {
		Server      string
		Tools       []string
		Echo        string
		Sampling    string
		Elicitation string
		Progress    int
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !slices.Contains(got.Tools, "echo") || !strings.Contains(got.Echo, "from TypeScript") ||
		!strings.Contains(got.Sampling, "sampled by the TypeScript client") || !strings.Contains(strings.ToLower(got.Elicitation), "decline") || got.Progress == 0 {
		t.Errorf("the TypeScript client saw %+v", got)
	}
}

// everythingPassThrough exercises server-everything through snodod connect
// everything: lists, calls, reads, prompts, progress, subscriptions,
// sampling and elicitation.
func everythingPassThrough(t *testing.T, c *npmClient) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*answerWithin)
	defer cancel()
	tools := toolNames(t, c.cs)
	for _, want := range []string{"echo", "get-sum", "trigger-sampling-request", "trigger-long-running-operation"} {
		if !slices.Contains(tools, want) {
			t.Errorf("tools lack %s: %v", want, tools)
		}
	}
	if got := resultText(c.call(t, "echo", map[string]any{"message": "hello"})); !strings.Contains(got, "hello") {
		t.Errorf("echo %q", got)
	}
	if got := resultText(c.call(t, "get-sum", map[string]any{"a": 2, "b": 3})); !strings.Contains(got, "5") {
		t.Errorf("get-sum %q", got)
	}
	var first *mcp.Resource
	for r, err := range c.cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = r
		}
	}
	if first == nil {
		t.Fatal("no resources listed")
	}
	if rr, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: first.URI}); err != nil || len(rr.Contents) == 0 {
		t.Errorf("read %s: %v %+v", first.URI, err, rr)
	}
	if p, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "simple-prompt"}); err != nil || len(p.Messages) == 0 {
		t.Errorf("simple-prompt: %v %+v", err, p)
	}
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
	params.SetProgressToken("op-1")
	if res, err := c.cs.CallTool(ctx, params); err != nil || res.IsError {
		t.Fatalf("long operation: %v %+v", err, res)
	}
	if c.mu.Lock(); c.progress == 0 {
		t.Error("no progress relayed")
	}
	c.mu.Unlock()
	if got := resultText(c.call(t, "trigger-sampling-request", map[string]any{"prompt": "say something", "maxTokens": 10})); !strings.Contains(got, "sampled by the Go client") {
		t.Errorf("sampling %q", got)
	}
	if got := resultText(c.call(t, "trigger-elicitation-request", nil)); !strings.Contains(strings.ToLower(got), "decline") {
		t.Errorf("elicitation %q", got)
	}
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: first.URI}); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	c.call(t, "toggle-subscriber-updates", nil)
	if !eventually.Within(answerWithin, func() bool { c.mu.Lock(); defer c.mu.Unlock(); return slices.Contains(c.updates, first.URI) }) {
		t.Errorf("no resources/updated for %s", first.URI)
	}
	c.call(t, "toggle-subscriber-updates", nil)
}

// sandboxedView checks what server-filesystem's process sees, through
// /proc/PID/root (its mount namespace's root, as it sees it): its root
// (the directory it serves) and nothing of the user's or the daemon's:
// not the home, not the state directory's files, not the test's other
// directories.
func sandboxedView(t *testing.T, d *npmDaemon) {
	t.Helper()
	pid := 0
	for _, c := range children(t, d.cmd.Process.Pid) {
		for _, p := range append([]int{c}, children(t, c)...) {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			if strings.Contains(string(cmdline), "server-filesystem") {
				pid = p
			}
		}
	}
	if pid == 0 {
		t.Fatal("no server-filesystem process")
	}
	root := fmt.Sprintf("/proc/%d/root", pid)
	if b, err := os.ReadFile(root + filepath.Join(d.files, "a.txt")); err != nil || string(b) != "hello from a file" {
		t.Errorf("fs does not see its root's file: %q, %v", b, err)
	}
	home, _ := os.UserHomeDir()
	for _, hidden := range []string{home, filepath.Join(d.dir, "config"), filepath.Join(d.dir, "daemon.log"), d.socket} {
		if _, err := os.Stat(root + hidden); err == nil && hidden != "/" {
			if entries, _ := os.ReadDir(root + hidden); len(entries) > 0 {
				t.Errorf("fs sees %s (%d entries)", hidden, len(entries))
			}
		}
	}
	// Of the state directory, only the way to its own private home.
	state := filepath.Join(d.dir, "state", "snodod")
	for dir, want := range map[string]string{state: "sandbox", filepath.Join(state, "sandbox"): "mcpServers.fs"} {
		entries, _ := os.ReadDir(root + dir)
		if len(entries) != 1 || entries[0].Name() != want {
			t.Errorf("fs sees in %s: %v, want only %s", dir, entries, want)
		}
	}
	if entries, _ := os.ReadDir(state); len(entries) < 2 {
		t.Errorf("the state directory holds %v: the test shows nothing", entries)
	}
}
