package config

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// entriesSection is the title of docs/config.md's section on [tools],
// [resources] and [prompts].
const entriesSection = "Tools, resources and prompts"

// TestDocsEntryFields compares the fields the decoders know with the
// field tables of docs/config.md, both ways: a field added to either alone
// fails.
func TestDocsEntryFields(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	documented := documentedFields(section(string(b), entriesSection))

	known := map[string]map[string]bool{}
	knownFields = func(prefix string, fields []string) {
		parts := strings.SplitN(prefix, ".", 3)
		kind, rel := parts[0], ""
		if len(parts) == 3 {
			rel = parts[2]
		}
		rel = regexp.MustCompile(`^(input|arguments)\.[^.]+$`).ReplaceAllString(rel, "$1.NAME")
		rel = regexp.MustCompile(`^messages\[\d+\]$`).ReplaceAllString(rel, "messages[]")
		for _, f := range fields {
			if known[kind] == nil {
				known[kind] = map[string]bool{}
			}
			name := f
			if rel != "" {
				name = rel + "." + f
			}
			known[kind][name] = true
		}
	}
	defer func() { knownFields = nil }()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	prompt := write("p.md", "x")
	// Every field of every kind of entry, so that every decoder runs whole.
	path := write("config.toml", `
[tools.a]
command = ["/bin/sh", "--", "{{x}}"]
input.x = { type = "string", description = "d", required = true }
input.y = { type = "string", default = "v", enum = ["v"] }
stdin = "{{y}}"
annotations = { title = "t", readOnlyHint = true }
[tools.b]
command = ["/bin/sh"]
input_schema = { type = "object" }
output = "json"
output_schema = { type = "object" }
[resources.r]
path = "`+dir+`"
[prompts.p]
arguments.a = { required = true }
template = "{{.a}}"
[prompts.f]
file = "`+prompt+`"
[prompts.m]
messages = [{ role = "user", text = "x" }]
`)
	if _, err := Load(Options{File: path, Env: testEnv(t)}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"tools", "resources", "prompts"} {
		var code []string // without the tables that hold fields (input, annotations)
		for name := range known[kind] {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(known[kind])), func(other string) bool { return strings.HasPrefix(other, name+".") }) {
				code = append(code, name)
			}
		}
		slices.Sort(code)
		docs := slices.Sorted(maps.Keys(documented[kind]))
		if !slices.Equal(code, docs) {
			t.Errorf("%s: the code knows\n%q\ndocs/config.md documents\n%q", kind, code, docs)
		}
	}
}

// documentedFields reads the first column of the field table under each
// "### `[KIND.NAME]`" heading: backquoted field names.
func documentedFields(text string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	kind := ""
	heading := regexp.MustCompile("^### `\\[(\\w+)\\.NAME\\]`")
	name := regexp.MustCompile("`([^`]+)`")
	for line := range strings.Lines(text) {
		if m := heading.FindStringSubmatch(line); m != nil {
			kind, out[m[1]] = m[1], map[string]bool{}
			continue
		}
		if kind == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range name.FindAllStringSubmatch(first, -1) {
			out[kind][m[1]] = true
		}
	}
	return out
}

// TestDocsEntryExamples loads every TOML example of the entries' section,
// with the programs and files they name made up, and wants no problem and
// no warning: the examples are what a user copies.
func TestDocsEntryExamples(t *testing.T) {
	b, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	examples := fenced(section(string(b), entriesSection), "toml")
	if len(examples) < 4 {
		t.Fatalf("%d TOML examples in ## %s", len(examples), entriesSection)
	}
	home, bin := t.TempDir(), t.TempDir()
	for _, prog := range []string{"rg", "du", "gh", "llm"} {
		if err := os.WriteFile(filepath.Join(bin, prog), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"notes/a.md", "todo.txt", ".config/snodod/secrets/gh"} {
		full := filepath.Join(home, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, ex := range examples {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "prompts"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "prompts", "commit.md"), []byte("Write a message for {{.diff}}"), 0o644); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "config.toml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(ex, "/home/me", home)), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(Options{File: path, Env: testEnv(t, "HOME="+home, "PATH="+bin)})
		if err != nil {
			t.Errorf("example %d does not load:\n%v\n%s", i+1, err, ex)
			continue
		}
		if w := c.Warnings(); len(w) > 0 {
			t.Errorf("example %d has warnings: %v\n%s", i+1, w, ex)
		}
	}
}
