package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckSandbox: config check says, per server and tool, the
// level in force, what this kernel enforces and what not, the network and
// the paths it may write; a tool's guess never takes a call's argument;
// a file without [sandbox] says in one line that its children run as
// before, and what to add.
func TestConfigCheckSandbox(t *testing.T) {
	dir := sockDir(t)
	notes := filepath.Join(dir, "notes")
	os.Mkdir(notes, 0o700)
	path := filepath.Join(dir, "c.toml")
	os.WriteFile(path, []byte(`
[sandbox]
limits = { memory = "2GiB" }

[mcpServers.std]
command = "/bin/cat"
args = ["`+notes+`"]

[mcpServers.tight]
command = "/bin/cat"
sandbox = { level = "strict", network = "none", required = true }

[mcpServers.loose]
command = "/bin/cat"
sandbox = "off"

[tools.ls]
command = ["/bin/ls", "--", "`+notes+`", "{{dir}}"]
input.dir = {}
sandbox = "standard"

[tools.plain]
command = ["/bin/true"]
`), 0o600)
	r := runIn(t, isolated(dir), "", "config", "check", path)
	if r.status != 0 {
		t.Fatalf("config check: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
	home := filepath.Join(dir, "state", "snodod", "sandbox")
	for _, want := range []string{
		"sandbox: mcpServers.std: standard\n  enforced: ",
		"  read-write: " + notes + " (argument), " + filepath.Join(home, "mcpServers.std") + " (working directory)\n",
		"sandbox: mcpServers.tight: strict (required)\n",
		"  network: none\n  read-write: " + filepath.Join(home, "mcpServers.tight") + " (private home)\n",
		"sandbox: mcpServers.loose: off: runs with the daemon user's rights\n",
		"sandbox: tools.ls: standard\n",
		"sandbox: tools.plain: off: runs with the daemon user's rights\n",
		"  read-write: " + notes + " (argument), " + filepath.Join(home, "tools.ls") + " (working directory)\n",
		"ok: " + path + "\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "sandbox: mcpServers.std: standard\n  enforced: ") || strings.Count(r.stdout, "\n  network: ") != 3 {
		t.Errorf("stdout:\n%s", r.stdout)
	}

	old := filepath.Join(dir, "old.toml")
	os.WriteFile(old, []byte("[mcpServers.a]\ncommand = \"/bin/cat\"\n"), 0o600)
	r = runIn(t, isolated(dir), "", "config", "check", old)
	wantOld := `sandbox: off for every hosted server and exec tool: this file has no [sandbox] table (it was written before the sandbox); add [sandbox] to run them in the standard one (docs/security.md, "Sandbox")` + "\n" + "ok: " + old + "\n"
	if r.status != 0 || r.stdout != wantOld {
		t.Errorf("a file without [sandbox]: %d\n%s%s", r.status, r.stdout, r.stderr)
	}
}
