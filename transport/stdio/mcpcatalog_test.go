package stdio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// This file builds the catalog of docs/protocol.md §14.1 with the real server
// API, for the golden transcripts (transcript_test.go). Unlike testCatalog
// (catalog_test.go), which stands in for the runtime, this is the runtime:
// every line of a transcript is what server.Server and the transport
// produce together.

// transcriptConfig is the -- config -- section of a transcript. Zero
// values mean the defaults of docs/protocol.md (all versions enabled, cache_ttl
// 0, cache_scope private, max_subscriptions 32).
type transcriptConfig struct {
	// Catalog selects the catalog variant:
	//   - "default": the §14.1 catalog;
	//   - "tools150": 150 tools tool-001 … tool-150 instead of the §14.1
	//     tools (resources and prompts as in default);
	//   - "notools": the default catalog without any tool;
	//   - "noprompts": the default catalog without any prompt (and so
	//     without completions);
	//   - "empty": nothing registered at all.
	Catalog          string   `json:"catalog"`
	Versions         []string `json:"versions"`
	CacheTTLms       int64    `json:"cache_ttl_ms"`
	CacheScope       string   `json:"cache_scope"`
	MaxSubscriptions int      `json:"max_subscriptions"`
	// Subscribable sets Options.SubscribableResources (resources.subscribe);
	// absent means true, as §14.1 advertises it.
	Subscribable *bool `json:"subscribable,omitempty"`
	// ServerInfo, when set, is Options.Info (name and version default to
	// snodod and the build version), e.g. icons and websiteUrl for case 20.
	ServerInfo *protocol.Implementation `json:"server_info,omitempty"`
}

func parseTranscriptConfig(text string) (transcriptConfig, error) {
	var cfg transcriptConfig
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return cfg, fmt.Errorf("config: %w", err)
	}
	switch cfg.Catalog {
	case "", "default", "tools150", "notools", "noprompts", "empty":
	default:
		return cfg, fmt.Errorf("config: unknown catalog %q", cfg.Catalog)
	}
	return cfg, nil
}

// mcpCatalog is a served catalog and the handles the runner's actions use.
type mcpCatalog struct {
	srv  *server.Server
	disp *controlledDispatcher

	mu    sync.Mutex
	tools map[string]registeredTool // what was registered, to re-register
}

type registeredTool struct {
	tool    server.Tool
	handler server.ToolHandler
}

// The texts of the catalog, shared with the transcripts.
const (
	instructions     = "Use only when useful"
	staticText       = "This is the static text resource."
	watchedText      = "Watched resource contents."
	domainFailure    = "Actionable domain failure"
	completionValues = 150
)

var discardLog = slog.New(slog.DiscardHandler)

// newMCPCatalog builds a server for cfg.
func newMCPCatalog(cfg transcriptConfig) (*mcpCatalog, error) {
	subscribable := cfg.Subscribable == nil || *cfg.Subscribable
	opts := server.Options{
		Instructions:          instructions,
		Versions:              cfg.Versions,
		CacheTTL:              time.Duration(cfg.CacheTTLms) * time.Millisecond,
		CacheScope:            cfg.CacheScope,
		SubscribableResources: subscribable,
		Logger:                discardLog,
	}
	if cfg.ServerInfo != nil {
		opts.Info = *cfg.ServerInfo
	}
	srv, err := server.New(opts)
	if err != nil {
		return nil, err
	}
	c := &mcpCatalog{srv: srv, tools: map[string]registeredTool{}}
	c.disp = &controlledDispatcher{Server: srv, streams: map[protocol.ID]*controlledStream{}}
	switch cfg.Catalog {
	case "", "default":
		c.addDefaultTools()
		c.addResources()
		c.addPrompts()
	case "tools150":
		for i := 1; i <= 150; i++ {
			name := fmt.Sprintf("tool-%03d", i)
			c.addTool(&server.Tool{Name: name, Description: "Numbered tool " + name[5:]},
				func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
					return textResult(name), nil
				})
		}
		c.addResources()
		c.addPrompts()
	case "notools":
		c.addResources()
		c.addPrompts()
	case "noprompts":
		c.addDefaultTools()
		c.addResources()
	case "empty":
	}
	return c, nil
}

func textResult(s string) *server.CallToolResult {
	return &server.CallToolResult{Content: []server.Content{server.TextContent(s)}}
}

func (c *mcpCatalog) addTool(t *server.Tool, h server.ToolHandler) {
	c.mu.Lock()
	c.tools[t.Name] = registeredTool{*t, h}
	c.mu.Unlock()
	c.srv.AddTool(t, h)
}

// testIcons are carried by echo, test://static-text, the template and the
// prompt simple, so that transcripts show icons kept (2025-11-25, 2026) and
// dropped (2025-06-18, docs/protocol.md §3.5).
var testIcons = []protocol.Icon{{Src: "https://example.com/item.png", MIMEType: "image/png"}}

// The input and output schemas of the §14.1 tools.
const (
	echoInput       = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`
	structuredInput = `{"type":"object","properties":{"value":{}},"required":["value"]}`
	structuredOut   = `{"type":"object","properties":{"value":{}},"required":["value"]}`
	listOutInput    = `{"type":"object","properties":{"items":{"type":"array"}}}`
	listOutOutput   = `{"type":"array"}`
	choiceSchema    = `{"type":"object","properties":{"label":{"type":"string"}},"required":["label"]}`
)

// addDefaultTools registers the tools of docs/protocol.md §14.1.
func (c *mcpCatalog) addDefaultTools() {
	c.addTool(&server.Tool{Name: "echo", Description: "Echoes text", InputSchema: json.RawMessage(echoInput), Icons: testIcons},
		func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct {
				Text string `json:"text"`
			}
			if err := json.Unmarshal(req.Arguments, &in); err != nil {
				return nil, err
			}
			return textResult(in.Text), nil
		})
	c.addTool(&server.Tool{Name: "failing", Description: "Always reports a domain failure"},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return &server.CallToolResult{Content: []server.Content{server.TextContent(domainFailure)}, IsError: true}, nil
		})
	c.addTool(&server.Tool{Name: "raising", Description: "Panics"},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			panic("raising: the tool failed on purpose")
		})
	c.addTool(&server.Tool{Name: "structured", Description: "Returns its value as structured content",
		InputSchema: json.RawMessage(structuredInput), OutputSchema: json.RawMessage(structuredOut)},
		func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct {
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(req.Arguments, &in); err != nil {
				return nil, err
			}
			return &server.CallToolResult{StructuredContent: map[string]json.RawMessage{"value": in.Value}}, nil
		})
	c.addTool(&server.Tool{Name: "list_out", Description: "Returns its items as structured content",
		InputSchema: json.RawMessage(listOutInput), OutputSchema: json.RawMessage(listOutOutput)},
		func(_ context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			var in struct {
				Items json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(req.Arguments, &in); err != nil {
				return nil, err
			}
			if in.Items == nil {
				in.Items = json.RawMessage(`[]`)
			}
			return &server.CallToolResult{StructuredContent: in.Items}, nil
		})
	c.addTool(&server.Tool{Name: "needs_choice", Description: "Asks the user to choose a label"},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			res, err := server.Elicit(ctx, "choice", server.ElicitParams{
				Message:         "Choose a label",
				RequestedSchema: json.RawMessage(choiceSchema),
			})
			if err != nil {
				return nil, err
			}
			if res.Action != "accept" {
				return textResult("no choice: " + res.Action), nil
			}
			label, ok := res.Content["label"].(string)
			if !ok {
				// The runtime is to refuse such an answer before the
				// handler sees it (docs/protocol.md §12.3); if it reaches us,
				// say so visibly.
				return nil, errors.New("label is not a string")
			}
			return textResult("You chose " + label), nil
		})
	c.addTool(&server.Tool{Name: "needs_sampling", Description: "Asks the client's model"},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			res, err := server.Sample(ctx, "sample", server.CreateMessageParams{
				Messages:  []server.SamplingMessage{{Role: "user", Content: server.TextContent("Say something")}},
				MaxTokens: 50,
			})
			if err != nil {
				return nil, err
			}
			return textResult("sampled by " + res.Model), nil
		})
	c.addTool(&server.Tool{Name: "progress", Description: "Reports progress, then finishes"},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			if err := server.ReportProgress(ctx, server.Progress{Progress: 0, Total: 1, HasTotal: true, Message: "starting"}); err != nil {
				return nil, err
			}
			if err := server.ReportProgress(ctx, server.Progress{Progress: 0.5, Total: 1, HasTotal: true}); err != nil {
				return nil, err
			}
			return textResult("finished"), nil
		})
	c.addTool(&server.Tool{Name: "logger", Description: "Logs at four levels"},
		func(ctx context.Context, _ *server.CallToolRequest) (*server.CallToolResult, error) {
			for _, level := range []string{"debug", "info", "warning", "error"} {
				server.Log(ctx, level, "transcript", level+" message")
			}
			return textResult("logged"), nil
		})
}

// addResources registers the resources and the template of §14.1.
func (c *mcpCatalog) addResources() {
	c.addStaticText()
	c.srv.AddResource(&server.Resource{URI: "test://static-binary", Name: "static-binary", MIMEType: "application/octet-stream"},
		func(_ context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: req.URI, MIMEType: "application/octet-stream", Blob: []byte{0, 1, 2, 3, 0xff}}}}, nil
		})
	c.srv.AddResource(&server.Resource{URI: "test://watched", Name: "watched", MIMEType: "text/plain"},
		func(_ context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: watchedText}}}, nil
		})
	c.srv.AddResourceTemplate(&server.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template-data", MIMEType: "application/json", Icons: testIcons},
		func(_ context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			text, _ := json.Marshal(map[string]string{"id": req.Params["id"]})
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: req.URI, MIMEType: "application/json", Text: string(text)}}}, nil
		})
}

// addStaticText registers (again) test://static-text.
func (c *mcpCatalog) addStaticText() {
	c.srv.AddResource(&server.Resource{URI: "test://static-text", Name: "static-text", MIMEType: "text/plain", Icons: testIcons},
		func(_ context.Context, req *server.ReadResourceRequest) (*server.ReadResourceResult, error) {
			return &server.ReadResourceResult{Contents: []server.ResourceContents{{URI: req.URI, MIMEType: "text/plain", Text: staticText}}}, nil
		})
}

// addSimplePrompt registers (again) the prompt simple.
func (c *mcpCatalog) addSimplePrompt() {
	c.srv.AddPrompt(&server.Prompt{Name: "simple", Description: "A prompt without arguments", Icons: testIcons},
		func(context.Context, *server.GetPromptRequest) (*server.GetPromptResult, error) {
			return &server.GetPromptResult{Messages: []server.PromptMessage{{Role: "user", Content: server.TextContent("Say hello")}}}, nil
		})
}

// addPrompts registers the prompts of §14.1 and the 150 completions of
// with_args.arg1.
func (c *mcpCatalog) addPrompts() {
	c.addSimplePrompt()
	c.srv.AddPrompt(&server.Prompt{Name: "with_args", Description: "A prompt with a required argument",
		Arguments: []server.PromptArgument{{Name: "arg1", Description: "The value to use", Required: true}}},
		func(_ context.Context, req *server.GetPromptRequest) (*server.GetPromptResult, error) {
			v := req.Arguments["arg1"]
			return &server.GetPromptResult{Description: "Uses " + v, Messages: []server.PromptMessage{
				{Role: "user", Content: server.TextContent("Use the value " + v)},
				{Role: "assistant", Content: server.TextContent("Using " + v)},
			}}, nil
		})
	c.srv.AddPromptCompletion("with_args", "arg1", func(_ context.Context, value string, _ map[string]string) ([]string, error) {
		var out []string
		for i := 1; i <= completionValues; i++ {
			if v := fmt.Sprintf("value-%03d", i); strings.HasPrefix(v, value) {
				out = append(out, v)
			}
		}
		return out, nil
	})
}

// toolsChanged re-registers the first tool by name: one catalog change of
// the tool list, which keeps the listing as it was (only the revision, and
// so the validity of cursors, changes).
func (c *mcpCatalog) toolsChanged() error {
	c.mu.Lock()
	names := make([]string, 0, len(c.tools))
	for n := range c.tools {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		c.mu.Unlock()
		return errors.New("!tools-changed: the catalog has no tool to re-register")
	}
	t := c.tools[names[0]]
	c.mu.Unlock()
	c.srv.AddTool(&t.tool, t.handler)
	return nil
}

// resourcesChanged re-registers test://static-text: one change of the
// resource list.
func (c *mcpCatalog) resourcesChanged() { c.addStaticText() }

// promptsChanged re-registers the prompt simple: one change of the prompt
// list.
func (c *mcpCatalog) promptsChanged() { c.addSimplePrompt() }

// controlledDispatcher is the server as the transport's Dispatcher, with
// one addition: each listen stream it opens can be ended by the runner
// (!complete-source, !fail-source). The runtime has no public way to end a
// source (docs/protocol.md §9.6 "the source ends gracefully / fails"), so the
// wrapper stands in for it; everything else is the runtime's.
type controlledDispatcher struct {
	*server.Server

	mu      sync.Mutex
	streams map[protocol.ID]*controlledStream
}

func (d *controlledDispatcher) Dispatch(ctx context.Context, req *server.Request) server.Outcome {
	o := d.Server.Dispatch(ctx, req)
	if o.Err == nil && o.Stream != nil {
		s := &controlledStream{Stream: o.Stream, id: req.ID, end: make(chan sourceEnd, 1)}
		d.mu.Lock()
		d.streams[req.ID] = s
		d.mu.Unlock()
		o.Stream = s
	}
	return o
}

// endSource ends the listen stream opened for id (its latest one).
func (d *controlledDispatcher) endSource(id protocol.ID, end sourceEnd) error {
	d.mu.Lock()
	s := d.streams[id]
	d.mu.Unlock()
	if s == nil {
		return fmt.Errorf("no listen stream was opened for id %s", id)
	}
	select {
	case s.end <- end:
		return nil
	default:
		return fmt.Errorf("the source of %s was already ended", id)
	}
}

type sourceEnd struct {
	fail  bool
	final any
}

type controlledStream struct {
	server.Stream
	id  protocol.ID
	end chan sourceEnd
}

var errSourceFailedByTest = errors.New("source failed on the test's request")

func (s *controlledStream) Next(ctx context.Context) (server.Event, error) {
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	type next struct {
		ev  server.Event
		err error
	}
	got := make(chan next, 1)
	go func() {
		ev, err := s.Stream.Next(inner)
		got <- next{ev, err}
	}()
	select {
	case n := <-got:
		return n.ev, n.err
	case end := <-s.end:
		cancel()
		<-got
		if end.fail {
			return server.Event{}, errSourceFailedByTest
		}
		return server.Event{Done: true, Final: end.final}, nil
	}
}
