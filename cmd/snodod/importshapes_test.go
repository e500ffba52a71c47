package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/config"
)

// importBin is a directory of the programs the clients' files name (npx,
// uvx, node), so that config check finds them whatever the machine has.
func importBin(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for _, p := range []string{"npx", "uvx", "node", "docker"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// The client files of each shape the README's client section shows, as
// their clients write them: each `snodod import` output passes config
// check, copies ${env:…} and ${workspaceFolder} in
// snodod's syntax, copies a plain env value, keeps a secret out of the
// output (in a file of its own, mode 0600), and prints the client's
// replacement in that client's own shape.
var clientShapes = []struct {
	name, file, content string
	// vscode is set for VS Code's shape: servers, type "stdio".
	vscode bool
}{
	{name: "Claude Desktop", file: "claude_desktop_config.json", content: `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@2026.8.31"], "env": {"MEMORY_FILE_PATH": "${env:HOME}/memory.json", "LOG_LEVEL": "debug"}},
    "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github@2025.4.8"], "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}},
    "linear": {"command": "npx", "args": ["-y", "mcp-remote", "https://mcp.linear.example/sse", "--header", "Authorization:${AUTH_HEADER}"], "env": {"AUTH_HEADER": "Bearer lin_api_0123456789abcdefghijkl"}}
  }
}`},
	{name: "Claude Code", file: ".mcp.json", content: `{
  "mcpServers": {
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch==2025.4.7"], "env": {"API_KEY": "${API_KEY:-none}", "MODE": "plain value"}},
    "sentry": {"type": "http", "url": "https://mcp.sentry.example/mcp", "headers": {"Authorization": "Bearer ${SENTRY_TOKEN:-none}"}},
    "old": {"type": "sse", "url": "https://old.example.com/sse"}
  }
}`},
	{name: "Cursor", file: "mcp.json", content: `{
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem@2026.8.31", "${workspaceFolder}"], "envFile": "${userHome}/.env.mcp", "env": {"LOG_LEVEL": "debug"}},
    "docs": {"url": "https://docs.example.com/mcp", "headers": {"X-Api-Key": "${env:DOCS_KEY}", "X-Client": "cursor"}}
  }
}`},
	{name: "VS Code", file: "mcp.json", vscode: true, content: `{
  // VS Code's own file: comments and trailing commas
  "inputs": [
    {"type": "promptString", "id": "gh-token", "description": "GitHub Personal Access Token", "password": true},
  ],
  "servers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github@2025.4.8"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${input:gh-token}", "GITHUB_HOST": "${env:GITHUB_HOST}"},
    },
    /* a remote one */
    "remote": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${input:gh-token}"}},
    "events": {"type": "sse", "url": "https://events.example.com/sse"},
  },
}`},
	{name: "Windsurf", file: "mcp_config.json", content: `{
  "mcpServers": {
    "git": {"command": "uvx", "args": ["mcp-server-git==2025.1.14", "--repository", "/tmp"], "disabled": false},
    "cloud": {"serverUrl": "https://cloud.example.com/mcp"}
  }
}`},
}

// remoteShapes are the remote servers of clientShapes, as snodod hosts
// them.
var remoteShapes = map[string]struct {
	url    string
	sse    bool
	header func(map[string]string) bool
}{
	"linear": {"https://mcp.linear.example/sse", false, func(h map[string]string) bool { return h["Authorization"] == "Bearer lin_api_0123456789abcdefghijkl" }},
	"sentry": {"https://mcp.sentry.example/mcp", false, func(h map[string]string) bool { return h["Authorization"] == "Bearer none" }},
	"old":    {"https://old.example.com/sse", true, func(h map[string]string) bool { return len(h) == 0 }},
	"docs":   {"https://docs.example.com/mcp", false, func(h map[string]string) bool { return h["X-Api-Key"] == "k" && h["X-Client"] == "cursor" }},
	"remote": {"https://api.example.com/mcp", false, func(h map[string]string) bool { _, ok := h["Authorization"]; return ok }},
	"events": {"https://events.example.com/sse", true, func(h map[string]string) bool { return len(h) == 0 }},
	"cloud":  {"https://cloud.example.com/mcp", false, func(h map[string]string) bool { return len(h) == 0 }},
}

func TestImportClientShapes(t *testing.T) {
	bin := importBin(t)
	for _, shape := range clientShapes {
		t.Run(shape.name, func(t *testing.T) {
			dir := sockDir(t)
			home := filepath.Join(dir, "home")
			if err := os.MkdirAll(home, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, ".env.mcp"), []byte("A=1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			client := filepath.Join(dir, shape.file)
			if err := os.WriteFile(client, []byte(shape.content), 0o600); err != nil {
				t.Fatal(err)
			}
			env := isolated(dir, "PATH="+bin+":/usr/bin:/bin", "HOME="+home, "GITHUB_HOST=github.com", "API_KEY=x", "DOCS_KEY=k")
			secrets := filepath.Join(dir, "secrets")
			r := runIn(t, env, "", "import", "--secrets", secrets, client)
			if r.status != 0 {
				t.Fatalf("import: %d\n%s", r.status, r.stderr)
			}
			out := filepath.Join(dir, "imported.toml")
			if err := os.WriteFile(out, []byte(r.stdout), 0o600); err != nil {
				t.Fatal(err)
			}
			if c := runIn(t, env, "", "config", "check", out); c.status != 0 {
				t.Errorf("config check of the output: %d\n%s\n%s", c.status, c.stderr, r.stdout)
			}
			for _, bad := range []string{"${env:", "${workspaceFolder}", "${userHome}", "${input:", "ghp_0123456789", "lin_api_", "client key snodod does not use them", "mcp-remote"} {
				if strings.Contains(r.stdout, bad) {
					t.Errorf("the output holds %q:\n%s", bad, r.stdout)
				}
			}
			snippet := r.stdout[strings.Index(r.stdout, "# The client's configuration"):]
			if shape.vscode != strings.Contains(snippet, `"servers": {`) || shape.vscode != strings.Contains(snippet, `"type": "stdio"`) ||
				shape.vscode == strings.Contains(snippet, `"mcpServers"`) || !strings.Contains(snippet, `"connect"`) {
				t.Errorf("the client's replacement is not in its own shape:\n%s", snippet)
			}
			cfg, err := config.Load(config.Options{File: out, Env: env})
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			for name, want := range remoteShapes {
				if !strings.Contains(shape.content, `"`+name+`"`) {
					continue
				}
				if u := cfg.Upstream(name); u == nil || u.Remote == nil || u.Remote.URL != want.url || u.Remote.SSE != want.sse || !want.header(u.Remote.Headers) {
					t.Errorf("%s: %+v", name, u)
				}
			}
			switch shape.name {
			case "Claude Desktop":
				if m := cfg.Upstream("memory"); m == nil || m.Env["MEMORY_FILE_PATH"] != home+"/memory.json" || m.Env["LOG_LEVEL"] != "debug" {
					t.Errorf("memory: %+v", m)
				}
				gh := cfg.Upstream("github")
				if gh == nil || gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB" {
					t.Fatalf("github's token did not come through its file: %+v", gh)
				}
				fi, err := os.Stat(filepath.Join(secrets, "github.GITHUB_PERSONAL_ACCESS_TOKEN"))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("the secret's file: %v %v", fi, err)
				}
			case "Claude Code":
				if f := cfg.Upstream("fetch"); f == nil || f.Env["MODE"] != "plain value" || f.Env["API_KEY"] != "x" {
					t.Errorf("fetch: %+v", f)
				}
			case "Cursor":
				fs := cfg.Upstream("fs")
				if fs == nil || fs.Share != "cwd" || fs.Args[2] != config.ClientCwd || fs.Env["A"] != "1" || cfg.Upstream("docs") == nil {
					t.Errorf("fs: %+v", fs)
				}
			case "VS Code":
				gh := cfg.Upstream("github")
				if gh == nil || gh.Env["GITHUB_HOST"] != "github.com" || !strings.Contains(r.stdout, `GitHub Personal Access Token`) {
					t.Errorf("github: %+v\n%s", gh, r.stdout)
				}
			case "Windsurf":
				if g := cfg.Upstream("git"); g == nil || g.Disabled || cfg.Upstream("cloud") == nil {
					t.Errorf("git: %+v", g)
				}
			}
		})
	}
}

// snodod import --write rewrites the client's file in place: its other
// keys (and comments) as they were, the imported servers replaced by
// snodod connect in the client's own shape (remote ones too: snodod
// reaches them, once for every client), a backup beside it; snodod's configuration gets the entries, and passes
// config check. An entry snodod's configuration has already refuses the
// whole, writing nothing.
func TestImportWrite(t *testing.T) {
	bin := importBin(t)
	for _, shape := range []int{0, 3} { // Claude Desktop, VS Code
		shape := clientShapes[shape]
		t.Run(shape.name, func(t *testing.T) {
			dir := sockDir(t)
			client := filepath.Join(dir, shape.file)
			if err := os.WriteFile(client, []byte(shape.content), 0o640); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dir, "config", "snodod", "config.toml")
			env := isolated(dir, "PATH="+bin+":/usr/bin:/bin", "HOME="+dir, "GITHUB_HOST=github.com")
			secrets := filepath.Join(dir, "secrets")

			// A name snodod has already: refused, nothing written.
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, []byte("[mcpServers.github]\ncommand = \"/bin/true\"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := runIn(t, env, "", "import", "--write", "--secrets", secrets, client)
			if r.status != 1 || !strings.Contains(r.stderr, "has an entry mcpServers.github already") {
				t.Errorf("import --write over an entry of the same name: %d\n%s", r.status, r.stderr)
			}
			if b, _ := os.ReadFile(client); string(b) != shape.content {
				t.Errorf("the refused import rewrote the client's file:\n%s", b)
			}
			if _, err := os.Stat(secrets); err == nil {
				if list, _ := os.ReadDir(secrets); len(list) > 0 {
					t.Errorf("the refused import left secrets: %v", list)
				}
			}

			os.Remove(target) // the default file, made
			r = runIn(t, env, "", "import", "--write", "--secrets", secrets, client)
			if r.status != 0 {
				t.Fatalf("import --write: %d\n%s\n%s", r.status, r.stdout, r.stderr)
			}
			if b, err := os.ReadFile(client + ".snodod-backup"); err != nil || string(b) != shape.content {
				t.Errorf("the backup: %v\n%s", err, b)
			}
			if fi, err := os.Stat(client); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("the client's file lost its mode: %v %v", fi, err)
			}
			b, err := os.ReadFile(client)
			if err != nil {
				t.Fatal(err)
			}
			text := string(b)
			cf, err := config.ReadClientFile(client)
			if err != nil {
				t.Fatalf("the rewritten file does not read back: %v\n%s", err, text)
			}
			for name, raw := range cf.Entries {
				e, _ := raw.(map[string]any)
				if !config.IsSnododConnect(e) || shape.vscode != (e["type"] == "stdio") {
					t.Errorf("%s in the rewritten file: %v", name, e)
				}
			}
			keep := []string{`"globalShortcut": "Ctrl+Space"`, "\n  \"mcpServers\": {"}
			if shape.vscode {
				keep = []string{"// VS Code's own file: comments and trailing commas", `"id": "gh-token"`}
			}
			for _, k := range keep {
				if !strings.Contains(text, k) {
					t.Errorf("the rewritten file lost %q:\n%s", k, text)
				}
			}
			if c := runIn(t, env, "", "config", "check", target); c.status != 0 {
				t.Errorf("config check of snodod's configuration: %d\n%s", c.status, c.stderr)
			}
			cfg, err := config.Load(config.Options{File: target, Env: env})
			if err == nil && cfg.Sandbox.Level != "standard" {
				t.Errorf("the configuration import --write made has sandbox level %q, want standard (a new configuration)", cfg.Sandbox.Level)
			}
			if err != nil || cfg.Upstream("github") == nil {
				t.Fatalf("snodod's configuration lacks github: %v", err)
			}
			// Once more: nothing left to import.
			if r := runIn(t, env, "", "import", "--write", "--secrets", secrets, client); r.status != 1 || !strings.Contains(r.stderr, "has no server snodod can host") {
				t.Errorf("a second import --write: %d\n%s", r.status, r.stderr)
			}
			var js any
			if shape.vscode {
				return
			}
			if err := json.Unmarshal(b, &js); err != nil {
				t.Errorf("the rewritten Claude Desktop file is not JSON: %v\n%s", err, text)
			}
		})
	}
}
