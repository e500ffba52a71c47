package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/snodod/snodod/protocol"
)

// now is the clock of requestState expiry; tests may replace it.
var now = time.Now

var errToolOutput = &protocol.Error{Code: protocol.CodeInternalError, Message: "Tool produced invalid structured content"}

type callToolWire struct {
	ResultType        string          `json:"resultType,omitempty"`
	Content           []Content       `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError"`
	Meta              any             `json:"_meta,omitempty"` // map[string]any, or json.RawMessage already encoded
}

// toolResult shapes a tool's result for the request's era (§6.4).
func (c *call) toolResult(res *CallToolResult, structured json.RawMessage) Outcome {
	w := callToolWire{Content: res.Content, StructuredContent: structured, IsError: res.IsError}
	if len(res.Meta) > 0 {
		w.Meta = res.Meta // a nil map in an interface would be written as null
	}
	if !c.modern && structured != nil && structured[0] != '{' {
		w.StructuredContent = nil // legacy eras keep only an object
	}
	if len(w.Content) == 0 {
		if structured != nil {
			w.Content = []Content{TextContent(string(structured))}
		} else {
			w.Content = []Content{}
		}
	}
	if c.modern {
		w.ResultType, w.Meta = "complete", c.resultMeta(res.Meta)
	}
	c.wire = w // a pointer in the outcome: no copy boxed apart from the call
	return Outcome{Result: &c.wire}
}

func (c *call) toolFailure(text string) Outcome {
	return c.toolResult(&CallToolResult{Content: []Content{TextContent(text)}, IsError: true}, nil)
}

func (c *call) callTool(ctx context.Context) Outcome {
	name, ok := stringParam(c.split.Members, "name")
	if !ok {
		return invalidParams("tools/call requires a string name")
	}
	c.s.mu.RLock()
	e := c.s.tools[name]
	c.s.mu.RUnlock()
	if e != nil {
		c.item = name
	}
	if e != nil && e.relay != nil {
		// The relayed server judges its arguments (a client's null among them).
		c.owner = e.relay.owner
		return c.relay(ctx, e.relay.handler, name)
	}
	args := c.split.Members.Value("arguments")
	if args == nil {
		args = json.RawMessage("{}")
	} else if protocol.JSONKind(args) != '{' {
		return invalidParams("tools/call arguments must be an object")
	}
	if e == nil || !c.visible(e) {
		note, _ := c.s.outsideView()
		return invalidParams("Unknown tool: " + name + note)
	}
	ctx, in, fail := c.mrtr(ctx)
	if fail != nil {
		return *fail
	}
	req := &c.tool
	*req = CallToolRequest{Name: name, Arguments: args, Version: c.version, ClientCapabilities: c.clientCaps(), ProgressToken: c.progressToken()}
	// The decoder split the arguments already (Split.Arguments).
	failure, split, splitOK := e.input.validateSplit(args, c.split.Arguments, c.split.ArgumentsObject)
	if failure != "" {
		if c.version == protocol.Version20250618 {
			return errOutcome(&protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid tool arguments",
				Data: map[string]string{"detail": failure}})
		}
		return c.toolFailure(failure)
	}
	req.args, req.argsOK = split, splitOK // the typed decoder splits nothing again
	res, err, panicked := c.runTool(ctx, e, req)
	if panicked {
		return errOutcome(protocol.ErrToolPanicked)
	}
	if o, handled := c.handlerError(in, err); handled {
		return o
	}
	if err != nil {
		return c.toolFailure(err.Error())
	}
	if res == nil {
		return errOutcome(protocol.ErrInvalidResult)
	}
	var structured json.RawMessage
	if res.StructuredContent != nil {
		// As every frame, it leaves <, > and & as they are (docs/transport.md
		// §11.1), which json.Marshal would not.
		if structured, err = protocol.AppendValue(nil, res.StructuredContent); err != nil {
			c.s.log.Error("tool produced unencodable structured content", "tool", name, "err", err)
			return errOutcome(errToolOutput)
		}
	}
	if e.output != nil && !res.IsError {
		var v any
		if structured == nil || json.Unmarshal(structured, &v) != nil || e.output.validateValue(v) != nil {
			return errOutcome(errToolOutput)
		}
	}
	return c.toolResult(res, structured)
}

// runTool runs a tool handler, recovering a panic (§6.4: answered without
// detail; the stack goes to the log).
func (c *call) runTool(ctx context.Context, e *toolEntry, req *CallToolRequest) (res *CallToolResult, err error, panicked bool) {
	defer func() {
		if v := recover(); v != nil {
			c.s.log.Error("tool handler panicked", "tool", req.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			panicked = true
		}
	}()
	res, err = e.handler(ctx, req)
	return res, err, false
}

// progressToken decodes params._meta.progressToken, if any.
func (c *call) progressToken() any {
	var raw json.RawMessage
	if c.modern {
		raw = c.meta.ProgressToken
	} else {
		raw = c.split.Meta.Value("progressToken")
	}
	if raw == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

func (c *call) notFound(uri string) Outcome {
	code := int64(protocol.CodeResourceNotFound)
	note, view := c.s.outsideView()
	if c.modern || view {
		code = protocol.CodeInvalidParams
	}
	return errOutcome(&protocol.Error{Code: code, Message: "Resource not found" + note, Data: map[string]string{"uri": uri}})
}

func (c *call) readResource(ctx context.Context) Outcome {
	uri, ok := stringParam(c.split.Members, "uri")
	if !ok {
		return invalidParams("resources/read requires a string uri")
	}
	c.uri = uri
	handler, vars, relay := c.s.findResource(uri)
	if relay != nil {
		if c.observing {
			c.owner, _ = c.s.RelayOwner(uri) // "" for the read fallback
		}
		return c.relay(ctx, relay, uri)
	}
	if handler == nil {
		return c.notFound(uri)
	}
	ctx, in, fail := c.mrtr(ctx)
	if fail != nil {
		return *fail
	}
	res, err := handler(ctx, &ReadResourceRequest{URI: uri, Params: vars, Version: c.version})
	if o, handled := c.handlerError(in, err); handled {
		return o
	}
	if errors.Is(err, ErrResourceNotFound) || err == nil && (res == nil || len(res.Contents) == 0) {
		return c.notFound(uri)
	}
	if perr := refusal(err); perr != nil {
		return errOutcome(perr)
	}
	if err != nil {
		c.logFailure(ctx, err, "resource read failed", "uri", uri)
		return errOutcome(errInternal)
	}
	return c.result(struct {
		Contents []ResourceContents `json:"contents"`
	}{res.Contents}, true, res)
}

// findResource matches uri against the resources, then the templates in
// the order of their URI templates, then the relay fallback; a relayed
// match returns its handler as relay.
func (s *Server) findResource(uri string) (h ResourceHandler, vars map[string]string, relay RawHandler) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, t, vars := s.resourceForLocked(uri)
	switch {
	case r != nil && r.relay != nil:
		return nil, nil, r.relay.handler
	case r != nil:
		return r.handler, nil, nil
	case t != nil && t.relay != nil:
		return nil, nil, t.relay.handler
	case t != nil:
		return t.handler, vars, nil
	}
	return nil, nil, s.ext.readFallback
}

// resourceForLocked finds what serves a read of uri: the resource of that
// URI, else the first template, in the order of their URI templates, that
// matches it, with its variables; both nil when none does. s.mu is held.
func (s *Server) resourceForLocked(uri string) (*resourceEntry, *templateEntry, map[string]string) {
	if e, ok := s.resources[uri]; ok {
		return e, nil, nil
	}
	for _, k := range s.templateOrder {
		if vars, ok := s.templates[k].match.match(uri); ok {
			return nil, s.templates[k], vars
		}
	}
	return nil, nil, nil
}

func (c *call) getPrompt(ctx context.Context) Outcome {
	name, ok := stringParam(c.split.Members, "name")
	if !ok {
		return invalidParams("prompts/get requires a string name")
	}
	args, ok := stringMap(c.split.Members.Value("arguments"))
	if !ok {
		return invalidParams("prompts/get arguments must be an object of strings")
	}
	c.s.mu.RLock()
	e := c.s.prompts[name]
	c.s.mu.RUnlock()
	if e != nil {
		c.item = name
	}
	if e != nil && e.relay != nil {
		c.owner = e.relay.owner
		return c.relay(ctx, e.relay.handler, name)
	}
	if e == nil {
		note, _ := c.s.outsideView()
		return invalidParams("Unknown prompt: " + name + note)
	}
	var missing []string
	for _, a := range e.prompt.Arguments {
		if _, ok := args[a.Name]; a.Required && !ok {
			missing = append(missing, a.Name)
		}
	}
	if missing != nil {
		return invalidParams("Missing required prompt arguments: " + strings.Join(missing, ", "))
	}
	ctx, in, fail := c.mrtr(ctx)
	if fail != nil {
		return *fail
	}
	res, err := e.handler(ctx, &GetPromptRequest{Name: name, Arguments: args, Version: c.version})
	if o, handled := c.handlerError(in, err); handled {
		return o
	}
	if perr := refusal(err); perr != nil {
		return errOutcome(perr)
	}
	if err != nil || res == nil {
		c.logFailure(ctx, err, "prompt failed", "prompt", name)
		return errOutcome(errInternal)
	}
	if res.Messages == nil {
		res.Messages = []PromptMessage{}
	}
	return c.result(res, false, nil)
}

var errCompletionRequest = &protocol.Error{Code: protocol.CodeInvalidParams, Message: "Invalid completion request"}

const maxCompletionValues = 100

func (c *call) complete(ctx context.Context) Outcome {
	var p struct {
		Ref *struct {
			Type string  `json:"type"`
			Name *string `json:"name"`
			URI  *string `json:"uri"`
		} `json:"ref"`
		Argument *struct {
			Name  *string `json:"name"`
			Value *string `json:"value"`
		} `json:"argument"`
		Context *struct {
			Arguments json.RawMessage `json:"arguments"`
		} `json:"context"`
	}
	if json.Unmarshal(c.req.Params, &p) != nil || p.Ref == nil || p.Argument == nil || p.Argument.Name == nil || p.Argument.Value == nil {
		return errOutcome(errCompletionRequest)
	}
	ctxArgs := map[string]string{}
	if p.Context != nil {
		var ok bool
		if ctxArgs, ok = stringMap(p.Context.Arguments); !ok {
			return errOutcome(errCompletionRequest)
		}
	}
	var handler CompletionHandler
	var relayed *relayItem
	c.s.mu.RLock()
	switch {
	case p.Ref.Type == "ref/prompt" && p.Ref.Name != nil:
		e := c.s.prompts[*p.Ref.Name]
		if e == nil {
			c.s.mu.RUnlock()
			return invalidParams("Unknown completion reference")
		}
		handler, relayed = e.completions[*p.Argument.Name], e.relay
	case p.Ref.Type == "ref/resource" && p.Ref.URI != nil:
		if e := c.s.templates[*p.Ref.URI]; e != nil {
			handler, relayed = e.completions[*p.Argument.Name], e.relay
		} else if c.s.resources[*p.Ref.URI] == nil {
			c.s.mu.RUnlock()
			return invalidParams("Unknown completion reference")
		}
	default:
		c.s.mu.RUnlock()
		return errOutcome(errCompletionRequest)
	}
	c.s.mu.RUnlock()
	if relayed != nil && relayed.complete != nil {
		c.owner = relayed.owner
		return c.relay(ctx, relayed.complete, "")
	}
	values := []string{}
	if handler != nil {
		v, err := handler(ctx, *p.Argument.Value, ctxArgs)
		if err != nil {
			c.logFailure(ctx, err, "completion failed")
			return errOutcome(errInternal)
		}
		if v != nil {
			values = v
		}
	}
	total := len(values)
	type completion struct {
		Values  []string `json:"values"`
		Total   int      `json:"total"`
		HasMore bool     `json:"hasMore"`
	}
	return c.result(struct {
		Completion completion `json:"completion"`
	}{completion{values[:min(total, maxCompletionValues)], total, total > maxCompletionValues}}, false, nil)
}
