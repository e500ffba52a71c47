package catalog

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"weak"

	"github.com/snodod/snodod/server"
)

// This file is the "everything server": the fixture that the official MCP
// conformance suite (@modelcontextprotocol/conformance) calls by name. The
// names, argument schemas and texts follow the suite's scenario
// descriptions; where they leave something open, the Go SDK's
// conformance/everything-server (v1.8.0) decides. Deliberate differences:
// client input (sampling, elicitation, roots) is asked for with MRTR, so it
// works in 2026 only (legacy eras answer -32603, docs/protocol.md §4.2 step 8);
// completions return values rather than an empty list; and
// test_trigger_resource_update is added so that clients need not wait for
// the periodic update of the watched resource.

// Fixture URIs and timing.
const (
	// WatchedResourceURI is the resource whose updates clients subscribe
	// to. It is updated every WatchedResourceInterval, and at once by the
	// tool test_trigger_resource_update.
	WatchedResourceURI      = "test://watched-resource"
	WatchedResourceInterval = 3 * time.Second
	// fixtureStep is the pause between the log messages and the progress
	// reports of test_tool_with_logging and test_tool_with_progress.
	fixtureStep = 50 * time.Millisecond
)

var (
	// fixturePNG is a 1x1 red PNG; fixtureWAV a minimal silent WAV.
	fixturePNG = mustBase64("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")
	fixtureWAV = mustBase64("UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=")
)

// Everything registers the conformance fixture on s: tools, resources,
// the template test://template/{id}/data, prompts and completions, and
// starts the periodic updates of WatchedResourceURI, which go on while s
// is in use. Serve it with Options.SubscribableResources set.
func Everything(s *server.Server) {
	everythingTools(s)
	everythingInputTools(s)
	everythingResources(s)
	everythingPrompts(s)
	// The timer holds s weakly: a daemon builds a new server on every
	// reload, and the old one's updates must end with it rather than keep
	// it, and a timer, alive for the rest of the process.
	ws := weak.Make(s)
	var tick func()
	tick = func() {
		s := ws.Value()
		if s == nil {
			return
		}
		s.ResourceUpdated(WatchedResourceURI)
		time.AfterFunc(WatchedResourceInterval, tick)
	}
	time.AfterFunc(WatchedResourceInterval, tick)
}

// fixed registers a tool without arguments that always returns content.
func fixed(s *server.Server, name, description string, content ...server.Content) {
	server.AddTool(s, &server.Tool{Name: name, Description: description},
		func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
			return &server.CallToolResult{Content: content}, nil, nil
		})
}

func everythingTools(s *server.Server) {
	fixed(s, "test_simple_text", "Tests simple text content response",
		server.TextContent("This is a simple text response for testing."))
	fixed(s, "test_image_content", "Tests image content response",
		server.ImageContent(fixturePNG, "image/png"))
	fixed(s, "test_audio_content", "Tests audio content response",
		server.AudioContent(fixtureWAV, "audio/wav"))
	fixed(s, "test_embedded_resource", "Tests embedded resource content response",
		server.EmbeddedResource(&server.ResourceContents{URI: "test://embedded-resource", MIMEType: "text/plain",
			Text: "This is an embedded resource content."}))
	fixed(s, "test_multiple_content_types", "Tests response with multiple content types (text, image, resource)",
		server.TextContent("Multiple content types test:"),
		server.ImageContent(fixturePNG, "image/png"),
		server.EmbeddedResource(&server.ResourceContents{URI: "test://mixed-content-resource", MIMEType: "application/json",
			Text: `{"test":"data","value":123}`}))
	fixed(s, "test_streaming_elicitation", "Returns a plain result: a response stream carries no requests of its own (SEP-2575)",
		server.TextContent("stream observed: result frames only, no top-level requests"))

	server.AddTool(s, &server.Tool{Name: "test_tool_with_logging", Description: "Tests tool that emits log messages during execution"},
		func(ctx context.Context, _ *server.CallToolRequest, _ struct{}) (*server.CallToolResult, any, error) {
			for i, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				if i > 0 && !pause(ctx, fixtureStep) {
					return nil, nil, ctx.Err()
				}
				server.Log(ctx, "info", "", msg)
			}
			return textResult("Tool with logging executed successfully"), nil, nil
		})
	server.AddTool(s, &server.Tool{Name: "test_tool_with_progress", Description: "Tests tool that reports progress notifications"},
		func(ctx context.Context, req *server.CallToolRequest, _ struct{}) (*server.CallToolResult, any, error) {
			for i, step := range []float64{0, 50, 100} {
				if i > 0 && !pause(ctx, fixtureStep) {
					return nil, nil, ctx.Err()
				}
				_ = server.ReportProgress(ctx, server.Progress{Progress: step, Total: 100, HasTotal: true,
					Message: fmt.Sprintf("Completed step %g of 100", step)})
			}
			// The conformance fixtures answer with the token itself, so a
			// client can check its progress went to the right call.
			return textResult(fmt.Sprint(req.ProgressToken)), nil, nil
		})
	server.AddTool(s, &server.Tool{Name: "test_error_handling", Description: "Tests error response handling"},
		func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
			//lint:ignore ST1005 the conformance suite's exact text
			return nil, nil, errors.New("This tool intentionally returns an error for testing")
		})
	server.AddTool(s, &server.Tool{Name: "test_logging_tool", Description: "Emits an info log message; in 2026 none reaches the client (SEP-2575)"},
		func(ctx context.Context, _ *server.CallToolRequest, _ struct{}) (*server.CallToolResult, any, error) {
			server.Log(ctx, "info", "", "test_logging_tool executed")
			return textResult("Log attempted; framework gates on _meta.../logLevel."), nil, nil
		})

	// Catalog changes, for list_changed notifications and resource updates.
	server.AddTool(s, &server.Tool{Name: "test_trigger_tool_change", Description: "Re-registers a transient tool, so that the tool list changes"},
		func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
			fixed(s, "__transient_tool_for_list_changed", "Transient tool used to trigger tools/list_changed")
			return textResult("tools_list_changed published"), nil, nil
		})
	server.AddTool(s, &server.Tool{Name: "test_trigger_prompt_change", Description: "Re-registers a transient prompt, so that the prompt list changes"},
		func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
			s.AddPrompt(&server.Prompt{Name: "__transient_prompt_for_list_changed", Description: "Transient prompt used to trigger prompts/list_changed"},
				func(context.Context, *server.GetPromptRequest) (*server.GetPromptResult, error) {
					return &server.GetPromptResult{Messages: []server.PromptMessage{}}, nil
				})
			return textResult("prompts_list_changed published"), nil, nil
		})
	server.AddTool(s, &server.Tool{Name: "test_trigger_resource_update", Description: "Reports an update of " + WatchedResourceURI + " at once"},
		func(context.Context, *server.CallToolRequest, struct{}) (*server.CallToolResult, any, error) {
			s.ResourceUpdated(WatchedResourceURI)
			return textResult("resource_updated published"), nil, nil
		})

	// Schemas passed through verbatim (SEP-1613, SEP-2106, SEP-2243).
	s.AddTool(&server.Tool{
		Name:        "json_schema_2020_12_tool",
		Description: "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613, SEP-2106)",
		InputSchema: json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",` +
			`"$defs":{"address":{"$anchor":"addressDef","type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}},` +
			`"properties":{"name":{"type":"string"},"address":{"$ref":"#/$defs/address"},"contactMethod":{"type":"string","enum":["phone","email"]},` +
			`"phone":{"type":"string"},"email":{"type":"string"}},` +
			`"allOf":[{"anyOf":[{"required":["phone"]},{"required":["email"]}]}],` +
			`"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]},` +
			`"then":{"required":["phone"]},"else":{"required":["email"]},"additionalProperties":false}`),
	}, func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
		return textResult("JSON Schema 2020-12 tool called with: " + string(req.Arguments)), nil
	})
	type headerArgs struct {
		Region string `json:"region,omitempty"`
		Level  int    `json:"level,omitempty"`
	}
	server.AddTool(s, &server.Tool{
		Name:        "test_x_mcp_header",
		Description: "Tests SEP-2243 Mcp-Param-* server-side validation",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"region":{"type":"string","description":"mirrored into Mcp-Param-Region","x-mcp-header":"Region"},` +
			`"level":{"type":"integer","description":"non-mirrored argument"}}}`),
	}, func(_ context.Context, _ *server.CallToolRequest, in headerArgs) (*server.CallToolResult, any, error) {
		return textResult("region=" + in.Region), nil, nil
	})
}

func everythingResources(s *server.Server) {
	static := func(r server.Resource, contents server.ResourceContents) {
		s.AddResource(&r, func(context.Context, *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{contents}}, nil
		})
	}
	static(server.Resource{URI: "test://static-text", Name: "static-text", Title: "Static Text Resource",
		Description: "A static text resource for testing", MIMEType: "text/plain"},
		server.ResourceContents{URI: "test://static-text", MIMEType: "text/plain",
			Text: "This is the content of the static text resource."})
	static(server.Resource{URI: "test://static-binary", Name: "static-binary", Title: "Static Binary Resource",
		Description: "A static binary resource (image) for testing", MIMEType: "image/png"},
		server.ResourceContents{URI: "test://static-binary", MIMEType: "image/png", Blob: fixturePNG})
	static(server.Resource{URI: WatchedResourceURI, Name: "watched-resource", Title: "Watched Resource",
		Description: "A resource that auto-updates every 3 seconds", MIMEType: "text/plain"},
		server.ResourceContents{URI: WatchedResourceURI, MIMEType: "text/plain", Text: "Watched resource content"})

	const template = "test://template/{id}/data"
	s.AddResourceTemplate(&server.ResourceTemplate{URITemplate: template, Name: "template", Title: "Resource Template",
		Description: "A resource template with parameter substitution", MIMEType: "application/json"},
		func(_ context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			id := req.Params["id"]
			text, err := json.Marshal(struct {
				ID           string `json:"id"`
				TemplateTest bool   `json:"templateTest"`
				Data         string `json:"data"`
			}{id, true, "Data for ID: " + id})
			if err != nil {
				return nil, err
			}
			return &server.ReadResourceResult{Contents: []server.ResourceContents{
				{URI: req.URI, MIMEType: "application/json", Text: string(text)}}}, nil
		})
	// The ids 1 to 150: more than the 100 values a completion returns.
	ids := make([]string, 150)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	s.AddTemplateCompletion(template, "id", completeFrom(ids))
}

func everythingPrompts(s *server.Server) {
	static := func(p server.Prompt, description string, messages ...server.PromptMessage) {
		s.AddPrompt(&p, func(context.Context, *server.GetPromptRequest) (*server.GetPromptResult, error) {
			return &server.GetPromptResult{Description: description, Messages: messages}, nil
		})
	}
	static(server.Prompt{Name: "test_simple_prompt", Title: "Simple Test Prompt", Description: "A simple prompt without arguments"},
		"A simple test prompt", user(server.TextContent("This is a simple prompt for testing.")))
	static(server.Prompt{Name: "test_prompt_with_image", Title: "Prompt With Image", Description: "A prompt that includes image content"},
		"A prompt with an image",
		user(server.ImageContent(fixturePNG, "image/png")), user(server.TextContent("Please analyze the image above.")))

	s.AddPrompt(&server.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt With Arguments",
		Description: "A prompt with required arguments", Arguments: []server.PromptArgument{
			{Name: "arg1", Description: "First test argument", Required: true},
			{Name: "arg2", Description: "Second test argument", Required: true},
		}}, func(_ context.Context, req *server.GetPromptRequest) (*server.GetPromptResult, error) {
		text := fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", req.Arguments["arg1"], req.Arguments["arg2"])
		return &server.GetPromptResult{Description: "A prompt with arguments", Messages: []server.PromptMessage{user(server.TextContent(text))}}, nil
	})
	s.AddPromptCompletion("test_prompt_with_arguments", "arg1", completeFrom([]string{"paris", "park", "party"}))
	s.AddPromptCompletion("test_prompt_with_arguments", "arg2", completeFrom([]string{"hello", "help", "world"}))

	s.AddPrompt(&server.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt With Embedded Resource",
		Description: "A prompt that includes an embedded resource", Arguments: []server.PromptArgument{
			{Name: "resourceUri", Description: "URI of the resource to embed", Required: true},
		}}, func(_ context.Context, req *server.GetPromptRequest) (*server.GetPromptResult, error) {
		return &server.GetPromptResult{Description: "A prompt with an embedded resource", Messages: []server.PromptMessage{
			user(server.EmbeddedResource(&server.ResourceContents{URI: req.Arguments["resourceUri"], MIMEType: "text/plain",
				Text: "Embedded resource content for testing."})),
			user(server.TextContent("Please process the embedded resource above.")),
		}}, nil
	})

	s.AddPrompt(&server.Prompt{Name: "test_input_required_result_prompt",
		Description: "MRTR (SEP-2322): asks for context with an elicitation input request"},
		func(ctx context.Context, _ *server.GetPromptRequest) (*server.GetPromptResult, error) {
			r, err := server.Elicit(ctx, "user_context", server.ElicitParams{Message: "What context should the prompt use?",
				RequestedSchema: formSchema("context", "string")})
			if err != nil {
				return nil, err
			}
			return &server.GetPromptResult{Description: "A prompt with elicited context",
				Messages: []server.PromptMessage{user(server.TextContent("Context: " + contentString(r, "context")))}}, nil
		})
}

// completeFrom completes an argument with the values that start with what
// the user typed, in order.
func completeFrom(values []string) server.CompletionHandler {
	return func(_ context.Context, value string, _ map[string]string) ([]string, error) {
		out := []string{}
		for _, v := range values {
			if strings.HasPrefix(v, value) {
				out = append(out, v)
			}
		}
		return out, nil
	}
}

func user(c server.Content) server.PromptMessage {
	return server.PromptMessage{Role: "user", Content: c}
}

// pause waits d, or until ctx ends; it reports whether d passed.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func mustBase64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic("catalog: bad fixture data: " + err.Error())
	}
	return b
}
