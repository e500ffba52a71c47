package catalog_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/internal/sandbox"
)

// TestExecSandboxed: an exec tool under the standard sandbox ([sandbox]
// names the level: without one, tools are off) reads and
// writes what its fixed arguments name, runs in its private home (not
// the daemon's $HOME, which it cannot see: a planted ssh key there is
// not readable), cannot write where a call's argument points (the guess
// never takes a call's values), never sees the state directory, and its
// exit status is the program's own.
func TestExecSandboxed(t *testing.T) {
	if k := sandbox.Probe(); !k.Namespaces || !k.View {
		t.Skipf("no namespaces for a filesystem view here: %+v", k)
	}
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	notes := write(t, dir, "notes/a.txt", "a note")
	key := write(t, dir, ".ssh/id_ed25519", "SECRET")
	state := filepath.Join(dir, "state")
	token := write(t, state, "oauth/x.json", "SECRET")
	outside := filepath.Join(dir, "outside")
	if err := os.Mkdir(outside, 0o700); err != nil {
		t.Fatal(err)
	}
	text := `
[sandbox]
level = "standard" # exec tools get it too

[tools.notes]
command = ["/bin/sh", "-c", "cat \"$0\"/a.txt && pwd && echo ok > \"$0\"/b.txt", "` + filepath.Dir(notes) + `"]

[tools.read]
command = ["/bin/cat", "--", "{{path}}"]
input.path = {}

[tools.write]
command = ["/bin/sh", "-c", "echo pwned > \"$0\"", "{{path}}"]
input.path = {}

[tools.status]
command = ["/bin/sh", "-c", "exit 3"]
`
	_, srv := newHost(t, loadConfig(t, dir, strings.Replace(text, "[tools.status]", "[tools.code]", 1)), catalog.HostOptions{StateDir: state})
	c := newClient(t, srv, "2025-11-25", `{}`)

	res := callTool(t, c, t.Context(), "notes", nil)
	home := filepath.Join(state, "sandbox", "tools.notes")
	if res.IsError || res.text(t) != "a note"+home+"\n" {
		t.Errorf("notes: %+v; want the note, then its private home as its directory", res)
	}
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(notes), "b.txt")); err != nil || string(b) != "ok\n" {
		t.Errorf("the write into its fixed argument's directory: %q, %v", b, err)
	}
	for _, path := range []string{key, token, filepath.Join(dir, "config.toml")} {
		if res := callTool(t, c, t.Context(), "read", map[string]any{"path": path}); !res.IsError || strings.Contains(res.Content[0].Text, "SECRET") {
			t.Errorf("read %s: %+v", path, res)
		}
	}
	if res := callTool(t, c, t.Context(), "write", map[string]any{"path": filepath.Join(outside, "f")}); !res.IsError {
		t.Errorf("write where a call's argument points: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(outside, "f")); err == nil {
		t.Error("the write where a call's argument points landed")
	}
	if res := callTool(t, c, t.Context(), "code", nil); !res.IsError || !strings.HasPrefix(res.Content[0].Text, "code: exited with status 3") {
		t.Errorf("exit status: %+v", res)
	}
}
