package mcpclient

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/proc/proctest"
)

// Real servers from npm: legacy-era TypeScript servers, so the probe must
// fall back to initialize quickly (they answer server/discover with
// -32601). Opt-in, as they need the npm registry: SNODOD_NPM_TESTS=1.
// (The e2e tests pin the same servers in e2e/node/package.json.)
var npmServers = []string{
	"@modelcontextprotocol/server-everything@2026.8.31",
	"@modelcontextprotocol/server-memory@2026.8.31",
}

func npmInstall(t *testing.T) string {
	t.Helper()
	if os.Getenv("SNODOD_NPM_TESTS") != "1" {
		t.Skip("real npm servers are tested only with SNODOD_NPM_TESTS=1 (they are installed from the npm registry)")
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found: install Node.js and npm to run the real-server tests")
	}
	dir := t.TempDir()
	cmd := exec.Command(npm, append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund"}, npmServers...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	}
	return dir
}

func TestNpmServers(t *testing.T) {
	dir := npmInstall(t)
	path := os.Getenv("PATH")
	tests := []struct {
		bin   string
		name  string // serverInfo.name
		tool  string // a tool it lists
		args  []string
		call  string
		check string
	}{
		{"mcp-server-everything", "mcp-servers/everything", "echo", []string{"stdio"},
			`{"name":"echo","arguments":{"message":"hi from snodod"}}`, "hi from snodod"},
		{"mcp-server-memory", "memory-server", "read_graph", nil,
			`{"name":"read_graph","arguments":{}}`, "entities"},
	}
	for _, tt := range tests {
		t.Run(tt.bin, func(t *testing.T) {
			proctest.Cleanup(t)
			cmd := Command{
				Path: filepath.Join(dir, "node_modules", ".bin", tt.bin),
				Args: tt.args,
				Env:  []string{"PATH=" + path, "HOME=" + t.TempDir(), "MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl")},
				Dir:  t.TempDir(),
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			// The probe must fall back on the server's answer to
			// server/discover, never wait for its timeout: with an hour's
			// timeout, waiting would fail the start at ctx's minute.
			c, err := Connect(ctx, cmd, Options{Name: tt.bin, ProbeTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer stop(c)
			if c.Era() != EraLegacy || c.Version() != "2025-11-25" && c.Version() != "2025-06-18" {
				t.Errorf("era %s version %s, want legacy", c.Era(), c.Version())
			}
			if !strings.Contains(string(c.ServerInfo()), tt.name) {
				t.Errorf("serverInfo %s, want %s", c.ServerInfo(), tt.name)
			}
			tools, err := c.List(ctx, "tools/list")
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, item := range tools {
				var tool struct{ Name string }
				_ = json.Unmarshal(item, &tool)
				found = found || tool.Name == tt.tool
			}
			if !found {
				t.Errorf("tools/list has no %s among %d tools", tt.tool, len(tools))
			}
			res, err := c.Call(ctx, "tools/call", json.RawMessage(tt.call), CallOptions{})
			if err != nil || !strings.Contains(string(res), tt.check) {
				t.Errorf("call = %s, %v; want it to contain %q", res, err, tt.check)
			}
			if err := c.Ping(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}
