package config

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// An imported entry that runs mcp-remote is hosted as the remote server
// it stands for, with or without npx -y; its headers take the entry's env.
func TestImportMCPRemote(t *testing.T) {
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude_desktop_config.json")
	doc := map[string]any{"mcpServers": map[string]any{
		"plain":   map[string]any{"command": "npx", "args": []any{"mcp-remote", "https://a.example.com/sse"}},
		"yes":     map[string]any{"command": "npx", "args": []any{"-y", "mcp-remote@0.1.38", "https://b.example.com/mcp", "9696", "--transport", "sse-only", "--allow-http"}},
		"global":  map[string]any{"command": "/usr/local/bin/mcp-remote", "args": []any{"https://c.example.com/mcp", "--ignore-tool", "delete*", "--ignore-tool=drop*"}},
		"header":  map[string]any{"command": "npx", "args": []any{"-y", "mcp-remote", "https://d.example.com/mcp", "--header", "Authorization:${AUTH_HEADER}", "--header", "X-Team: blue"}, "env": map[string]any{"AUTH_HEADER": "Bearer abc", "NODE_EXTRA_CA_CERTS": "/etc/ca.pem"}},
		"fromenv": map[string]any{"command": "npx", "args": []any{"mcp-remote", "https://e.example.com/mcp", "--header", "Authorization: Bearer ${TOKEN}"}},
		"client":  map[string]any{"command": "npx", "args": []any{"mcp-remote", "https://f.example.com/mcp", "--static-oauth-client-info", `{"client_id":"cid"}`, "--static-oauth-client-metadata", `{"scope":"read write"}`}},
		"secret":  map[string]any{"command": "npx", "args": []any{"mcp-remote", "https://g.example.com/mcp", "--static-oauth-client-info", `{"client_id":"cid","client_secret":"s"}`}},
		"nourl":   map[string]any{"command": "npx", "args": []any{"mcp-remote", "--debug"}},
		"dlx":     map[string]any{"command": "pnpm", "args": []any{"dlx", "mcp-remote", "https://h.example.com/mcp"}},
		"notmine": map[string]any{"command": "npx", "args": []any{"-y", "other-package", "https://x.example.com"}},
	}}
	b, _ := json.Marshal(doc)
	writeAt(t, claude, string(b))
	cfg := filepath.Join(dir, "config.toml")
	writeAt(t, cfg, "[upstreams]\nimport = [\""+claude+"\"]\n")
	c := mustLoad(t, Options{File: cfg, Env: testEnv(t, "TOKEN=t0k")})

	remote := func(name string) *Remote {
		t.Helper()
		u := c.Upstream(name)
		if u == nil || u.Remote == nil {
			t.Fatalf("%s: not a remote server: %+v", name, u)
		}
		return u.Remote
	}
	if r := remote("plain"); r.URL != "https://a.example.com/sse" || r.SSE {
		t.Errorf("plain: %+v", r)
	}
	if r := remote("yes"); r.URL != "https://b.example.com/mcp" || !r.SSE || !r.AllowInsecureHTTP || r.OAuth.RedirectPort != 9696 {
		t.Errorf("yes: %+v", r)
	}
	if g := c.Upstream("global"); g.Tools.Allows("delete_repo") || g.Tools.Allows("drop_table") || !g.Tools.Allows("list") {
		t.Errorf("global: tools %+v", g.Tools)
	}
	if r := remote("header"); r.Headers["Authorization"] != "Bearer abc" || r.Headers["X-Team"] != "blue" || r.TLSCAFile != "/etc/ca.pem" {
		t.Errorf("header: %+v", r)
	}
	if r := remote("fromenv"); r.Headers["Authorization"] != "Bearer t0k" {
		t.Errorf("fromenv: %+v", r)
	}
	if r := remote("client"); r.OAuth.ClientID != "cid" || !slices.Equal(r.OAuth.Scopes, []string{"read", "write"}) {
		t.Errorf("client: %+v", r.OAuth)
	}
	remote("dlx")
	if u := c.Upstream("notmine"); u == nil || u.Remote != nil || u.Command != "npx" {
		t.Errorf("another npx package: %+v", u)
	}
	for _, name := range []string{"secret", "nourl"} {
		if c.Upstream(name) != nil {
			t.Errorf("%s was hosted", name)
		}
	}
	w := strings.Join(warningLines(c), "\n")
	for _, want := range []string{
		"mcpServers.secret: passes a client secret on mcp-remote's command line (--static-oauth-client-info); snodod reads it from a file: move the entry into snodod's configuration with snodod import FILE; the entry is skipped",
		"mcpServers.nourl: runs mcp-remote without the server's URL; the entry is skipped",
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings:\n%s\nlack %q", w, want)
		}
	}
}
