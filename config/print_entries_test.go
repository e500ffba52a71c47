package config

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// config print shows the entries of tools, resources and prompts as
// written, field by field, env values that look like secrets as <set>, as
// it does mcpServers'; printed, they load back.
func TestPrintEntrySections(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, "c.toml", `
[tools.grep]
command = ["/bin/sh", "--", "{{pattern}}"]
input.pattern = { required = true }
env = { TOKEN = "s3cret-tool" }
timeout = "30s"

[resources.notes]
path = "`+dir+`"
include = ["**/*.md"]

[prompts.review]
template = """Review
{{.diff}}"""
arguments.diff = { required = true }

[mcpServers.fs]
command = "/bin/sh"
env = { K = "plain", API_KEY = "s3cret-server" }
`)
	c := mustLoad(t, Options{File: path, Env: testEnv(t)})
	var b bytes.Buffer
	if err := c.Print(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	src := "# file " + path
	for _, want := range []string{
		`tools.grep.command = ["/bin/sh", "--", "{{pattern}}"]`,
		`tools.grep.env.TOKEN = "<set>"`,
		`tools.grep.input = {pattern = {required = true}}`,
		`tools.grep.timeout = "30s"`,
		`resources.notes.include = ["**/*.md"]`,
		`resources.notes.path = "` + dir + `"`,
		`prompts.review.arguments = {diff = {required = true}}`,
		`prompts.review.template = "Review\n{{.diff}}"`,
		`mcpServers.fs.env.API_KEY = "<set>"`,
		`mcpServers.fs.env.K = "plain"`,
	} {
		i := strings.Index(out, want+" ")
		if i < 0 {
			t.Errorf("output lacks %q:\n%s", want, out)
			continue
		}
		if line, _, _ := strings.Cut(out[i:], "\n"); !strings.HasSuffix(line, src) {
			t.Errorf("%q: source %q, want %q", want, line, src)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("a secret is printed:\n%s", out)
	}
	again := mustLoad(t, Options{File: writeFile(t, "printed.toml", out), Env: testEnv(t)})
	if len(again.Tools) != 1 || len(again.Resources) != 1 || len(again.Prompts) != 1 || again.Prompts[0].Name != "review" {
		t.Errorf("printed entries did not load back: %+v %+v %+v", again.Tools, again.Resources, again.Prompts)
	}

	b.Reset()
	if err := c.PrintJSON(&b); err != nil {
		t.Fatal(err)
	}
	var js map[string]struct{ Value any }
	if err := json.Unmarshal(b.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	if v := js["tools.grep.env.TOKEN"].Value; v != "<set>" {
		t.Errorf("JSON tools.grep.env.TOKEN = %v", v)
	}
	if v := js["resources.notes.path"].Value; v != filepath.Clean(dir) {
		t.Errorf("JSON resources.notes.path = %v", v)
	}
}
