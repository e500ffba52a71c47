package upstream

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/sandbox"
)

// TestSandboxClientDirectory: a share = "cwd" server in the standard
// sandbox is given its client's directory (its default root) and starts
// there; a client working in the user's home does not hand it the home
// (a planted key stays out of its view): the server starts in its
// private home instead, and still serves.
func TestSandboxClientDirectory(t *testing.T) {
	if k := sandbox.Probe(); !k.Namespaces || !k.View {
		t.Skipf("no namespaces for a filesystem view here: %+v", k)
	}
	h := newHarness(t, "[sandbox]\n[mcpServers.fake]\ncommand = \"FAKE\"\nshare = \"cwd\"\n"+
		"[mcpServers.named]\ncommand = \"FAKE\"\nshare = \"cwd\"\ncwd = \"${client.cwd}\"\nroots = [\"${client.cwd}\"]\n")
	home := h.m.opts.Home
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "id_ed25519"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	project := t.TempDir()
	if err := os.WriteFile(filepath.Join(project, "notes.txt"), []byte("notes"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, server, cwd string
		sees              string // a file the server's view holds
		hidden            string // one it must not
	}{
		{"a project", "fake", project, filepath.Join(project, "notes.txt"), filepath.Join(home, ".ssh", "id_ed25519")},
		{"the home", "fake", home, "", filepath.Join(home, ".ssh", "id_ed25519")},
		{"the home through ${client.cwd}", "named", home, "", filepath.Join(home, ".ssh", "id_ed25519")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := h.connect(tc.server, tc.cwd, "2025-06-18")
			if got := text(t, c.call("tools/call", fakeTool("echo", `{"text":"hi"}`))); !strings.Contains(got, "hi") {
				t.Fatalf("echo: %q", got)
			}
			r := h.row(tc.server, tc.cwd)
			if r.PID == 0 || r.Sandbox != "standard" {
				t.Fatalf("row %+v: want a sandboxed process", r)
			}
			root := fmt.Sprintf("/proc/%d/root", r.PID)
			if tc.sees != "" {
				if _, err := os.Stat(root + tc.sees); err != nil {
					t.Errorf("the server does not see its client's directory: %v", err)
				}
			}
			if b, err := os.ReadFile(root + tc.hidden); err == nil {
				t.Errorf("the server sees %s: %q", tc.hidden, b)
			}
			cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", r.PID))
			if err != nil {
				t.Fatal(err)
			}
			want := tc.cwd
			if tc.cwd == home {
				want = filepath.Join(h.stateDir, "sandbox", "mcpServers."+tc.server)
			}
			if cwd != want {
				t.Errorf("its working directory %s, want %s", cwd, want)
			}
		})
	}
}
