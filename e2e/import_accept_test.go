package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
)

// TestImportAcceptance: a person's Claude Desktop, Claude Code, Cursor and
// VS Code files, each with local and remote servers (npm servers over
// stdio, url entries of type http and sse with headers, an npx mcp-remote
// URL --header K:V entry), go through snodod import --write and config
// check; the daemon reloads them; and every server in them answers
// through snodod connect NAME, the remote ones served by the test on
// loopback (server-everything in its streamableHttp and sse modes, the
// official Go SDK's server in internal/fakeremote, which answers the
// X-Test header it got). Each client's file then runs snodod connect for
// each of its servers, and no secret of theirs is printed.
func TestImportAcceptance(t *testing.T) {
	everything, memory, filesystem := npmServer(t, "server-everything"), npmServer(t, "server-memory"), npmServer(t, "server-filesystem")
	everythingHTTP, everythingSSE := startEverythingHTTP(t, "streamableHttp"), startEverythingHTTP(t, "sse")
	bridged, cursorRemote, vscodeRemote := startFakeRemote(t, "-name", "bridged"), startFakeRemote(t, "-name", "cursor-remote"), startFakeRemote(t, "-name", "vscode-remote")
	vscodeSSE := startFakeRemote(t, "-mode", "sse", "-name", "vscode-sse")
	d := startDaemon(t, "", nil)
	work := t.TempDir()
	files := filepath.Join(work, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	const secret = "Bearer vscode_0123456789abcdefghijklmnop"
	clients := []struct {
		name, file, content string
		servers             []string
		vscode              bool
	}{
		{"Claude Desktop", "claude_desktop_config.json", `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "desk-memory": {"command": "node", "args": [` + q(memory) + `], "env": {"MEMORY_FILE_PATH": ` + q(filepath.Join(work, "memory.json")) + `}},
    "desk-bridged": {"command": "npx", "args": ["-y", "mcp-remote", ` + q(bridged) + `, "--header", "X-Test:from-the-bridge", "--allow-http"]}
  }
}`, []string{"desk-memory", "desk-bridged"}, false},
		{"Claude Code", ".mcp.json", `{
  "mcpServers": {
    "code-everything": {"type": "stdio", "command": "node", "args": [` + q(everything) + `, "stdio"]},
    "code-http": {"type": "http", "url": ` + q(everythingHTTP) + `, "headers": {"X-Client": "claude-code"}},
    "code-sse": {"type": "sse", "url": ` + q(everythingSSE) + `}
  }
}`, []string{"code-everything", "code-http", "code-sse"}, false},
		{"Cursor", "mcp.json", `{
  "mcpServers": {
    "cursor-fs": {"command": "node", "args": [` + q(filesystem) + `, ` + q(files) + `]},
    "cursor-remote": {"url": ` + q(cursorRemote) + `, "headers": {"X-Test": "from cursor"}}
  }
}`, []string{"cursor-fs", "cursor-remote"}, false},
		{"VS Code", "mcp.json", `{
  // VS Code's own file: comments and trailing commas
  "servers": {
    "vs-memory": {"type": "stdio", "command": "node", "args": [` + q(memory) + `], "env": {"MEMORY_FILE_PATH": ` + q(filepath.Join(work, "vs-memory.json")) + `},},
    /* remote ones */
    "vs-remote": {"type": "http", "url": ` + q(vscodeRemote) + `, "headers": {"X-Test": "from vscode", "Authorization": ` + q(secret) + `}},
    "vs-sse": {"type": "sse", "url": ` + q(vscodeSSE) + `},
  },
}`, []string{"vs-memory", "vs-remote", "vs-sse"}, true},
	}
	var names []string
	for _, c := range clients {
		dir := filepath.Join(work, strings.ReplaceAll(c.name, " ", "-"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, c.file)
		if err := os.WriteFile(file, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := d.command("import", "--write", "--secrets", filepath.Join(work, "secrets"), file).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: snodod import --write: %v\n%s", c.name, err, out)
		}
		if strings.Contains(string(out), secret) {
			t.Errorf("%s: snodod import printed a secret:\n%s", c.name, out)
		}
		// The client's file now runs snodod connect NAME for each of
		// its servers, by this snodod's absolute path.
		cf, err := config.ReadClientFile(file)
		if err != nil || len(cf.Entries) != len(c.servers) || cf.VSCode() != c.vscode {
			t.Fatalf("%s: the rewritten file: %v %+v", c.name, err, cf)
		}
		rewritten := map[string]struct {
			Type    string   `json:"type"`
			Command string   `json:"command"`
			Args    []string `json:"args"`
		}{}
		b, _ := json.Marshal(cf.Entries)
		if err := json.Unmarshal(b, &rewritten); err != nil {
			t.Fatalf("%s: the rewritten entries: %v\n%s", c.name, err, b)
		}
		for _, name := range c.servers {
			e := rewritten[name]
			if e.Command != binary || !slices.Equal(e.Args, []string{"connect", name}) || (c.vscode && e.Type != "stdio") {
				t.Errorf("%s: %s in the rewritten file: %+v", c.name, name, e)
			}
		}
		if _, err := os.Stat(file + ".snodod-backup"); err != nil {
			t.Errorf("%s: no backup: %v", c.name, err)
		}
		names = append(names, c.servers...)
	}
	// The secret-looking header is in a file of its own, mode 0600.
	kept := false
	secretFiles, _ := filepath.Glob(filepath.Join(work, "secrets", "*"))
	for _, f := range secretFiles {
		b, _ := os.ReadFile(f)
		fi, _ := os.Stat(f)
		kept = kept || (strings.TrimSpace(string(b)) == secret && fi.Mode().Perm() == 0o600)
	}
	if !kept {
		t.Errorf("the secret header is in no secret file of mode 0600: %v", secretFiles)
	}
	if out, err := d.command("config", "check").CombinedOutput(); err != nil {
		t.Fatalf("config check: %v\n%s", err, out)
	}
	printed, err := d.command("config", "print").Output()
	if err != nil || strings.Contains(string(printed), secret) || strings.Contains(string(printed), "mcp-remote") {
		t.Errorf("config print (%v):\n%s", err, printed)
	}
	d.signal(t, syscall.SIGHUP)
	d.awaitStatus(t, "the imported servers", answerWithin, func(st *control.Status) bool {
		seen := map[string]bool{}
		for _, u := range st.Upstreams {
			seen[u.Name] = true
		}
		for _, n := range names {
			if !seen[n] {
				return false
			}
		}
		return true
	})

	// What each remote server got as X-Test says its headers came along;
	// "" for a server that has no such tool.
	headers := map[string]string{"desk-bridged": "from-the-bridge", "cursor-remote": "from cursor", "vs-remote": "from vscode"}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			client := mcp.NewClient(&mcp.Implementation{Name: "e2e-import", Version: "1"}, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 2*answerWithin)
			defer cancel()
			cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: d.command("connect", name)}, nil)
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			res, err := cs.ListTools(ctx, nil)
			if err != nil || len(res.Tools) == 0 {
				t.Fatalf("tools/list: %v %+v", err, res)
			}
			if want, ok := headers[name]; ok {
				got, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "headerecho"})
				if err != nil || got.IsError || resultText(got) != want {
					t.Errorf("headerecho: %v %s, want %q", err, fmt.Sprint(got), want)
				}
			}
			if strings.HasPrefix(name, "code-") { // server-everything
				got, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "imported"}})
				if err != nil || got.IsError || !strings.Contains(resultText(got), "imported") {
					t.Errorf("echo: %v %s", err, fmt.Sprint(got))
				}
			}
		})
	}
}
