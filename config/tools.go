package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
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
	// Program is the command's first element resolved: an absolute path.
	Program string
	// Args are the command's other elements with their placeholders
	// parsed; each becomes zero, one or (an array argument's) several
	// elements of argv.
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
	Title           string
	ReadOnlyHint    *bool
	DestructiveHint *bool
	IdempotentHint  *bool
	OpenWorldHint   *bool
}

// argumentTypes are the types input accepts.
var argumentTypes = []string{"string", "integer", "number", "boolean", "array"}

func init() {
	registerEntrySection(&entrySection{name: "tools", decode: decodeTools})
}

func decodeTools(ctx entryContext, table map[string]any, c *Config) []Problem {
	return eachEntry("tools", "tool", ctx, table, func(f *fields, name string) {
		if t := decodeTool(f, name, ctx); t != nil {
			c.Tools = append(c.Tools, *t)
		}
	})
}

func decodeTool(f *fields, name string, ctx entryContext) *Tool {
	t := &Tool{
		Name:           name,
		Title:          f.str("title", ""),
		Description:    f.str("description", ""),
		Timeout:        f.positiveDuration("timeout", DefaultToolTimeout),
		MaxOutputBytes: f.positiveInt("max_output_bytes", DefaultToolMaxOutputBytes),
		Output:         f.oneOf("output", "text", "text", "json"),
		MaxConcurrency: f.positiveInt("max_concurrency", DefaultToolMaxConcurrency),
		Progress:       f.boolean("progress", false),
		Annotations:    toolAnnotations(f.sub("annotations")),
	}
	t.Env = childEnv(f, ctx)
	t.Dir = childDir(f, ctx, t.Env)
	t.Arguments, t.InputSchema = toolInput(f)
	if f.has("output_schema") {
		t.OutputSchema = schemaField(f, "output_schema")
		if t.Output != "json" {
			f.problem("output_schema", `needs output = "json": a text result has no structured content`)
		}
	}
	if !f.has("command") {
		f.problem("command", `is required: the program and its arguments, such as ["rg", "--", "{{pattern}}"]`)
		return t
	}
	command := f.strs("command", nil)
	if command != nil && len(command) == 0 {
		f.problem("command", "must name the program to run, got []")
	}
	if len(command) == 0 {
		return t
	}
	if program := parseText(command[0]); len(program) != 1 || program[0].Arg != "" {
		f.problem("command", "the program (the first element) must be fixed: a placeholder cannot choose it, got "+literal(command[0]))
	} else {
		t.Program = resolveProgram(f, "command", command[0], ctx, t.Env)
	}
	args := argumentsByName(t.Arguments)
	used := map[string]bool{}
	optionsEnd := false
	for i, elem := range command[1:] {
		text := parseText(elem)
		t.Args = append(t.Args, text)
		checkPlaceholders(f, "command", fmt.Sprintf("element %d", i+1), text, args, used)
		if exact, ok := text.Exact(); ok && args[exact] != nil {
			// an array expands to several elements, which is fine only here
		} else {
			for _, p := range text {
				if a := args[p.Arg]; a != nil && a.Type == "array" {
					f.problem("command", fmt.Sprintf("element %d: the array argument {{%s}} must be a whole element, got %s", i+1, p.Arg, literal(elem)))
				}
			}
		}
		if !optionsEnd && len(text) > 0 && text[0].Arg != "" && mayStartWithDash(args[text[0].Arg]) {
			f.warn("command", fmt.Sprintf(`element %d: a value of {{%s}} starting with "-" would be read as an option: put "--" before it, if the program takes it`, i+1, text[0].Arg))
		}
		optionsEnd = optionsEnd || elem == "--"
	}
	if f.has("stdin") {
		t.Stdin, t.HasStdin = parseText(f.str("stdin", "")), true
		checkPlaceholders(f, "stdin", "", t.Stdin, args, used)
	}
	for _, a := range t.Arguments {
		if !used[a.Name] {
			f.warn("input", fmt.Sprintf("the argument %s is declared but no {{%s}} uses it, in command or stdin", a.Name, a.Name))
		}
	}
	return t
}

// checkPlaceholders records the placeholders of text that name no
// argument, and marks the others used.
func checkPlaceholders(f *fields, field, where string, text Text, args map[string]*Argument, used map[string]bool) {
	if where != "" {
		where += ": "
	}
	for _, p := range text {
		switch {
		case p.Arg != "" && args[p.Arg] == nil:
			f.problem(field, fmt.Sprintf("%s{{%s}} names no argument; the arguments are %s", where, p.Arg, argumentList(args)))
		case p.Arg != "":
			used[p.Arg] = true
		case strings.Contains(p.Literal, "{{") && strings.Contains(p.Literal, "}}"):
			f.warn(field, fmt.Sprintf("%s%s holds {{ and }} that are no placeholder (a placeholder is {{name}}, without spaces); it is passed as it is", where, literal(p.Literal)))
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

func toolAnnotations(f *fields) *ToolAnnotations {
	if f == nil {
		return nil
	}
	hint := func(name string) *bool {
		if !f.has(name) {
			return nil
		}
		b := f.boolean(name, false)
		return &b
	}
	a := &ToolAnnotations{
		Title:           f.str("title", ""),
		ReadOnlyHint:    hint("readOnlyHint"),
		DestructiveHint: hint("destructiveHint"),
		IdempotentHint:  hint("idempotentHint"),
		OpenWorldHint:   hint("openWorldHint"),
	}
	f.done()
	return a
}
