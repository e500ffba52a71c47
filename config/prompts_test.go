package config

import (
	"slices"
	"strings"
	"testing"
)

func TestPromptLoads(t *testing.T) {
	file := writeFile(t, "review.md", "Review {{.diff}}")
	path := writeFile(t, "config.toml", `
[prompts.review]
description = "Review a change"
arguments.diff = { description = "the diff to review", required = true }
arguments.focus = { description = "what to look at", complete = ["security", "performance", "style"] }
template = """Review this change{{if .focus}} with a focus on {{.focus}}{{end}}:

{{.diff}}"""

[prompts.from_file]
arguments.diff = {}
file = "`+file+`"

[prompts.chat]
arguments.q = { required = true }
messages = [{ role = "user", text = "{{.q}}" }, { role = "assistant", text = "Let me look." }, { text = "go on" }]
`)
	c := mustLoad(t, Options{File: path, Env: testEnv(t)})
	if len(c.Prompts) != 3 {
		t.Fatalf("prompts = %+v", c.Prompts)
	}
	chat, ff, review := c.Prompts[0], c.Prompts[1], c.Prompts[2]
	if review.Name != "review" || review.Description != "Review a change" || len(review.Arguments) != 2 ||
		review.Arguments[0].Name != "diff" || review.Arguments[0].Description != "the diff to review" || !review.Arguments[0].Required {
		t.Errorf("review = %+v", review)
	}
	if a := review.Arguments[1]; a.Name != "focus" || a.Required || !slices.Equal(a.Complete, []string{"security", "performance", "style"}) {
		t.Errorf("focus = %+v", a)
	}
	if len(review.Messages) != 1 || review.Messages[0].Role != "user" || !strings.HasPrefix(review.Messages[0].Text, "Review this change{{if") {
		t.Errorf("review messages = %+v", review.Messages)
	}
	if ff.File != file || len(ff.Messages) != 1 || ff.Messages[0].Text != "Review {{.diff}}" {
		t.Errorf("from_file = %+v", ff)
	}
	want := []PromptMessage{{"user", "{{.q}}"}, {"assistant", "Let me look."}, {"user", "go on"}}
	if !slices.Equal(chat.Messages, want) {
		t.Errorf("chat messages = %+v, want %+v", chat.Messages, want)
	}
}

func TestPromptProblems(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		want        []string
	}{
		{"none", `description = "x"`, []string{"prompts.p: needs exactly one of template, file or messages, got 0"}},
		{"two", "template = \"a\"\nfile = \"b\"", []string{"prompts.p: needs exactly one of template, file or messages, got 2"}},
		{"does not parse", `template = "{{if .x}}"
arguments.x = {}`, []string{"prompts.p.template: does not parse as a Go text/template: prompts.p.template:1: unexpected EOF"}},
		{"undeclared", `template = "{{.diff}} {{if .focus}}{{.focus}}{{else}}{{.fcous}}{{end}} {{.diff.x}}"
arguments.diff = {}
arguments.focus = {}`, []string{"prompts.p.template: uses .fcous, which is not a declared argument; the arguments are diff, focus"}},
		{"no arguments", `template = "{{.x}}"`, []string{"prompts.p.template: uses .x, which is not a declared argument; the arguments are none (declare them under arguments)"}},
		{"missing file", `file = "/nonexistent/p.md"`, []string{"prompts.p.file: cannot read /nonexistent/p.md (no such file or directory)"}},
		{"bad messages", `messages = [{ role = "system", text = "x" }, { txt = "y" }, 3]`, []string{
			`prompts.p.messages[0].role: must be "user" or "assistant", got "system"`,
			"prompts.p.messages[1].text: is required: the message, a Go text/template",
			`unknown key "prompts.p.messages[1].txt"; did you mean "prompts.p.messages[1].text"?`,
			`prompts.p.messages[2]: must be a table, got 3`,
		}},
		{"empty messages", `messages = []`, []string{`prompts.p.messages: must be a list of {role = "user" or "assistant", text = "…"}, got []`}},
		{"bad arguments", `template = "x"
arguments.a-b = { required = "yes", complete = "x" }
arguments.c = { completion = [] }`, []string{
			"prompts.p.arguments.a-b: is not a valid argument name: a letter or _, then letters, digits and _ (so that {{.a-b}} reaches it)",
			`prompts.p.arguments.a-b.complete: must be a list of strings, got "x"`,
			`prompts.p.arguments.a-b.required: must be true or false, got "yes"`,
			`unknown key "prompts.p.arguments.c.completion"; did you mean "prompts.p.arguments.c.complete"?`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "config.toml", "[prompts.p]\n"+tc.entry+"\n")
			if got := checkLines(t, Options{File: path, Env: testEnv(t)}); !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
