package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigCheckCatalog: config check reports every problem of the
// [tools], [resources] and [prompts] entries at once, the catalog's own
// checks included, and prints warnings without failing.
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
`), 0o600)
	r := runIn(t, isolated(dir, "PATH=/usr/bin:/bin"), "", "config", "check", bad)
	want := []string{
		"prompts.review.template: does not parse as a Go text/template: prompts.review.template:1: unexpected EOF",
		"resources.notes.path: /nonexistent/notes does not exist or cannot be reached (no such file or directory)",
		`tools.grep_notes.command: "surely-not-installed" is not found on the child's PATH (/usr/bin:/bin); install it or give its absolute path`,
		"tools.grep_notes.command: element 2: {{patern}} names no argument; the arguments are pattern",
	}
	if r.status != 1 || r.stderr != strings.Join(want, "\n")+"\n" {
		t.Errorf("check bad: %d\nstderr:\n%s\nwant:\n%s", r.status, r.stderr, strings.Join(want, "\n"))
	}

	// Once config's own problems are fixed, the catalog's show.
	os.WriteFile(bad, []byte(`
[tools.status]
command = ["/bin/true"]
input_schema = { type = "object", properties = { x = { type = "strng" } } }
`), 0o600)
	r = runIn(t, isolated(dir), "", "config", "check", bad)
	want = []string{
		"tools.status: the name is taken by snodod's own status tool; choose another name",
		`tools.status.input_schema: is not a JSON Schema the runtime accepts: invalid schema: unknown type "strng"`,
	}
	if r.status != 1 || r.stderr != strings.Join(want, "\n")+"\n" {
		t.Errorf("check catalog problems: %d\n%s", r.status, r.stderr)
	}

	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte(`
[tools.ls]
command = ["/bin/ls", "{{dir}}"]
input.dir = {}
`), 0o600)
	r = runIn(t, isolated(dir), "", "config", "check", good)
	wantWarning := `warning: tools.ls.command: element 1: a value of {{dir}} starting with "-" would be read as an option: put "--" before it, if the program takes it` + "\n"
	if r.status != 0 || r.stdout != "ok: "+good+"\n" || r.stderr != wantWarning {
		t.Errorf("check with a warning: %d %q\nstderr:\n%s", r.status, r.stdout, r.stderr)
	}
}
