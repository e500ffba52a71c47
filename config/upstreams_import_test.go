package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// upstreams.import of the files Cursor and VS Code really write
// (docs/config.md, "Hosted servers: mcpServers"): envFile is read (never
// printed), ${workspaceFolder} is the client's directory (one instance per
// folder), ${env:X} is the daemon's X, comments and trailing commas parse,
// and an entry snodod cannot host as written (${input:ID}, a bad field, a
// file that does not parse) is a warning and skipped: the rest of the
// configuration loads.
func TestUpstreamImportClientSyntax(t *testing.T) {
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "project.env"), "# the project's\nTOKEN=from-env-file\nexport QUOTED=\"a b\"\n")
	cursor := filepath.Join(dir, "cursor.json")
	writeAt(t, cursor, `{"mcpServers": {
		"fs": {"command": "npx", "args": ["-y", "fs@1.0.0", "${workspaceFolder}"], "envFile": "`+dir+`/project.env", "env": {"HOMEDIR": "${env:HOME}"}},
		"mixed": {"command": "x", "env": {"A": "$$literal"}}
	}}`)
	vscode := filepath.Join(dir, "mcp.json")
	writeAt(t, vscode, `{
		// VS Code's file
		"inputs": [{"type": "promptString", "id": "token", "password": true},],
		"servers": {
			"gh": {"type": "stdio", "command": "npx", "args": ["-y", "gh@1.0.0"], "env": {"TOKEN": "${input:token}"}},
			"git": {"type": "stdio", "command": "uvx", "args": ["git==1.0"], "cwd": "${workspaceFolder}/sub"},
			"broken": {"command": "x", "share": "everyone"},
			"remote": {"type": "sse", "url": "https://example.com/sse"},
		},
	}`)
	unparsable := filepath.Join(dir, "broken.json")
	writeAt(t, unparsable, `{"mcpServers": {`)
	cfg := filepath.Join(dir, "config.toml")
	writeAt(t, cfg, "[upstreams]\nimport = [\""+cursor+"\", \""+vscode+"\", \""+unparsable+"\"]\n[mcpServers.own]\ncommand = \"/bin/true\"\n")
	c := mustLoad(t, Options{File: cfg, Env: testEnv(t, "HOME=/home/me")})

	var names []string
	for _, u := range c.MCPServers {
		names = append(names, u.Name)
	}
	if !slices.Equal(names, []string{"fs", "git", "mixed", "own", "remote"}) {
		t.Errorf("entries %v, want fs git mixed own remote", names)
	}
	if r := c.Upstream("remote"); r == nil || r.Remote == nil || !r.Remote.SSE || r.Remote.URL != "https://example.com/sse" {
		t.Errorf("remote: %+v", r)
	}
	fs := c.Upstream("fs")
	if fs == nil || fs.Args[2] != ClientCwd || fs.Share != "cwd" || fs.Env["TOKEN"] != "from-env-file" || fs.Env["QUOTED"] != "a b" || fs.Env["HOMEDIR"] != "/home/me" {
		t.Errorf("fs: %+v", fs)
	}
	if r := fs.Render("/work/proj", "/home/me", nil); r.Args[2] != "/work/proj" || r.Dir != "/work/proj" {
		t.Errorf("fs rendered for /work/proj: args %q dir %q", r.Args, r.Dir)
	}
	if m := c.Upstream("mixed"); m == nil || m.Env["A"] != "$$literal" {
		t.Errorf("a client's $$ is passed as it is: %+v", m)
	}
	if g := c.Upstream("git"); g == nil || g.Cwd != ClientCwd+"/sub" || g.Share != "cwd" {
		t.Errorf("git: %+v", g)
	}
	w := strings.Join(warningLines(c), "\n")
	for _, want := range []string{
		"mcpServers.gh: uses ${input:token}, a value the client asks the user for; snodod cannot ask",
		"the entry is skipped (imported from " + vscode + ")",
		`mcpServers.broken.share: must be "all", "cwd" or "session", got "everyone"; the entry is skipped (imported from ` + vscode + ")",
		"upstreams.import: names a file that cannot be read as a client configuration, so it is skipped: config file " + unparsable,
	} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings:\n%s\nlack %q", w, want)
		}
	}
	var printed strings.Builder
	if err := c.Print(&printed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(printed.String(), "from-env-file") {
		t.Errorf("config print shows a value of the env file:\n%s", printed.String())
	}

	// An imported entry shadowed by snodod's own is not read at all (no
	// warning for what would not be used), and the snodod connect entries
	// `snodod import --write` leaves in a client's file are not hosted.
	writeAt(t, vscode, `{"servers": {"own": {"command": "x", "share": "everyone"}, "back": {"type": "stdio", "command": "/usr/bin/snodod", "args": ["connect", "back"]}}}`)
	writeAt(t, cfg, "[upstreams]\nimport = [\""+vscode+"\"]\n[mcpServers.own]\ncommand = \"/bin/true\"\n")
	c = mustLoad(t, Options{File: cfg, Env: testEnv(t)})
	if w := warningLines(c); len(w) != 0 || len(c.MCPServers) != 1 {
		t.Errorf("warnings %q, entries %v; want none, and own alone", w, c.MCPServers)
	}
}
