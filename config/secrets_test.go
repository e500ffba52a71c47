package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// server.state_key_file and http.auth_token_file are read at load, as
// serve reads them, so config check says what serve would refuse: a
// missing file, and a key or token under 32 bytes (white
// space around it trimmed), each with how to make one.
func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(" "+strings.Repeat("k", n)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	missing := filepath.Join(dir, "absent")
	short, exact := file("short", MinSecretBytes-1), file("exact", MinSecretBytes)
	five := file("five", 5)
	hint := func(p string) string { return "make one with: head -c 48 /dev/urandom | base64 > " + p }
	for _, tc := range []struct {
		name, key, path string
		want            string
	}{
		{"state key missing", "server.state_key_file", missing, "server.state_key_file: cannot read " + missing + ": no such file or directory; " + hint(missing)},
		{"state key of 5 bytes", "server.state_key_file", five, "server.state_key_file: the key in " + five + " must be at least 32 bytes, got 5; " + hint(five)},
		{"state key of 31 bytes", "server.state_key_file", short, "server.state_key_file: the key in " + short + " must be at least 32 bytes, got 31; " + hint(short)},
		{"state key of 32 bytes", "server.state_key_file", exact, ""},
		{"token missing", "http.auth_token_file", missing, "http.auth_token_file: cannot read " + missing + ": no such file or directory; " + hint(missing)},
		{"token of 5 bytes", "http.auth_token_file", five, "http.auth_token_file: the token in " + five + " must be at least 32 bytes, got 5; " + hint(five)},
		{"token of 31 bytes", "http.auth_token_file", short, "http.auth_token_file: the token in " + short + " must be at least 32 bytes, got 31; " + hint(short)},
		{"token of 32 bytes", "http.auth_token_file", exact, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			section, key, _ := strings.Cut(tc.key, ".")
			path := writeFile(t, "config.toml", "["+section+"]\n"+key+" = \""+tc.path+"\"\n")
			_, err := Load(Options{File: path, Env: testEnv(t)})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			if got := problemLines(t, err); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("problems %q, want %q", got, tc.want)
			}
			if _, err := Inspect(path); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Inspect: %v, want %q", err, tc.want)
			}
		})
	}
	// A client of the daemon reads neither.
	path := writeFile(t, "config.toml", "[server]\nstate_key_file = \""+missing+"\"\n")
	if _, warnings, err := LoadClient(Options{File: path, Env: testEnv(t)}); err != nil || len(warnings) != 0 {
		t.Errorf("LoadClient: %v, warnings %v", err, warnings)
	}
}

// The rule of secret-looking values (docs/config.md, "Secrets"), by name
// and by text; a ${…} reference is never a secret.
func TestSecretLooking(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        bool
	}{
		{"GITHUB_PERSONAL_ACCESS_TOKEN", "x", true},
		{"API_KEY", "abc", true},
		{"DB_PASSWORD", "hunter2", true},
		{"DB_PW", "hunter2", true},
		{"GH_PAT", "x", true},
		{"AUTHORIZATION", "Bearer ${file:~/t}", true},
		{"SESSION_SECRET", "${file:~/.secrets/s}", false},
		{"TOKEN", "${GITHUB_TOKEN}", false},
		{"TOKEN", "${TOKEN:-}", false},
		{"LOG_LEVEL", "debug", false},
		{"PWD", "/home/me", false},
		{"HOME", "/home/me/projects/abc123def456ghi789jkl", false},
		{"CONFIG", "ghp_0123456789abcdefghij", true},
		{"OPENAI", "sk-proj-0123456789abcdef", true},
		{"DATABASE_URL", "postgres://me:hunter2@db.example.com/app", true},
		{"DATABASE_URL", "postgres://db.example.com/app", false},
		{"ID", "a1b2c3d4e5f6a7b8c9d0e1f2", true},
		{"MODE", "plain value", false},
		{"MODE", "", false},
	} {
		if got := SecretLooking(tc.name, tc.value); got != tc.want {
			t.Errorf("SecretLooking(%q, %q) = %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}

// config check on a client's own file says where it belongs:
// first when the file has problems, as a warning when it loads.
func TestClientFileHint(t *testing.T) {
	dir := t.TempDir()
	claude := filepath.Join(dir, "claude_desktop_config.json")
	writeAt(t, claude, `{"globalShortcut": "Ctrl+Space", "mcpServers": {"m": {"command": "/bin/true"}}}`)
	_, err := Inspect(claude)
	lines := problemLines(t, err)
	want := claude + ` looks like Claude Desktop's configuration, not snodod's: to host its servers, name it in snodod's own file (upstreams.import = ["` + claude + `"]), or copy them into it with snodod import ` + claude
	if len(lines) != 2 || lines[0] != want || !strings.HasPrefix(lines[1], `unknown key "globalShortcut"`) {
		t.Errorf("problems:\n%s\nwant first:\n%s", strings.Join(lines, "\n"), want)
	}
	writeAt(t, claude, `{"mcpServers": {"m": {"command": "/bin/true"}}}`)
	c, err := Inspect(claude)
	if err != nil {
		t.Fatal(err)
	}
	if w := warningLines(c); len(w) != 1 || w[0] != want {
		t.Errorf("warnings %q, want %q", w, want)
	}
	vscode := filepath.Join(dir, "other.json")
	writeAt(t, vscode, `{"servers": {}}`)
	_, err = Inspect(vscode)
	if lines := problemLines(t, err); !strings.Contains(lines[0], "looks like VS Code's configuration, not snodod's") {
		t.Errorf("problems: %q", lines)
	}
}
