package catalog

import (
	"context"
	"fmt"
	"strings"
	"text/template"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/server"
)

// addPrompt registers a [prompts.NAME] entry on s: its messages are
// rendered with Go text/template (missingkey=error), every declared
// argument present ("" when the call leaves it out, so {{if .x}} works),
// and completion/complete proposes each argument's complete values that
// start with what was typed. config parsed and checked the templates
// already; an error here is a programming error.
func addPrompt(s *server.Server, p config.Prompt) error {
	templates := make([]*template.Template, len(p.Messages))
	for i, m := range p.Messages {
		t, err := template.New(fmt.Sprintf("prompts.%s message %d", p.Name, i)).Option("missingkey=error").Parse(m.Text)
		if err != nil {
			return fmt.Errorf("prompts.%s: %w", p.Name, err)
		}
		templates[i] = t
	}
	args := make([]server.PromptArgument, len(p.Arguments))
	for i, a := range p.Arguments {
		args[i] = server.PromptArgument{Name: a.Name, Title: a.Title, Description: a.Description, Required: a.Required}
	}
	s.AddPrompt(&server.Prompt{Name: p.Name, Title: p.Title, Description: p.Description, Arguments: args},
		func(_ context.Context, req *server.GetPromptRequest) (*server.GetPromptResult, error) {
			data := make(map[string]string, len(p.Arguments))
			for _, a := range p.Arguments {
				data[a.Name] = req.Arguments[a.Name]
			}
			res := &server.GetPromptResult{Description: p.Description}
			for i, t := range templates {
				var b strings.Builder
				if err := t.Execute(&b, data); err != nil {
					return nil, fmt.Errorf("render prompts.%s: %w", p.Name, err)
				}
				res.Messages = append(res.Messages, server.PromptMessage{Role: p.Messages[i].Role, Content: server.TextContent(b.String())})
			}
			return res, nil
		})
	for _, a := range p.Arguments {
		if a.Complete == nil {
			continue
		}
		values := a.Complete
		lowered := make([]string, len(values)) // once, not on every completion/complete
		for i, v := range values {
			lowered[i] = strings.ToLower(v)
		}
		s.AddPromptCompletion(p.Name, a.Name, func(_ context.Context, typed string, _ map[string]string) ([]string, error) {
			typed = strings.ToLower(typed)
			out := []string{}
			for i, v := range values {
				if strings.HasPrefix(lowered[i], typed) {
					out = append(out, v)
				}
			}
			return out, nil
		})
	}
	return nil
}
