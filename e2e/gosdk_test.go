//lint:file-ignore SA1019 snodod serves the roots, sampling and logging features the SDK deprecates (SEP-2577).

package e2e_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/internal/eventually"
)

const (
	v2026       = "2026-07-28"
	watchedURI  = "test://watched-resource"
	pngBase64   = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	eventWithin = 5 * time.Second // how long a notification may take
)

// goClient is a Go SDK client session with snodod, and what it observed.
type goClient struct {
	cs  *mcp.ClientSession
	rec *recorder

	mu           sync.Mutex
	progress     map[any][]*mcp.ProgressNotificationParams // by token
	logs         []string
	updates      []string
	toolsChanged int
	elicited     []string // messages of the elicitations answered
}

func (c *goClient) locked(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f()
}

// connectGo starts `snodod stdio --demo` and connects the Go SDK client to
// it at version. The session is closed, and the process's exit status
// checked, when the test ends.
func connectGo(t *testing.T, version string) *goClient {
	t.Helper()
	cmd := &mcp.CommandTransport{Command: serverCommand(t)}
	return connectGoOver(t, version, func(rec *recorder) mcp.Transport { return &recordingTransport{inner: cmd, rec: rec} })
}

// connectGoOver connects the Go SDK client at version over the transport
// transport makes, which reports every message to rec; the session is
// closed when the test ends.
func connectGoOver(t *testing.T, version string, transport func(rec *recorder) mcp.Transport) *goClient {
	t.Helper()
	c := &goClient{rec: &recorder{}, progress: map[any][]*mcp.ProgressNotificationParams{}}
	client := mcp.NewClient(&mcp.Implementation{Name: "snodod-e2e-go", Version: "1"}, goClientOptions(c))
	client.AddRoots(&mcp.Root{URI: "file:///tmp/e2e", Name: "e2e"})
	cs, err := client.Connect(t.Context(), transport(c.rec), &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	c.cs = cs
	t.Cleanup(func() {
		// Over stdio, closing ends input; snodod exits 0 once its
		// requests finished. Over HTTP it ends the session (DELETE).
		if err := cs.Close(); err != nil {
			t.Errorf("close: snodod did not end the session cleanly: %v", err)
		}
	})
	return c
}

// goClientOptions are the options of the tests' Go SDK clients: handlers
// that record what c observes, and answer elicitation and sampling.
func goClientOptions(c *goClient) *mcp.ClientOptions {
	return &mcp.ClientOptions{
		// roots without listChanged, plus the elicitation and sampling
		// the handlers below add.
		Capabilities: &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			c.locked(func() { c.elicited = append(c.elicited, req.Params.Message) })
			return &mcp.ElicitResult{Action: "accept", Content: fillForm(req.Params.RequestedSchema)}, nil
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Role: "assistant", Model: "test-model", Content: &mcp.TextContent{Text: "Hello"}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			c.locked(func() {
				c.progress[req.Params.ProgressToken] = append(c.progress[req.Params.ProgressToken], req.Params)
			})
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			c.locked(func() { c.logs = append(c.logs, fmt.Sprint(req.Params.Data)) })
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			c.locked(func() { c.updates = append(c.updates, req.Params.URI) })
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			c.locked(func() { c.toolsChanged++ })
		},
	}
}

// fillForm answers every string field of an elicitation form with
// "Gopher" and every boolean one with true.
func fillForm(schema any) map[string]any {
	var form struct {
		Properties map[string]struct{ Type string }
	}
	if b, err := json.Marshal(schema); err == nil {
		_ = json.Unmarshal(b, &form)
	}
	content := map[string]any{}
	for name, p := range form.Properties {
		switch p.Type {
		case "string":
			content[name] = "Gopher"
		case "boolean":
			content[name] = true
		}
	}
	return content
}

// text returns the text of a result's single text block.
func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("%d content blocks, want 1: %+v", len(res.Content), res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content %T, want text", res.Content[0])
	}
	return tc.Text
}

func (c *goClient) call(t *testing.T, ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	params := &mcp.CallToolParams{Name: name}
	if args != nil { // a nil map would be sent as null
		params.Arguments = args
	}
	res, err := c.cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// TestGoSDK drives snodod with the official Go SDK client at each protocol
// version it speaks: the client proposes the version, through initialize
// (legacy) or server/discover and per-request _meta (2026).
func TestGoSDK(t *testing.T) {
	for _, version := range goVersions {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			goSDKSuite(t, connectGo(t, version), version)
		})
	}
}

// goVersions are the versions the Go SDK client speaks.
var goVersions = []string{"2025-06-18", "2025-11-25", v2026}

// goSDKSuite is what TestGoSDK checks over a connected client at version,
// over stdio and over HTTP alike.
func goSDKSuite(t *testing.T, c *goClient, version string) {
	ctx := t.Context()
	if got := c.cs.InitializeResult(); got == nil || got.ProtocolVersion != version || got.ServerInfo == nil || got.ServerInfo.Name != "snodod" {
		t.Fatalf("negotiated %+v, want %s with snodod", got, version)
	}

	t.Run("tools", func(t *testing.T) {
		list, err := c.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
		}
		for _, want := range []string{"echo", "sleep", "status", "test_simple_text", "test_input_required_result_elicitation"} {
			if !slices.Contains(names, want) {
				t.Errorf("tools/list lacks %s: %q", want, names)
			}
		}
		if got := text(t, c.call(t, ctx, "echo", map[string]any{"text": "hello"})); got != "hello" {
			t.Errorf("echo = %q", got)
		}
		res := c.call(t, ctx, "test_image_content", nil)
		if img, ok := res.Content[0].(*mcp.ImageContent); !ok || img.MIMEType != "image/png" || base64.StdEncoding.EncodeToString(img.Data) != pngBase64 {
			t.Errorf("test_image_content = %+v", res.Content)
		}
		if res := c.call(t, ctx, "fail", nil); !res.IsError {
			t.Errorf("fail: isError false")
		}
	})

	t.Run("resources", func(t *testing.T) {
		for uri, want := range map[string]string{
			"test://static-text":     "This is the content of the static text resource.",
			"test://template/7/data": `{"id":"7","templateTest":true,"data":"Data for ID: 7"}`,
		} {
			res, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil {
				t.Fatalf("read %s: %v", uri, err)
			}
			if len(res.Contents) != 1 || res.Contents[0].Text != want {
				t.Errorf("read %s = %+v", uri, res.Contents)
			}
		}
	})

	t.Run("prompts and completion", func(t *testing.T) {
		res, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_prompt_with_arguments",
			Arguments: map[string]string{"arg1": "a", "arg2": "b"}})
		if err != nil {
			t.Fatal(err)
		}
		if tc, ok := res.Messages[0].Content.(*mcp.TextContent); len(res.Messages) != 1 || !ok || tc.Text != "Prompt with arguments: arg1='a', arg2='b'" {
			t.Errorf("prompt = %+v", res.Messages)
		}
		comp, err := c.cs.Complete(ctx, &mcp.CompleteParams{
			Ref:      &mcp.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
			Argument: mcp.CompleteParamsArgument{Name: "arg1", Value: "pa"}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"paris", "park", "party"}; !slices.Equal(comp.Completion.Values, want) {
			t.Errorf("completion = %+v, want %q", comp.Completion, want)
		}
	})

	t.Run("progress", func(t *testing.T) {
		// Long enough for several 100 ms ticks even on a loaded
		// machine, where a late ticker drops ticks.
		params := &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 800}}
		token := "progress-" + version
		params.SetProgressToken(token)
		res, err := c.cs.CallTool(ctx, params)
		if err != nil || text(t, res) != "done" {
			t.Fatalf("sleep = %+v, %v", res, err)
		}
		// On the wire, progress precedes the response.
		id, _ := c.rec.sentID("tools/call", token)
		before := 0
		for _, e := range c.rec.incoming() {
			if e.Method == "" && string(e.ID) == string(id) {
				break
			}
			if e.Method == "notifications/progress" && strings.Contains(string(e.Params), token) {
				before++
			}
		}
		if before < 2 {
			t.Errorf("%d progress notifications before the result, want about 7", before)
		}
		// The SDK hands notifications to its handler asynchronously.
		var reports []*mcp.ProgressNotificationParams
		eventually.Within(eventWithin, func() bool {
			c.locked(func() { reports = slices.Clone(c.progress[token]) })
			return len(reports) >= before
		})
		last := 0.0
		for _, p := range reports {
			if p.Progress <= last || p.Total != 800 {
				t.Errorf("progress %+v after %v", p, last)
			}
			last = p.Progress
		}
		if len(reports) != before {
			t.Errorf("ProgressNotificationHandler saw %d notifications, want %d", len(reports), before)
		}
	})

	t.Run("cancel", func(t *testing.T) { testGoCancel(t, c) })

	t.Run("logging", func(t *testing.T) {
		if version != v2026 {
			if err := c.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
		}
		c.call(t, ctx, "test_tool_with_logging", nil)
		want := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
		if version == v2026 {
			want = nil // docs/protocol.md §5.3: no notifications/message in 2026
		}
		// On the wire, a request's log messages precede its response.
		id, _ := c.rec.sentID("tools/call", "test_tool_with_logging")
		var wire []string
		for _, e := range c.rec.incoming() {
			if e.Method == "" && string(e.ID) == string(id) {
				break
			}
			if e.Method == "notifications/message" {
				var p struct{ Data string }
				_ = json.Unmarshal(e.Params, &p)
				wire = append(wire, p.Data)
			}
		}
		if !slices.Equal(wire, want) {
			t.Errorf("log messages before the result %q, want %q", wire, want)
		}
		// The SDK hands notifications to its handler asynchronously.
		var seen []string
		if !eventually.Within(eventWithin, func() (ok bool) { c.locked(func() { seen = slices.Clone(c.logs) }); return slices.Equal(seen, want) }) {
			t.Errorf("LoggingMessageHandler saw %q, want %q", seen, want)
		}
	})

	t.Run("subscribe", func(t *testing.T) { testGoSubscribe(t, c, version) })

	t.Run("list changed", func(t *testing.T) {
		c.call(t, ctx, "test_trigger_tool_change", nil)
		if !eventually.Within(eventWithin, func() (ok bool) { c.locked(func() { ok = c.toolsChanged > 0 }); return }) {
			t.Error("no notifications/tools/list_changed after a tools change")
		}
	})

	t.Run("input required", func(t *testing.T) { testGoInput(t, c, version) })
}

// testGoCancel cancels a running call, then checks that the connection
// still works and that nothing was written for the cancelled request.
func testGoCancel(t *testing.T, c *goClient) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "sleep", Arguments: map[string]any{"ms": 30000}})
		done <- err
	}()
	var id json.RawMessage
	if !eventually.Within(eventWithin, func() (ok bool) { id, ok = c.rec.sentID("tools/call", `"ms":30000`); return }) {
		t.Fatal("the sleep request was never sent")
	}
	time.Sleep(100 * time.Millisecond) // let it start
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call returned %v", err)
		}
	case <-time.After(eventWithin):
		t.Fatal("the cancelled call did not return")
	}
	if got := text(t, c.call(t, t.Context(), "echo", map[string]any{"text": "still here"})); got != "still here" {
		t.Errorf("echo after cancel = %q", got)
	}
	time.Sleep(200 * time.Millisecond) // time for a stray line to arrive
	for _, e := range c.rec.incoming() {
		if e.Method == "" && string(e.ID) == string(id) {
			t.Errorf("a response to the cancelled request %s arrived: result %s, error %s", id, e.Result, e.Error)
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("cancellation took %v", took)
	}
}

// testGoSubscribe subscribes to the watched resource, has the server report
// an update, and checks it arrives: by resources/subscribe in legacy eras,
// by a subscriptions/listen stream in 2026.
func testGoSubscribe(t *testing.T, c *goClient, version string) {
	ctx := t.Context()
	if err := c.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: watchedURI}); err != nil {
		t.Fatal(err)
	}
	if version == v2026 {
		// Subscribe sends the listen and returns: wait for its
		// acknowledgement, which precedes the stream's events.
		if !eventually.Within(eventWithin, func() bool {
			for _, e := range c.rec.incoming() {
				if e.Method == "notifications/subscriptions/acknowledged" && strings.Contains(string(e.Params), watchedURI) {
					return true
				}
			}
			return false
		}) {
			t.Fatal("no acknowledgement of the listen for " + watchedURI)
		}
	}
	c.call(t, ctx, "test_trigger_resource_update", nil)
	if !eventually.Within(eventWithin, func() (ok bool) { c.locked(func() { ok = slices.Contains(c.updates, watchedURI) }); return }) {
		t.Fatalf("no notifications/resources/updated for %s", watchedURI)
	}
	if err := c.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: watchedURI}); err != nil {
		t.Error(err)
	}
}

// testGoInput calls tools that ask the client for input: answered through
// the SDK's multi-round-trip middleware in 2026, and in legacy eras by the
// SDK's handlers for the requests snodod sends it (docs/protocol.md §3.1), with
// the same results.
func testGoInput(t *testing.T, c *goClient, version string) {
	ctx := t.Context()
	if got := text(t, c.call(t, ctx, "test_input_required_result_elicitation", nil)); got != "Hello, Gopher!" {
		t.Errorf("elicitation = %q", got)
	}
	if got := text(t, c.call(t, ctx, "test_input_required_result_multiple_inputs", nil)); got != "Hello Gopher — 1 root(s) visible" {
		t.Errorf("multiple inputs = %q", got)
	}
	res, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "test_input_required_result_prompt"})
	if err != nil {
		t.Fatalf("prompt with input: %v", err)
	}
	if tc, ok := res.Messages[0].Content.(*mcp.TextContent); len(res.Messages) != 1 || !ok || tc.Text != "Context: Gopher" {
		t.Errorf("prompt with input = %+v", res.Messages)
	}
	var elicited []string
	c.locked(func() { elicited = slices.Clone(c.elicited) })
	if len(elicited) != 3 {
		t.Errorf("elicitations answered: %q, want 3", elicited)
	}
}
