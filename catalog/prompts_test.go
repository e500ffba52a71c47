package catalog_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
)

const reviewPrompt = `
[prompts.review]
description = "Review a change"
arguments.diff = { description = "the diff to review", required = true }
arguments.focus = { description = "what to look at", complete = ["security", "performance", "style", "Speed"] }
template = """Review this change{{if .focus}} with a focus on {{.focus}}{{end}}:

{{.diff}}"""

[prompts.chat]
arguments.q = { required = true }
messages = [{ role = "user", text = "{{.q}}" }, { role = "assistant", text = "Let me look." }]

[prompts.file]
file = "prompt.md"
arguments.name = {}
`

type gotPrompt struct {
	Description string
	Messages    []struct {
		Role    string
		Content struct{ Type, Text string }
	}
}

func TestPrompts(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "prompt.md", "Hello {{.name}}!")
	_, srv := newHost(t, loadConfig(t, dir, reviewPrompt), catalog.HostOptions{})
	for _, version := range []string{"2025-06-18", v2026} {
		c := newClient(t, srv, version, `{}`)
		list := result[struct {
			Prompts []struct {
				Name, Description string
				Arguments         []struct {
					Name, Description string
					Required          bool
				}
			}
		}](t, c, t.Context(), "prompts/list", nil)
		if len(list.Prompts) != 3 || list.Prompts[2].Name != "review" || list.Prompts[2].Description != "Review a change" ||
			len(list.Prompts[2].Arguments) != 2 || !list.Prompts[2].Arguments[0].Required || list.Prompts[2].Arguments[1].Name != "focus" {
			t.Errorf("%s: prompts = %+v", version, list.Prompts)
		}
		for _, tc := range []struct {
			name string
			args map[string]string
			want []string // role: text
		}{
			{"review", map[string]string{"diff": "+x", "focus": "style"}, []string{"user: Review this change with a focus on style:\n\n+x"}},
			{"review", map[string]string{"diff": "+x"}, []string{"user: Review this change:\n\n+x"}},
			{"review", map[string]string{"diff": "<&>", "extra": "ignored"}, []string{"user: Review this change:\n\n<&>"}},
			{"chat", map[string]string{"q": "why?"}, []string{"user: why?", "assistant: Let me look."}},
			{"file", nil, []string{"user: Hello !"}},
		} {
			params := map[string]any{"name": tc.name}
			if tc.args != nil {
				params["arguments"] = tc.args
			}
			res := result[gotPrompt](t, c, t.Context(), "prompts/get", params)
			var got []string
			for _, m := range res.Messages {
				got = append(got, m.Role+": "+m.Content.Text)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s: %s %v = %q, want %q", version, tc.name, tc.args, got, tc.want)
			}
		}
		_, perr := c.call(t.Context(), "prompts/get", map[string]any{"name": "review", "arguments": map[string]string{"focus": "x"}})
		if !errIs(perr, protocol.CodeInvalidParams, "Missing required prompt arguments: diff") {
			t.Errorf("%s: without diff: %+v", version, perr)
		}
	}
}

func TestPromptCompletion(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "prompt.md", "x")
	_, srv := newHost(t, loadConfig(t, dir, reviewPrompt), catalog.HostOptions{})
	c := newClient(t, srv, "2025-11-25", `{}`)
	for _, tc := range []struct {
		arg, value string
		want       []string
	}{
		{"focus", "s", []string{"security", "style", "Speed"}},
		{"focus", "SE", []string{"security"}},
		{"focus", "", []string{"security", "performance", "style", "Speed"}},
		{"focus", "x", []string{}},
		{"diff", "a", []string{}},
	} {
		res := result[struct {
			Completion struct {
				Values []string
				Total  int
			}
		}](t, c, t.Context(), "completion/complete", map[string]any{
			"ref":      map[string]any{"type": "ref/prompt", "name": "review"},
			"argument": map[string]any{"name": tc.arg, "value": tc.value}})
		if !slices.Equal(res.Completion.Values, tc.want) || res.Completion.Total != len(tc.want) {
			t.Errorf("complete %s=%q = %+v, want %q", tc.arg, tc.value, res.Completion, tc.want)
		}
	}
}

// TestPromptFileReadOnReload: file = is read when the configuration is
// loaded, so a reload serves its new text.
func TestPromptFileReadOnReload(t *testing.T) {
	dir := t.TempDir()
	path := write(t, dir, "prompt.md", "first {{.name}}")
	h, srv := newHost(t, loadConfig(t, dir, reviewPrompt), catalog.HostOptions{})
	c := newClient(t, srv, "2025-11-25", `{}`)
	write(t, dir, filepath.Base(path), "second {{.name}}")
	if _, err := h.Apply(loadConfig(t, dir, reviewPrompt)); err != nil {
		t.Fatal(err)
	}
	res := result[gotPrompt](t, c, t.Context(), "prompts/get", map[string]any{"name": "file", "arguments": map[string]string{"name": "x"}})
	if len(res.Messages) != 1 || res.Messages[0].Content.Text != "second x" {
		t.Errorf("after the reload: %+v", res)
	}
	ev, ok, _ := c.sess.Poll()
	if !ok || ev.Method != "notifications/prompts/list_changed" {
		t.Errorf("the reload announced %+v %v, want the prompt list change", ev, ok)
	}
	if ev, ok, _ := c.sess.Poll(); ok {
		t.Errorf("then %+v: only the changed prompt's list is announced", ev)
	}
}
