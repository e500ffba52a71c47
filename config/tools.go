package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/snodod/snodod/internal/sandbox"
)

// The defaults of an exec tool's limits (docs/config.md, "Tools").
const (
	DefaultToolTimeout        = 60 * time.Second
	DefaultToolMaxOutputBytes = 1 << 20
	DefaultToolMaxConcurrency = 4
)

// Tool is one [tools.NAME] entry: a program run as an MCP tool, its argv
// built from the call's arguments without a shell (catalog/exec.go runs
// it). A Tool from Load is valid and fully resolved.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Program is the entry's program as configured, expanded (the
	// placeholders of its arguments still in them).
	Program Program
	// Path is the program resolved: an absolute path.
	Path string
	// Args are the program's arguments with their placeholders parsed;
	// each becomes zero, one or (an array argument's) several elements of
	// argv.
	Args []Text
	// Arguments are the declared arguments (from input, or input_schema's
	// properties), sorted by name.
	Arguments []Argument
	// InputSchema is the input JSON Schema: input_schema as given, or the
	// one input describes.
	InputSchema json.RawMessage
	// Stdin, when HasStdin, is written to the child's standard input,
	// which is otherwise /dev/null.
	Stdin    Text
	HasStdin bool
	// Dir is the working directory; Env the whole environment, KEY=VALUE
	// (never logged or printed: it may hold secrets).
	Dir string
	Env []string
	// Timeout ends a run that takes longer (the group gets SIGTERM, then
	// SIGKILL after 2 s). > 0.
	Timeout time.Duration
	// MaxOutputBytes is how much of stdout is kept; the rest is cut with
	// a note. >= 1.
	MaxOutputBytes int
	// Output is "text" (stdout as one text block) or "json" (stdout
	// parsed into structuredContent).
	Output string
	// OutputSchema, with Output "json", is what the JSON must conform to;
	// nil for none.
	OutputSchema json.RawMessage
	// MaxConcurrency is how many runs of this tool may be in progress at
	// once; a call beyond it waits for one to end. >= 1.
	MaxConcurrency int
	// Progress opens file descriptor 3 for progress lines.
	Progress    bool
	Annotations *ToolAnnotations
	// Sandbox is how each run is confined: [sandbox] with the entry's own
	// sandbox over it. Home and Hide are the daemon's to set.
	Sandbox sandbox.Policy
	sandbox settledSandbox
}

// Argument is one declared argument of a tool.
type Argument struct {
	Name        string
	Description string
	// Type is "string", "integer", "number", "boolean" or "array" (of
	// strings); "" for an input_schema property that names no one type.
	Type     string
	Required bool
	// Default is used when the call leaves the argument out; nil: none.
	// It holds a string, an int, a float64, a bool or a []string.
	Default any
	// Enum lists the values a string argument may take; nil: any.
	Enum []string
}

// ToolAnnotations are the hints a tool's listing carries (MCP's
// ToolAnnotations).
type ToolAnnotations struct {
	Title           string `key:"title"`
	ReadOnlyHint    *bool  `key:"readOnlyHint"`
	DestructiveHint *bool  `key:"destructiveHint"`
	IdempotentHint  *bool  `key:"idempotentHint"`
	OpenWorldHint   *bool  `key:"openWorldHint"`
}

// toolEntry is a [tools.NAME] entry as written.
type toolEntry struct {
	programEntry
	Title          string                   `key:"title"`
	Description    string                   `key:"description"`
	Input          map[string]argumentEntry `key:"input"`
	InputSchema    *schemaValue             `key:"input_schema"`
	Stdin          *string                  `key:"stdin"`
	Timeout        time.Duration            `key:"timeout,positive"`
	MaxOutputBytes int                      `key:"max_output_bytes,positive"`
	Output         string                   `key:"output,oneof=text|json"`
	OutputSchema   *schemaValue             `key:"output_schema"`
	MaxConcurrency int                      `key:"max_concurrency,positive"`
	Progress       bool                     `key:"progress"`
	// AllowOptionValues silences the warning about a placeholder whose
	// value may start with "-": the program reads such values as it
	// should (or the tool's author wants options through).
	AllowOptionValues bool             `key:"allow_option_values"`
	Annotations       *ToolAnnotations `key:"annotations"`
}

func (t *toolEntry) setDefaults() {
	t.programEntry.setDefaults()
	t.Timeout, t.MaxOutputBytes, t.MaxConcurrency = DefaultToolTimeout, DefaultToolMaxOutputBytes, DefaultToolMaxConcurrency
	t.Output = "text"
}

func init() {
	registerEntrySection(&entrySection{name: "tools", decode: decodeTools})
}

func decodeTools(ctx entryContext, table map[string]any, c *Config) []Problem {
	d := &entryDecoder{}
	eachEntry(d, "tools", "tool", ctx.Source, table, func(f field, name string, raw any) {
		var e toolEntry
		e.setDefaults()
		if !f.table(raw, &e) {
			return
		}
		c.Tools = append(c.Tools, *e.tool(f, name, ctx))
	})
	return d.problems
}

// tool makes the Tool of e: provisioning (expansions, the program on the
// child's PATH, the directory), then validation, every problem recorded.
func (e *toolEntry) tool(f field, name string, ctx entryContext) *Tool {
	t := &Tool{
		Name: name, Title: e.Title, Description: e.Description, Timeout: e.Timeout, MaxOutputBytes: e.MaxOutputBytes,
		Output: e.Output, MaxConcurrency: e.MaxConcurrency, Progress: e.Progress, Annotations: e.Annotations,
	}
	r := ctx.rules(false)
	t.Program = e.provision(f, r)
	home := t.Program.Env["HOME"]
	if _, set := t.Program.Env["HOME"]; !set && t.Program.InheritEnv.Allows("HOME") {
		home = ctx.Env["HOME"]
	}
	if home == "" {
		home = "/"
	}
	rendered := t.Program.Render("", home, environ(ctx.Env))
	t.Dir, t.Env = rendered.Dir, rendered.Env
	fixed := false // the program is no placeholder
	if t.Program.Command != "" {
		program := parseText(t.Program.Command)
		fixed = len(program) == 1 && program[0].Arg == ""
		if fixed && !e.shellLine() {
			t.Path = resolveCommand(f.child("command"), t.Program.Command, t.Env, r)
		}
	}
	if t.Program.Cwd != "" {
		checkDir(f.child("cwd"), t.Dir)
	}
	t.sandbox = e.Sandbox.settle(f, r)
	t.Arguments, t.InputSchema = e.input(f)
	if e.OutputSchema != nil {
		t.OutputSchema = e.OutputSchema.raw
	}

	// Validation.
	e.validate(f)
	if t.Program.Command != "" && !fixed {
		f.child("command").problem("the program (the first element) must be fixed: a placeholder cannot choose it, got " + literal(t.Program.Command))
	}
	if e.OutputSchema != nil && t.Output != "json" {
		f.child("output_schema").problem(`needs output = "json": a text result has no structured content`)
	}
	args := argumentsByName(t.Arguments)
	used := map[string]bool{}
	optionsEnd := false
	fromCommand := 0 // the arguments written in command, before args'
	if e.Command.list {
		fromCommand = len(e.Command.words) - 1
	}
	for i, elem := range t.Program.Args {
		// Element N is command[N] (command[0] is the program), or args[N].
		field, at := "command", fmt.Sprintf("element %d", i+1)
		if i >= fromCommand {
			field, at = "args", fmt.Sprintf("element %d", i-fromCommand)
		}
		text := parseText(elem)
		t.Args = append(t.Args, text)
		checkPlaceholders(f.child(field), at, text, args, used)
		if exact, ok := text.Exact(); !ok || args[exact] == nil {
			for _, p := range text {
				if a := args[p.Arg]; a != nil && a.Type == "array" {
					f.child(field).problem(fmt.Sprintf("%s: the array argument {{%s}} must be a whole element, got %s", at, p.Arg, literal(elem)))
				}
			}
		}
		if !optionsEnd && !e.AllowOptionValues && len(text) > 0 && text[0].Arg != "" && mayStartWithDash(args[text[0].Arg]) {
			f.child(field).warn(fmt.Sprintf(`%s: a value of {{%s}} starting with "-" would be read as an option: put "--" before it if the program takes it, or set allow_option_values = true`, at, text[0].Arg))
		}
		optionsEnd = optionsEnd || elem == "--"
	}
	if e.Stdin != nil {
		t.Stdin, t.HasStdin = parseText(*e.Stdin), true
		checkPlaceholders(f.child("stdin"), "", t.Stdin, args, used)
	}
	for _, a := range t.Arguments {
		if !used[a.Name] {
			f.child("input").warn(fmt.Sprintf("the argument %s is declared but no {{%s}} uses it, in command, args or stdin", a.Name, a.Name))
		}
	}
	return t
}

// checkPlaceholders records the placeholders of text that name no
// argument, and marks the others used.
func checkPlaceholders(f field, where string, text Text, args map[string]*Argument, used map[string]bool) {
	if where != "" {
		where += ": "
	}
	for _, p := range text {
		switch {
		case p.Arg != "" && args[p.Arg] == nil:
			f.problem(fmt.Sprintf("%s{{%s}} names no argument; the arguments are %s", where, p.Arg, argumentList(args)))
		case p.Arg != "":
			used[p.Arg] = true
		case strings.Contains(p.Literal, "{{") && strings.Contains(p.Literal, "}}"):
			f.warn(fmt.Sprintf("%s%s holds {{ and }} that are no placeholder (a placeholder is {{name}}, without spaces); it is passed as it is", where, literal(p.Literal)))
		}
	}
}

func argumentList(args map[string]*Argument) string {
	if len(args) == 0 {
		return "none (declare them with input or input_schema)"
	}
	return strings.Join(slices.Sorted(maps.Keys(args)), ", ")
}

// mayStartWithDash reports whether a value of a can begin with "-".
func mayStartWithDash(a *Argument) bool {
	switch {
	case a == nil || a.Type == "boolean":
		return false
	case a.Enum != nil:
		return slices.ContainsFunc(a.Enum, func(v string) bool { return strings.HasPrefix(v, "-") })
	}
	return true
}

func argumentsByName(list []Argument) map[string]*Argument {
	m := make(map[string]*Argument, len(list))
	for i := range list {
		m[list[i].Name] = &list[i]
	}
	return m
}

// environ is env in os.Environ form, sorted.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
