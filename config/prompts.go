package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
)

// Prompt is one [prompts.NAME] entry: messages rendered from Go
// text/template sources with the call's arguments (catalog/prompts.go
// renders them). A Prompt from Load is valid: every template parses and
// names only declared arguments.
type Prompt struct {
	Name        string
	Title       string
	Description string
	// Arguments are sorted by name.
	Arguments []PromptArgument
	// Messages hold one user message for template or file, or the
	// messages list; each Text is a text/template source.
	Messages []PromptMessage
	// File is the file the template was read from (resolved), "" for
	// none. It is read at load, so a reload picks up its changes.
	File string
}

// PromptArgument is one argument of a prompt. Complete lists the values
// completion/complete proposes for it.
type PromptArgument struct {
	Name        string
	Title       string
	Description string
	Required    bool
	Complete    []string
}

// PromptMessage is one message of a prompt: Role "user" or "assistant",
// Text a text/template source.
type PromptMessage struct {
	Role string
	Text string
}

func init() {
	registerEntrySection(&entrySection{name: "prompts", decode: decodePrompts})
}

func decodePrompts(ctx entryContext, table map[string]any, c *Config) []Problem {
	return eachEntry("prompts", "prompt", ctx, table, func(f *fields, name string) {
		c.Prompts = append(c.Prompts, *decodePrompt(f, name, ctx))
	})
}

func decodePrompt(f *fields, name string, ctx entryContext) *Prompt {
	p := &Prompt{Name: name, Title: f.str("title", ""), Description: f.str("description", "")}
	declared := map[string]bool{}
	if args := f.sub("arguments"); args != nil {
		for _, an := range slices.Sorted(maps.Keys(args.table)) {
			af := args.sub(an)
			if af == nil {
				continue
			}
			if !argumentName.MatchString(an) || strings.Contains(an, "-") {
				af.problem("", "is not a valid argument name: a letter or _, then letters, digits and _ (so that {{."+an+"}} reaches it)")
			}
			p.Arguments = append(p.Arguments, PromptArgument{
				Name:        an,
				Title:       af.str("title", ""),
				Description: af.str("description", ""),
				Required:    af.boolean("required", false),
				Complete:    af.strs("complete", nil),
			})
			declared[an] = true
			af.done()
		}
	}
	given := 0
	for _, field := range []string{"template", "file", "messages"} {
		if f.has(field) {
			given++
		}
	}
	if given != 1 {
		f.problem("", "needs exactly one of template, file or messages, got "+fmt.Sprint(given))
	}
	switch {
	case f.has("template"):
		text := f.str("template", "")
		checkTemplate(f, "template", text, declared)
		p.Messages = []PromptMessage{{Role: "user", Text: text}}
	case f.has("file"):
		p.File = entryPath(f.str("file", ""), ctx)
		b, err := os.ReadFile(p.File)
		if err != nil {
			f.problem("file", fmt.Sprintf("cannot read %s (%v)", p.File, pathErr(err)))
			break
		}
		checkTemplate(f, "file", string(b), declared)
		p.Messages = []PromptMessage{{Role: "user", Text: string(b)}}
	case f.has("messages"):
		p.Messages = promptMessages(f, declared)
	}
	return p
}

// promptMessages reads messages = [{role = "user", text = "…"}, …].
func promptMessages(f *fields, declared map[string]bool) []PromptMessage {
	v, _ := f.get("messages")
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		f.problem("messages", `must be a list of {role = "user" or "assistant", text = "…"}, got `+literal(v))
		return nil
	}
	var out []PromptMessage
	for i, it := range items {
		mf := entryFields(f.prefix, fmt.Sprintf("messages[%d]", i), it, f.src, f.problems)
		if mf == nil {
			continue
		}
		m := PromptMessage{Role: mf.oneOf("role", "user", "user", "assistant"), Text: mf.str("text", "")}
		if !mf.has("text") {
			mf.problem("text", "is required: the message, a Go text/template")
		}
		checkTemplate(mf, "text", m.Text, declared)
		out = append(out, m)
		mf.done()
	}
	return out
}

// checkTemplate parses text as catalog/prompts.go will, and records a
// problem when it does not parse or uses a field that is no argument.
func checkTemplate(f *fields, field, text string, declared map[string]bool) {
	t, err := template.New(f.key(field)).Option("missingkey=error").Parse(text)
	if err != nil {
		f.problem(field, "does not parse as a Go text/template: "+strings.TrimPrefix(err.Error(), "template: "))
		return
	}
	seen := map[string]bool{}
	for _, tt := range t.Templates() {
		if tt.Tree == nil {
			continue
		}
		walkFields(tt.Tree.Root, func(name string) {
			if !declared[name] && !seen[name] {
				seen[name] = true
				f.problem(field, fmt.Sprintf("uses .%s, which is not a declared argument; the arguments are %s", name, promptArgumentList(declared)))
			}
		})
	}
}

func promptArgumentList(declared map[string]bool) string {
	if len(declared) == 0 {
		return "none (declare them under arguments)"
	}
	return strings.Join(slices.Sorted(maps.Keys(declared)), ", ")
}

// walkFields calls found with the first name of every field reference
// (.name) in the tree under n.
func walkFields(n parse.Node, found func(string)) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			walkFields(c, found)
		}
	case *parse.ActionNode:
		walkFields(n.Pipe, found)
	case *parse.PipeNode:
		if n == nil {
			return
		}
		for _, c := range n.Cmds {
			walkFields(c, found)
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			walkFields(a, found)
		}
	case *parse.FieldNode:
		found(n.Ident[0])
	case *parse.ChainNode:
		walkFields(n.Node, found)
	case *parse.IfNode:
		walkBranch(&n.BranchNode, found)
	case *parse.RangeNode:
		walkBranch(&n.BranchNode, found)
	case *parse.WithNode:
		walkBranch(&n.BranchNode, found)
	case *parse.TemplateNode:
		walkFields(n.Pipe, found)
	}
}

func walkBranch(b *parse.BranchNode, found func(string)) {
	walkFields(b.Pipe, found)
	walkFields(b.List, found)
	walkFields(b.ElseList, found)
}
