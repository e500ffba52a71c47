package server

import (
	"context"
	"fmt"
)

// AddTool registers t, replacing a tool of the same name, and tells
// subscribed sessions the tool list changed. It panics on a programmer
// error: an empty name, a nil handler, or a schema that does not compile.
// For typed arguments and output, use the generic AddTool function.
func (s *Server) AddTool(t *Tool, h ToolHandler) {
	if t == nil || t.Name == "" || h == nil {
		panic("server: AddTool needs a named tool and a handler")
	}
	e := &toolEntry{tool: *t, handler: h}
	var err error
	if e.input, err = compileSchema(t.InputSchema); err != nil {
		panic(fmt.Sprintf("server: tool %q: input schema: %v", t.Name, err))
	}
	if t.OutputSchema != nil {
		if e.output, err = compileSchema(t.OutputSchema); err != nil {
			panic(fmt.Sprintf("server: tool %q: output schema: %v", t.Name, err))
		}
	}
	// Listings show the schemas as compiled (the entry's own copies, not
	// the caller's slices), set once here rather than at every listing.
	e.tool.InputSchema = e.input.json()
	e.paramHeaders = paramHeaders(e.tool.InputSchema)
	if e.output != nil {
		e.tool.OutputSchema = e.output.json()
	}
	s.change(func() { s.tools[t.Name] = e }, change{kind: changeTools})
}

// RemoveTools removes the named tools; names not registered are ignored.
func (s *Server) RemoveTools(names ...string) {
	s.change(func() {
		for _, n := range names {
			delete(s.tools, n)
		}
	}, change{kind: changeTools})
}

// AddResource registers r, replacing a resource with the same URI.
func (s *Server) AddResource(r *Resource, h ResourceHandler) {
	if r == nil || r.URI == "" || h == nil {
		panic("server: AddResource needs a resource with a URI and a handler")
	}
	e := &resourceEntry{resource: *r, handler: h}
	s.change(func() { s.resources[r.URI] = e }, change{kind: changeResources})
}

// RemoveResources removes the resources with these URIs.
func (s *Server) RemoveResources(uris ...string) {
	s.change(func() {
		for _, u := range uris {
			delete(s.resources, u)
		}
	}, change{kind: changeResources})
}

// AddResourceTemplate registers a template (level-1 RFC 6570: {var}
// expansions match one or more characters other than "/"), replacing one
// with the same URI template.
func (s *Server) AddResourceTemplate(t *ResourceTemplate, h ResourceHandler) {
	if t == nil || t.URITemplate == "" || h == nil {
		panic("server: AddResourceTemplate needs a URI template and a handler")
	}
	m, err := compileTemplate(t.URITemplate)
	if err != nil {
		panic(fmt.Sprintf("server: template %q: %v", t.URITemplate, err))
	}
	e := &templateEntry{template: *t, handler: h, match: m}
	s.change(func() { s.templates[t.URITemplate] = e }, change{kind: changeResources})
}

// AddPrompt registers p, replacing a prompt of the same name.
func (s *Server) AddPrompt(p *Prompt, h PromptHandler) {
	if p == nil || p.Name == "" || h == nil {
		panic("server: AddPrompt needs a named prompt and a handler")
	}
	e := &promptEntry{prompt: *p, handler: h}
	s.change(func() { s.prompts[p.Name] = e }, change{kind: changePrompts})
}

// RemovePrompts removes the named prompts.
func (s *Server) RemovePrompts(names ...string) {
	s.change(func() {
		for _, n := range names {
			delete(s.prompts, n)
		}
	}, change{kind: changePrompts})
}

// AddPromptCompletion completes argument arg of the named prompt, which must
// already be registered.
func (s *Server) AddPromptCompletion(prompt, arg string, h CompletionHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.prompts[prompt]
	if !ok || h == nil {
		panic(fmt.Sprintf("server: AddPromptCompletion: no prompt %q, or no handler", prompt))
	}
	if e.completions == nil {
		e.completions = map[string]CompletionHandler{}
	}
	e.completions[arg] = h
	s.updateCapabilitiesLocked()
}

// AddTemplateCompletion completes variable arg of the resource template,
// which must already be registered.
func (s *Server) AddTemplateCompletion(uriTemplate, arg string, h CompletionHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.templates[uriTemplate]
	if !ok || h == nil {
		panic(fmt.Sprintf("server: AddTemplateCompletion: no template %q, or no handler", uriTemplate))
	}
	if e.completions == nil {
		e.completions = map[string]CompletionHandler{}
	}
	e.completions[arg] = h
	s.updateCapabilitiesLocked()
}

// ResourceUpdated tells sessions subscribed to uri that it changed. It
// never blocks.
func (s *Server) ResourceUpdated(uri string) {
	s.hub.publish(change{kind: changeResourceUpdated, uri: uri})
}

// change applies a catalog mutation under the lock, bumps the revision
// (which invalidates pagination cursors) and notifies subscribers.
func (s *Server) change(apply func(), c change) {
	s.mu.Lock()
	apply()
	s.revision++
	s.updateCapabilitiesLocked()
	s.mu.Unlock()
	s.hub.publish(c)
}

// Log sends a log message for the request ctx belongs to (docs/protocol.md §11):
// in legacy eras, a notifications/message before the request's final line
// when level is at or above the session's threshold; never in 2026. level
// is one of debug, info, notice, warning, error, critical, alert,
// emergency; logger may be empty. It never fails the handler: a message
// that cannot be delivered is dropped.
func Log(ctx context.Context, level, logger string, data any) {
	if l, ok := ctx.Value(legacyKey{}).(*legacyCall); ok {
		l.log(level, logger, data)
	}
}
