package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// toolEnv is testEnv with a PATH holding one directory with the
// executables rg and tool, and the variables the tests expand.
func toolEnv(t *testing.T, extra ...string) []string {
	t.Helper()
	bin := t.TempDir()
	for _, name := range []string{"rg", "tool"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(bin, "plain"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	return append(testEnv(t, "PATH="+bin, "USER=me", "LC_ALL=C", "SECRET=hunter2", "EMPTY="), extra...)
}

func TestToolLoads(t *testing.T) {
	env := toolEnv(t)
	path := writeFile(t, "config.toml", `
[tools.grep_notes]
description = "Search my notes"
command = ["rg", "--json", "--", "{{pattern}}", "/home/me/notes", "--max={{n}}"]
input.pattern = { type = "string", description = "the regular expression", required = true }
input.n = { type = "integer", default = 5 }
input.globs = { type = "array" }
stdin = "{{globs}}"
timeout = "30s"
annotations = { readOnlyHint = true, title = "Grep" }
env = { TOKEN = "${SECRET}", MODE = "${UNSET:-fast}", KEEP = "$HOME" }
`)
	c := mustLoad(t, Options{File: path, Env: env})
	if len(c.Tools) != 1 {
		t.Fatalf("tools = %+v", c.Tools)
	}
	tool := c.Tools[0]
	bin := strings.TrimPrefix(env[len(env)-5], "PATH=")
	if tool.Name != "grep_notes" || tool.Path != filepath.Join(bin, "rg") || tool.Description != "Search my notes" {
		t.Errorf("tool = %+v", tool)
	}
	if tool.Timeout != 30*time.Second || tool.MaxOutputBytes != 1<<20 || tool.MaxConcurrency != 4 || tool.Output != "text" || tool.Progress {
		t.Errorf("limits = %v %d %d %q %v", tool.Timeout, tool.MaxOutputBytes, tool.MaxConcurrency, tool.Output, tool.Progress)
	}
	want := []Text{{{Literal: "--json"}}, {{Literal: "--"}}, {{Arg: "pattern"}}, {{Literal: "/home/me/notes"}}, {{Literal: "--max="}, {Arg: "n"}}}
	if !slices.EqualFunc(tool.Args, want, slices.Equal) {
		t.Errorf("args = %+v, want %+v", tool.Args, want)
	}
	if !tool.HasStdin || !slices.Equal(tool.Stdin, Text{{Arg: "globs"}}) {
		t.Errorf("stdin = %+v %v", tool.Stdin, tool.HasStdin)
	}
	var schema map[string]any
	if err := json.Unmarshal(tool.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := string(tool.InputSchema); got != `{"additionalProperties":false,"properties":{"globs":{"items":{"type":"string"},"type":"array"},"n":{"default":5,"type":"integer"},"pattern":{"description":"the regular expression","type":"string"}},"required":["pattern"],"type":"object"}` {
		t.Errorf("schema = %s", got)
	}
	if len(tool.Arguments) != 3 || tool.Arguments[1].Name != "n" || tool.Arguments[1].Default != 5 || !tool.Arguments[2].Required {
		t.Errorf("arguments = %+v", tool.Arguments)
	}
	home := envMap(env)["HOME"]
	if tool.Dir != home {
		t.Errorf("cwd = %q, want $HOME %q", tool.Dir, home)
	}
	e := envMap(env)
	wantEnv := []string{"HOME=" + home, "KEEP=$HOME", "LC_ALL=C", "MODE=fast", "PATH=" + bin, "TOKEN=hunter2", "USER=me",
		"XDG_CONFIG_HOME=" + e["XDG_CONFIG_HOME"], "XDG_RUNTIME_DIR=/run/test"}
	if !slices.Equal(tool.Env, wantEnv) {
		t.Errorf("env = %q, want %q (the allow-list, then env)", tool.Env, wantEnv)
	}
	if a := tool.Annotations; a == nil || a.Title != "Grep" || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.DestructiveHint != nil {
		t.Errorf("annotations = %+v", a)
	}
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings = %v, want none: {{pattern}} follows --", w)
	}
}

func TestToolInheritEnv(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []string
	}{
		{"true", []string{"EMPTY", "HOME", "LC_ALL", "PATH", "SECRET", "USER", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"}},
		{"false", nil},
		{`["USER", "XDG_*"]`, []string{"USER", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR"}},
	} {
		t.Run(tc.value, func(t *testing.T) {
			path := writeFile(t, "config.toml", "[tools.t]\ncommand = [\"/bin/sh\"]\ncwd = \"/\"\ninherit_env = "+tc.value+"\n")
			c := mustLoad(t, Options{File: path, Env: toolEnv(t)})
			var names []string
			for _, kv := range c.Tools[0].Env {
				name, _, _ := strings.Cut(kv, "=")
				names = append(names, name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("env names = %q, want %q", names, tc.want)
			}
		})
	}
}

func TestToolEnvFromFile(t *testing.T) {
	secret := writeFile(t, "token", "  s3cret\n")
	path := writeFile(t, "config.toml", "[tools.t]\ncommand = [\"/bin/sh\"]\ninherit_env = false\nenv = { TOKEN = \"${file:"+secret+"}\", ALSO = \"a-${EMPTY:-d}-${EMPTY}-$${USER}\" }\n")
	c := mustLoad(t, Options{File: path, Env: toolEnv(t)})
	// ${EMPTY:-d} takes the default of a variable set empty, as the shell
	// does; ${EMPTY} is the empty value; $$ is a $.
	if want := []string{"ALSO=a-d--${USER}", "TOKEN=s3cret"}; !slices.Equal(c.Tools[0].Env, want) {
		t.Errorf("env = %q, want %q", c.Tools[0].Env, want)
	}
	if c.Tools[0].Path != "/bin/sh" {
		t.Errorf("program %q, want /bin/sh as written", c.Tools[0].Path)
	}
}

func TestToolInputSchema(t *testing.T) {
	path := writeFile(t, "config.json", `{"tools": {"t": {
		"command": ["tool", "--", "{{q}}", "{{tags}}"],
		"input_schema": {"type": "object", "properties": {"q": {"type": "string", "default": "x"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["tags"]},
		"output": "json",
		"output_schema": "{\"type\": \"object\"}"}}}`)
	c := mustLoad(t, Options{File: path, Env: toolEnv(t)})
	tool := c.Tools[0]
	if got := string(tool.InputSchema); !strings.Contains(got, `"required":["tags"]`) || !strings.HasPrefix(got, "{") {
		t.Errorf("schema = %s", got)
	}
	want := []Argument{{Name: "q", Type: "string", Default: "x"}, {Name: "tags", Type: "array", Required: true}}
	if len(tool.Arguments) != 2 || tool.Arguments[0].Default != "x" || tool.Arguments[1].Name != want[1].Name || tool.Arguments[1].Type != "array" || !tool.Arguments[1].Required {
		t.Errorf("arguments = %+v, want %+v", tool.Arguments, want)
	}
	if string(tool.OutputSchema) != `{"type":"object"}` || tool.Output != "json" {
		t.Errorf("output %q, schema %s", tool.Output, tool.OutputSchema)
	}
}

// TestToolProblems lists every problem of each entry at once, with the
// dotted key of the offending field.
func TestToolProblems(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, entry string
		want        []string
	}{
		{"no command", `description = "x"`, []string{`tools.t.command: is required: the program to run, such as "npx" (with args = […]), or the program and its arguments, such as ["rg", "--", "{{pattern}}"]`}},
		{"empty command", `command = []`, []string{"tools.t.command: must name the program to run, got []"}},
		{"command a string", `command = "rg -- x"`, []string{`tools.t.command: must be the program alone (it is never run through a shell), got "rg -- x"; write command = "rg" and args = ["--", "x"]`}},
		{"not on PATH", `command = ["nope"]`, []string{`tools.t.command: "nope" is not found on the child's PATH (PATHDIR); install it, or give its absolute path (a daemon started by systemd has a shorter PATH than a login shell)`}},
		{"not executable", `command = ["` + dir + `/plain"]`, []string{"tools.t.command: cannot run " + dir + "/plain: it is not executable (chmod +x)"}},
		{"placeholder program", `command = ["{{p}}"]
input.p = {}`, []string{`tools.t.command: the program (the first element) must be fixed: a placeholder cannot choose it, got "{{p}}"`}},
		{"unknown placeholder", `command = ["rg", "--", "{{patern}}"]
input.pattern = { required = true }`, []string{
			"tools.t.command: element 2: {{patern}} names no argument; the arguments are pattern"}},
		{"no arguments at all", `command = ["rg", "{{x}}"]`, []string{"tools.t.command: element 1: {{x}} names no argument; the arguments are none (declare them with input or input_schema)"}},
		{"array inside an element", `command = ["rg", "--", "-g={{globs}}"]
input.globs = { type = "array" }`, []string{`tools.t.command: element 2: the array argument {{globs}} must be a whole element, got "-g={{globs}}"`}},
		{"bad types", `command = ["rg"]
timeout = 30
max_output_bytes = 0
max_concurrency = "2"
output = "xml"
progress = "yes"
title = 3`, []string{
			`tools.t.max_concurrency: must be a positive integer, got "2"`,
			"tools.t.max_output_bytes: must be a positive integer, got 0",
			`tools.t.output: must be "text" or "json", got "xml"`,
			`tools.t.progress: must be true or false, got "yes"`,
			"tools.t.timeout: must be a positive duration with a unit, such as \"30s\", got 30",
			"tools.t.title: must be a string, got 3",
		}},
		{"unknown fields", `command = ["rg"]
timeuot = "1s"
annotations = { readOnly = true }
input.x = { typ = "string" }`, []string{
			`unknown key "tools.t.annotations.readOnly"; did you mean "tools.t.annotations.readOnlyHint"?`,
			`unknown key "tools.t.input.x.typ"; did you mean "tools.t.input.x.type"?`,
			`unknown key "tools.t.timeuot"; did you mean "tools.t.timeout"?`,
		}},
		{"input and input_schema", `command = ["rg", "{{x}}"]
input.x = {}
input_schema = { type = "object", properties = { x = { type = "string" } } }`, []string{
			"tools.t.input_schema: cannot be given with input: declare the arguments with one of them"}},
		{"input_schema not an object", `command = ["rg"]
input_schema = { type = "string" }`, []string{`tools.t.input_schema: must describe an object: {type = "object", properties = {…}}, got "{\"type\":\"string\"}"`}},
		{"input_schema not JSON", `command = ["rg"]
input_schema = "{nope"`, []string{`tools.t.input_schema: must be a JSON Schema object, got "{nope"`}},
		{"output_schema without json", `command = ["rg"]
output_schema = { type = "object" }`, []string{`tools.t.output_schema: needs output = "json": a text result has no structured content`}},
		{"bad arguments", `command = ["rg", "--", "{{a}}", "{{b}}", "{{c}}", "{{d}}", "{{e}}", "{{f}}"]
input.a = { type = "float" }
input.b = { type = "integer", default = "5" }
input.c = { type = "integer", enum = ["1"] }
input.d = { enum = ["x", "y"], default = "z" }
input.e = { required = true, default = "x" }
input.f = { enum = [] }
input."g h" = {}`, []string{
			`tools.t.input."g h": is not a valid argument name: a letter or _, then letters, digits, _ and -`,
			`tools.t.input.a.type: must be "string", "integer", "number", "boolean" or "array", got "float"`,
			`tools.t.input.b.default: must be an integer, got "5"`,
			`tools.t.input.c.enum: is for string arguments only, got type = "integer"`,
			`tools.t.input.d.default: must be one of the enum values, got "z"`,
			"tools.t.input.e.default: is never used: the argument is required (drop one of them)",
			"tools.t.input.f.enum: must list at least one value, got []",
		}},
		{"env", `command = ["rg"]
env = { A = "${NOPE}", B = "${file:/nonexistent/secret}", C = 1, "D-E" = "x", F = "${SECRET", G = "${SECRET:x}" }`, []string{
			"tools.t.env.A: uses ${NOPE}, which is not set in the daemon's environment; set it, or write ${NOPE:-default}",
			"tools.t.env.B: uses ${file:/nonexistent/secret}, which cannot be read: /nonexistent/secret: no such file or directory",
			"tools.t.env.C: must be a string, got a number",
			"tools.t.env.D-E: is not a variable name: use letters, digits and _, not starting with a digit",
			"tools.t.env.F: has an unterminated ${ (write $$ for a literal $)",
			"tools.t.env.G: uses ${SECRET:x}, which snodod does not expand; the expansions are ${VAR}, ${VAR:-default}, ${file:PATH} and $$ for a literal $",
		}},
		{"cwd", `command = ["rg"]
cwd = "/nonexistent"`, []string{"tools.t.cwd: the directory /nonexistent does not exist or cannot be reached (no such file or directory)"}},
		{"inherit_env", `command = ["rg"]
inherit_env = ["PATH", "A B"]`, []string{`tools.t.inherit_env: must be true (every variable), false (none) or a list of variable names (a trailing * matches a prefix), got "A B"`}},
		{"warnings", `command = ["rg", "{{q}}", "{{ q }}", "--", "{{r}}", "{{mode}}", "{{flag}}"]
input.q = {}
input.r = {}
input.unused = {}
input.mode = { enum = ["-a", "b"] }
input.flag = { type = "boolean" }`, []string{
			`tools.t.command: element 1: a value of {{q}} starting with "-" would be read as an option: put "--" before it if the program takes it, or set allow_option_values = true (warning)`,
			`tools.t.command: element 2: "{{ q }}" holds {{ and }} that are no placeholder (a placeholder is {{name}}, without spaces); it is passed as it is (warning)`,
			"tools.t.input: the argument unused is declared but no {{unused}} uses it, in command, args or stdin (warning)",
		}},
		{"option warnings by type", `command = ["rg", "{{mode}}", "{{flag}}", "{{n}}"]
input.mode = { enum = ["a", "b"] }
input.flag = { type = "boolean" }
input.n = { type = "integer" }`, []string{
			`tools.t.command: element 3: a value of {{n}} starting with "-" would be read as an option: put "--" before it if the program takes it, or set allow_option_values = true (warning)`,
		}},
		{"inherit_env not a list", `command = ["rg"]
inherit_env = "all"`, []string{`tools.t.inherit_env: must be true (every variable), false (none) or a list of variable names (a trailing * matches a prefix), got "all"`}},
		{"option warnings silenced", `command = ["rg", "{{q}}"]
input.q = {}
allow_option_values = true`, nil},
		{"a secret in argv", `command = ["rg", "--token=${file:/etc/hostname}"]`, []string{
			`tools.t.command: uses ${file:/etc/hostname} in command, which every local user can read (a process's command line is in /proc/PID/cmdline); pass the secret in env instead, env = { NAME = "${file:/etc/hostname}" }, for the program to read there`}},
		{"no client", `command = ["rg", "${client.cwd}"]`, []string{
			`tools.t.command: uses ${client.cwd}, which only a hosted server (mcpServers) has: it starts for a client; an exec tool runs for every client alike`}},
		{"args elements", `command = "rg"
args = ["--", "{{x}}", "{{y}}"]
input.x = {}`, []string{"tools.t.args: element 2: {{y}} names no argument; the arguments are x"}},
		{"fine", `command = ["rg"]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := toolEnv(t)
			bin := envMap(env)["PATH"]
			if err := os.WriteFile(filepath.Join(dir, "plain"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, "config.toml", "[tools.t]\n"+tc.entry+"\n")
			got := checkLines(t, Options{File: path, Env: env})
			for i := range tc.want {
				tc.want[i] = strings.ReplaceAll(tc.want[i], "PATHDIR", bin)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// checkLines loads opts and returns its problems, then its warnings marked
// " (warning)"; none when it loads without warnings.
func checkLines(t *testing.T, opts Options) []string {
	t.Helper()
	c, err := Load(opts)
	if err != nil {
		return problemLines(t, err)
	}
	var lines []string
	for _, w := range c.Warnings() {
		lines = append(lines, w.String()+" (warning)")
	}
	return lines
}

// A tool's program may be written as a hosted server's is, a string and
// args, and its fields expand like a server's: ${VAR}, $$.
func TestToolProgramShapes(t *testing.T) {
	env := toolEnv(t)
	bin := envMap(env)["PATH"]
	path := writeFile(t, "config.toml", `
[tools.list]
command = ["rg", "--color=${MODE:-never}", "$${X}"]
args = ["$$1", "{{q}}"]
input.q = {}
[tools.string]
command = "rg"
args = ["--", "{{q}}"]
input.q = {}
`)
	c := mustLoad(t, Options{File: path, Env: env})
	list, str := c.Tools[0], c.Tools[1]
	want := []Text{{{Literal: "--color=never"}}, {{Literal: "${X}"}}, {{Literal: "$1"}}, {{Arg: "q"}}}
	if list.Path != filepath.Join(bin, "rg") || !slices.EqualFunc(list.Args, want, slices.Equal) {
		t.Errorf("list: %s %+v, want %+v", list.Path, list.Args, want)
	}
	if str.Path != filepath.Join(bin, "rg") || len(str.Args) != 2 || str.Program.Command != "rg" {
		t.Errorf("string: %+v", str)
	}
}
