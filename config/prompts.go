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

// promptEntry is a [prompts.NAME] entry as written.
type promptEntry struct {
	Title       string                         `key:"title"`
	Description string                         `key:"description"`
	Arguments   map[string]promptArgumentEntry `key:"arguments"`
	Template    *string                        `key:"template"`
	File        *string                        `key:"file"`
	Messages    messageList                    `key:"messages"`
}

type promptArgumentEntry struct {
	Title       string   `key:"title"`
	Description string   `key:"description"`
	Required    bool     `key:"required"`
	Complete    []string `key:"complete"`
}

type messageEntry struct {
	Role string  `key:"role,oneof=user|assistant"`
	Text *string `key:"text"`
}

func (m *messageEntry) setDefaults() { m.Role = "user" }

// messageList is messages: a list of tables, at least one.
type messageList struct {
	given bool
	items []messageEntry
}

func (ml *messageList) decodeEntry(f field, raw any) {
	ml.given = true
	items, ok := raw.([]any)
	if !ok || len(items) == 0 {
		f.problem(`must be a list of {role = "user" or "assistant", text = "…"}, got ` + literal(raw))
		return
	}
	for i, it := range items {
		m := messageEntry{}
		m.setDefaults()
		at := f
		at.key += fmt.Sprintf("[%d]", i)
		if at.table(it, &m) {
			ml.items = append(ml.items, m)
		}
	}
}

func init() {
	registerEntrySection(&entrySection{name: "prompts", decode: decodePrompts})
}

func decodePrompts(ctx entryContext, table map[string]any, c *Config) []Problem {
	d := &entryDecoder{}
	eachEntry(d, "prompts", "prompt", ctx.Source, table, func(f field, name string, raw any) {
		var e promptEntry
		if f.table(raw, &e) {
			c.Prompts = append(c.Prompts, *e.prompt(f, name, ctx))
		}
	})
	return d.problems
}

// prompt reads e's file and checks its templates.
func (e *promptEntry) prompt(f field, name string, ctx entryContext) *Prompt {
	p := &Prompt{Name: name, Title: e.Title, Description: e.Description}
	declared := map[string]bool{}
	for _, an := range slices.Sorted(maps.Keys(e.Arguments)) {
		a := e.Arguments[an]
		if !argumentName.MatchString(an) || strings.Contains(an, "-") {
			f.child("arguments").child(an).problem("is not a valid argument name: a letter or _, then letters, digits and _ (so that {{." + an + "}} reaches it)")
		}
		p.Arguments = append(p.Arguments, PromptArgument{Name: an, Title: a.Title, Description: a.Description, Required: a.Required, Complete: a.Complete})
		declared[an] = true
	}
	given := 0
	for _, g := range []bool{e.Template != nil, e.File != nil, e.Messages.given} {
		if g {
			given++
		}
	}
	if given != 1 {
		f.problem("needs exactly one of template, file or messages, got " + fmt.Sprint(given))
	}
	switch {
	case e.Template != nil:
		checkTemplate(f.child("template"), *e.Template, declared)
		p.Messages = []PromptMessage{{Role: "user", Text: *e.Template}}
	case e.File != nil:
		p.File = ctx.path(*e.File)
		b, err := os.ReadFile(p.File)
		if err != nil {
			f.child("file").problem(fmt.Sprintf("cannot read %s (%v)", p.File, pathErr(err)))
			break
		}
		checkTemplate(f.child("file"), string(b), declared)
		p.Messages = []PromptMessage{{Role: "user", Text: string(b)}}
	case e.Messages.given:
		for i, m := range e.Messages.items {
			mf := f.child("messages")
			mf.key += fmt.Sprintf("[%d]", i)
			if m.Text == nil {
				mf.child("text").problem("is required: the message, a Go text/template")
				m.Text = new(string)
			}
			checkTemplate(mf.child("text"), *m.Text, declared)
			p.Messages = append(p.Messages, PromptMessage{Role: m.Role, Text: *m.Text})
		}
	}
	return p
}

// checkTemplate parses text as catalog/prompts.go will, and records a
// problem when it does not parse or uses a field that is no argument.
func checkTemplate(f field, text string, declared map[string]bool) {
	t, err := template.New(f.key).Option("missingkey=error").Parse(text)
	if err != nil {
		f.problem("does not parse as a Go text/template: " + strings.TrimPrefix(err.Error(), "template: "))
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
				f.problem(fmt.Sprintf("uses .%s, which is not a declared argument; the arguments are %s", name, promptArgumentList(declared)))
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
