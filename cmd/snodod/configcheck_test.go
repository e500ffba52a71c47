package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckCatalog: config check reports every problem of the
// [tools], [resources], [prompts] and [mcpServers] entries in one pass,
// the catalog's own checks (a name snodod serves itself, a schema the
// runtime refuses) with the others, a command missing from PATH with the
// entry's other problems, and prints warnings without failing.
func TestConfigCheckCatalog(t *testing.T) {
	dir := sockDir(t)
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte(`
[tools.grep_notes]
command = ["surely-not-installed", "--", "{{patern}}"]
input.pattern = { type = "string", required = true }

[tools.status]
command = ["/bin/true"]
input_schema = { type = "object", properties = { x = { type = "strng" } } }

[resources.notes]
path = "/nonexistent/notes"

[prompts.review]
template = "{{if .diff}}"
arguments.diff = {}

[mcpServers.GitHub]
command = "surely-not-installed-either"
share = "everyone"

[mcpServers.github]
command = "/bin/true"
`), 0o600)
	r := runIn(t, isolated(dir, "PATH=/usr/bin:/bin"), "", "config", "check", bad)
	want := []string{
		`mcpServers.GitHub.command: "surely-not-installed-either" is not found on the child's PATH (/usr/bin:/bin); install it, or give its absolute path (a daemon started by systemd has a shorter PATH than a login shell)`,
		`mcpServers.GitHub.share: must be "all", "cwd" or "session", got "everyone"`,
		`mcpServers.github.prefix: must differ from the prefix of mcpServers.GitHub, got "github"; set prefix to tell them apart`,
		"prompts.review.template: does not parse as a Go text/template: prompts.review.template:1: unexpected EOF",
		"resources.notes.path: /nonexistent/notes does not exist or cannot be reached (no such file or directory)",
		`tools.grep_notes.command: "surely-not-installed" is not found on the child's PATH (/usr/bin:/bin); install it, or give its absolute path (a daemon started by systemd has a shorter PATH than a login shell)`,
		"tools.grep_notes.command: element 2: {{patern}} names no argument; the arguments are pattern",
		"tools.status: the name is taken by snodod's own status tool; choose another name",
		`tools.status.input_schema: is not a JSON Schema the runtime accepts: invalid schema: unknown type "strng"`,
	}
	if r.status != 1 || r.stderr != strings.Join(want, "\n")+"\n" {
		t.Errorf("check bad: %d\nstderr:\n%s\nwant:\n%s", r.status, r.stderr, strings.Join(want, "\n"))
	}

	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte(`
[tools.ls]
command = ["/bin/ls", "{{dir}}"]
input.dir = {}
`), 0o600)
	r = runIn(t, isolated(dir), "", "config", "check", good)
	wantWarning := `warning: tools.ls.command: element 1: a value of {{dir}} starting with "-" would be read as an option: put "--" before it if the program takes it, or set allow_option_values = true` + "\n"
	wantOut := `sandbox: off for every hosted server and exec tool: this file has no [sandbox] table (it was written before the sandbox); add [sandbox] to run them in the standard one (docs/security.md, "Sandbox")` + "\n"
	if r.status != 0 || r.stdout != wantOut+"ok: "+good+"\n" || r.stderr != wantWarning {
		t.Errorf("check with a warning: %d %q\nstderr:\n%s", r.status, r.stdout, r.stderr)
	}
}
