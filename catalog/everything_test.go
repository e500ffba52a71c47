package catalog_test

import (
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

const (
	pngBase64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
	wavBase64 = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
)

var versions = []string{"2025-06-18", "2025-11-25", v2026}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestEverythingLists(t *testing.T) {
	s := newServer(t, catalog.Everything)
	tools := []string{"json_schema_2020_12_tool", "test_audio_content", "test_elicitation",
		"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "test_embedded_resource",
		"test_error_handling", "test_image_content", "test_input_required_result_capabilities",
		"test_input_required_result_elicitation", "test_input_required_result_list_roots",
		"test_input_required_result_multi_round", "test_input_required_result_multiple_inputs",
		"test_input_required_result_request_state", "test_input_required_result_sampling",
		"test_input_required_result_tampered_state", "test_logging_tool", "test_missing_capability",
		"test_multiple_content_types", "test_sampling", "test_simple_text", "test_streaming_elicitation",
		"test_tool_with_logging", "test_tool_with_progress", "test_trigger_prompt_change",
		"test_trigger_resource_update", "test_trigger_tool_change", "test_x_mcp_header"}
	for _, version := range versions {
		c := newClient(t, s, version, `{}`)
		list := result[struct {
			Tools []struct {
				Name, Description string
				InputSchema       map[string]any
			}
		}](t, c, t.Context(), "tools/list", nil)
		var names []string
		for _, tool := range list.Tools {
			names = append(names, tool.Name)
			if tool.Description == "" || tool.InputSchema["type"] != "object" {
				t.Errorf("%s: tool %s: description %q, inputSchema %v", version, tool.Name, tool.Description, tool.InputSchema)
			}
		}
		if !slices.Equal(names, tools) {
			t.Errorf("%s: tools %q, want %q", version, names, tools)
		}
		resources := result[struct {
			Resources []struct{ URI, Name, Description, MIMEType string }
		}](t, c, t.Context(), "resources/list", nil)
		var uris []string
		for _, r := range resources.Resources {
			uris = append(uris, r.URI+" "+r.MIMEType)
			if r.Name == "" || r.Description == "" {
				t.Errorf("%s: resource %+v", version, r)
			}
		}
		if want := []string{"test://static-binary image/png", "test://static-text text/plain", "test://watched-resource text/plain"}; !slices.Equal(uris, want) {
			t.Errorf("%s: resources %q, want %q", version, uris, want)
		}
		templates := result[struct {
			ResourceTemplates []struct{ URITemplate, Name string }
		}](t, c, t.Context(), "resources/templates/list", nil)
		if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "test://template/{id}/data" {
			t.Errorf("%s: templates %+v", version, templates)
		}
		prompts := result[struct {
			Prompts []struct {
				Name, Description string
				Arguments         []struct {
					Name     string
					Required bool
				}
			}
		}](t, c, t.Context(), "prompts/list", nil)
		var sigs []string
		for _, p := range prompts.Prompts {
			sig := p.Name
			for _, a := range p.Arguments {
				sig += " " + a.Name
				if !a.Required {
					t.Errorf("%s: prompt %s: argument %s not required", version, p.Name, a.Name)
				}
			}
			sigs = append(sigs, sig)
		}
		want := []string{"test_input_required_result_prompt", "test_prompt_with_arguments arg1 arg2",
			"test_prompt_with_embedded_resource resourceUri", "test_prompt_with_image", "test_simple_prompt"}
		if !slices.Equal(sigs, want) {
			t.Errorf("%s: prompts %q, want %q", version, sigs, want)
		}
	}
}

func TestEverythingToolContent(t *testing.T) {
	s := newServer(t, catalog.Everything)
	tests := []struct {
		tool    string
		content string
		isError bool
	}{
		{"test_simple_text", `[{"type":"text","text":"This is a simple text response for testing."}]`, false},
		{"test_image_content", `[{"type":"image","data":"` + pngBase64 + `","mimeType":"image/png"}]`, false},
		{"test_audio_content", `[{"type":"audio","data":"` + wavBase64 + `","mimeType":"audio/wav"}]`, false},
		{"test_embedded_resource", `[{"type":"resource","resource":{"uri":"test://embedded-resource","mimeType":"text/plain","text":"This is an embedded resource content."}}]`, false},
		{"test_multiple_content_types", `[{"type":"text","text":"Multiple content types test:"},` +
			`{"type":"image","data":"` + pngBase64 + `","mimeType":"image/png"},` +
			`{"type":"resource","resource":{"uri":"test://mixed-content-resource","mimeType":"application/json","text":"{\"test\":\"data\",\"value\":123}"}}]`, false},
		{"test_error_handling", `[{"type":"text","text":"This tool intentionally returns an error for testing"}]`, true},
		{"test_streaming_elicitation", `[{"type":"text","text":"stream observed: result frames only, no top-level requests"}]`, false},
		{"json_schema_2020_12_tool", `[{"type":"text","text":"JSON Schema 2020-12 tool called with: {\"email\":\"a@b.c\"}"}]`, false},
		{"test_x_mcp_header", `[{"type":"text","text":"region=eu"}]`, false},
	}
	args := map[string]map[string]any{
		"json_schema_2020_12_tool": {"email": "a@b.c"},
		"test_x_mcp_header":        {"region": "eu"},
	}
	for _, tt := range tests {
		if args[tt.tool] == nil {
			args[tt.tool] = map[string]any{}
		}
	}
	for _, version := range versions {
		c := newClient(t, s, version, `{}`)
		for _, tt := range tests {
			got := result[struct {
				Content json.RawMessage
				IsError bool `json:"isError"`
			}](t, c, t.Context(), "tools/call", map[string]any{"name": tt.tool, "arguments": args[tt.tool]})
			if !sameJSON(t, string(got.Content), tt.content) || got.IsError != tt.isError {
				t.Errorf("%s %s: content %s (isError %v), want %s (isError %v)", version, tt.tool, got.Content, got.IsError, tt.content, tt.isError)
			}
		}
	}
}

// notifier records request-scoped notifications, as a transport would.
type notifier struct {
	mu    sync.Mutex
	lines []string
}

func (n *notifier) Notify(method string, params any) error {
	b, err := json.Marshal(params)
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lines = append(n.lines, method+" "+string(b))
	return err
}

func TestEverythingLogging(t *testing.T) {
	s := newServer(t, catalog.Everything)
	for _, version := range versions {
		n := &notifier{}
		ctx := server.WithNotifier(t.Context(), n)
		res := callTool(t, newClient(t, s, version, `{}`), ctx, "test_tool_with_logging", nil)
		if got := res.text(t); got != "Tool with logging executed successfully" {
			t.Errorf("%s: text %q", version, got)
		}
		var want []string
		if version != v2026 { // docs/protocol.md §5.3: no notifications/message in 2026
			for _, msg := range []string{"Tool execution started", "Tool processing data", "Tool execution completed"} {
				want = append(want, `notifications/message {"level":"info","data":"`+msg+`"}`)
			}
		}
		if !slices.Equal(n.lines, want) {
			t.Errorf("%s: notifications %q, want %q", version, n.lines, want)
		}
	}
}

func TestEverythingProgress(t *testing.T) {
	s := newServer(t, catalog.Everything)
	for _, version := range versions {
		r := &reporter{}
		res := callTool(t, newClient(t, s, version, `{}`), server.WithProgress(t.Context(), r), "test_tool_with_progress", nil)
		if res.IsError || len(res.Content) != 1 {
			t.Errorf("%s: result %+v", version, res)
		}
		want := []server.Progress{
			{Progress: 0, Total: 100, HasTotal: true, Message: "Completed step 0 of 100"},
			{Progress: 50, Total: 100, HasTotal: true, Message: "Completed step 50 of 100"},
			{Progress: 100, Total: 100, HasTotal: true, Message: "Completed step 100 of 100"},
		}
		if got := r.all(); !slices.Equal(got, want) {
			t.Errorf("%s: progress %+v, want %+v", version, got, want)
		}
	}
}

func TestEverythingResources(t *testing.T) {
	s := newServer(t, catalog.Everything)
	tests := []struct{ uri, contents string }{
		{"test://static-text", `[{"uri":"test://static-text","mimeType":"text/plain","text":"This is the content of the static text resource."}]`},
		{"test://static-binary", `[{"uri":"test://static-binary","mimeType":"image/png","blob":"` + pngBase64 + `"}]`},
		{"test://template/123/data", `[{"uri":"test://template/123/data","mimeType":"application/json","text":"{\"id\":\"123\",\"templateTest\":true,\"data\":\"Data for ID: 123\"}"}]`},
		{catalog.WatchedResourceURI, `[{"uri":"test://watched-resource","mimeType":"text/plain","text":"Watched resource content"}]`},
	}
	for _, version := range versions {
		c := newClient(t, s, version, `{}`)
		for _, tt := range tests {
			got := result[struct {
				Contents   json.RawMessage
				TTL        *int64 `json:"ttlMs"`
				CacheScope string `json:"cacheScope"`
			}](t, c, t.Context(), "resources/read", map[string]any{"uri": tt.uri})
			if !sameJSON(t, string(got.Contents), tt.contents) {
				t.Errorf("%s %s: contents %s, want %s", version, tt.uri, got.Contents, tt.contents)
			}
			if cached := got.TTL != nil && got.CacheScope != ""; cached != (version == v2026) {
				t.Errorf("%s %s: ttlMs %v, cacheScope %q", version, tt.uri, got.TTL, got.CacheScope)
			}
		}
	}
}

func TestEverythingPrompts(t *testing.T) {
	s := newServer(t, catalog.Everything)
	text := func(s string) string { return `{"type":"text","text":"` + s + `"}` }
	tests := []struct {
		name     string
		args     map[string]any
		messages string
	}{
		{"test_simple_prompt", nil, `[{"role":"user","content":` + text("This is a simple prompt for testing.") + `}]`},
		{"test_prompt_with_arguments", map[string]any{"arg1": "hello", "arg2": "world"},
			`[{"role":"user","content":` + text("Prompt with arguments: arg1='hello', arg2='world'") + `}]`},
		{"test_prompt_with_embedded_resource", map[string]any{"resourceUri": "test://example-resource"},
			`[{"role":"user","content":{"type":"resource","resource":{"uri":"test://example-resource","mimeType":"text/plain","text":"Embedded resource content for testing."}}},` +
				`{"role":"user","content":` + text("Please process the embedded resource above.") + `}]`},
		{"test_prompt_with_image", nil, `[{"role":"user","content":{"type":"image","data":"` + pngBase64 + `","mimeType":"image/png"}},` +
			`{"role":"user","content":` + text("Please analyze the image above.") + `}]`},
	}
	for _, version := range versions {
		c := newClient(t, s, version, `{}`)
		for _, tt := range tests {
			params := map[string]any{"name": tt.name}
			if tt.args != nil {
				params["arguments"] = tt.args
			}
			got := result[struct {
				Description string
				Messages    json.RawMessage
			}](t, c, t.Context(), "prompts/get", params)
			if got.Description == "" || !sameJSON(t, string(got.Messages), tt.messages) {
				t.Errorf("%s %s: description %q, messages %s, want %s", version, tt.name, got.Description, got.Messages, tt.messages)
			}
		}
		if _, perr := c.call(t.Context(), "prompts/get", map[string]any{"name": "test_prompt_with_arguments",
			"arguments": map[string]any{"arg1": "x"}}); perr == nil || perr.Message != "Missing required prompt arguments: arg2" {
			t.Errorf("%s: prompt without arg2: %+v", version, perr)
		}
	}
}

func TestEverythingCompletion(t *testing.T) {
	s := newServer(t, catalog.Everything)
	prompt := map[string]any{"type": "ref/prompt", "name": "test_prompt_with_arguments"}
	template := map[string]any{"type": "ref/resource", "uri": "test://template/{id}/data"}
	tests := []struct {
		ref           map[string]any
		arg, value    string
		first, last   string
		count, total  int
		hasMore, none bool
	}{
		{ref: prompt, arg: "arg1", value: "pa", first: "paris", last: "party", count: 3, total: 3},
		{ref: prompt, arg: "arg1", value: "test", none: true},
		{ref: prompt, arg: "arg2", value: "", first: "hello", last: "world", count: 3, total: 3},
		{ref: template, arg: "id", value: "", first: "1", last: "100", count: 100, total: 150, hasMore: true},
		{ref: template, arg: "id", value: "14", first: "14", last: "149", count: 11, total: 11},
	}
	for _, version := range versions {
		c := newClient(t, s, version, `{}`)
		for _, tt := range tests {
			got := result[struct {
				Completion struct {
					Values  []string
					Total   int
					HasMore bool
				}
			}](t, c, t.Context(), "completion/complete", map[string]any{"ref": tt.ref,
				"argument": map[string]any{"name": tt.arg, "value": tt.value}}).Completion
			if got.Values == nil {
				t.Errorf("%s %s=%q: no values array", version, tt.arg, tt.value)
				continue
			}
			if tt.none {
				if len(got.Values) != 0 {
					t.Errorf("%s %s=%q: values %q, want none", version, tt.arg, tt.value, got.Values)
				}
				continue
			}
			if len(got.Values) != tt.count || got.Values[0] != tt.first || got.Values[len(got.Values)-1] != tt.last ||
				got.Total != tt.total || got.HasMore != tt.hasMore {
				t.Errorf("%s %s=%q: %d values %q…, total %d, hasMore %v", version, tt.arg, tt.value, len(got.Values), got.Values[:min(3, len(got.Values))], got.Total, got.HasMore)
			}
		}
	}
}

// TestEverythingChanges checks the tools that change the catalog, through
// a legacy session's notifications and a 2026 listen stream.
func TestEverythingChanges(t *testing.T) {
	s := newServer(t, catalog.Everything)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	legacy := newClient(t, s, "2025-11-25", `{}`)
	result[map[string]any](t, legacy, ctx, "resources/subscribe", map[string]any{"uri": catalog.WatchedResourceURI})
	modern := newClient(t, s, v2026, `{}`)
	out := modern.dispatch(ctx, "subscriptions/listen", map[string]any{"notifications": map[string]any{
		"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": []string{catalog.WatchedResourceURI}}})
	if out.Err != nil || out.Stream == nil {
		t.Fatalf("listen: %+v", out)
	}
	defer out.Stream.Close(server.Disconnected, "")

	for _, tt := range []struct{ tool, method string }{
		{"test_trigger_resource_update", "notifications/resources/updated"},
		{"test_trigger_tool_change", "notifications/tools/list_changed"},
		{"test_trigger_prompt_change", "notifications/prompts/list_changed"},
	} {
		callTool(t, modern, ctx, tt.tool, nil)
		for name, next := range map[string]func(context.Context) (server.Event, error){
			"legacy": legacy.sess.Next, "listen": out.Stream.Next} {
			for {
				ev, err := next(ctx)
				if err != nil {
					t.Fatalf("%s: %s: waiting for %s: %v", tt.tool, name, tt.method, err)
				}
				if ev.Method == tt.method {
					break
				}
				// Periodic updates of the watched resource may come first.
				if ev.Method != "notifications/resources/updated" {
					t.Errorf("%s: %s: unexpected %s", tt.tool, name, ev.Method)
				}
			}
		}
	}
}

func TestEverythingWatchedResourceTicks(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the periodic update")
	}
	s := newServer(t, catalog.Everything)
	c := newClient(t, s, "2025-06-18", `{}`)
	result[map[string]any](t, c, t.Context(), "resources/subscribe", map[string]any{"uri": catalog.WatchedResourceURI})
	ctx, cancel := context.WithTimeout(t.Context(), catalog.WatchedResourceInterval+2*time.Second)
	defer cancel()
	ev, err := c.sess.Next(ctx)
	if err != nil || ev.Method != "notifications/resources/updated" || !strings.Contains(mustJSON(t, ev.Params), catalog.WatchedResourceURI) {
		t.Fatalf("event %+v, %v", ev, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errIs reports whether perr has code and message.
func errIs(perr *protocol.Error, code int64, message string) bool {
	return perr != nil && perr.Code == code && perr.Message == message
}

// The watched resource's timer does not keep a server alive: a daemon
// builds a new one on every reload, and the old one must be collectable.
func TestEverythingLetsTheServerGo(t *testing.T) {
	s, err := server.New(server.Options{SubscribableResources: true})
	if err != nil {
		t.Fatal(err)
	}
	catalog.Everything(s)
	ws := weak.Make(s)
	s = nil
	for range 10 {
		runtime.GC()
		if ws.Value() == nil {
			return
		}
	}
	t.Fatal("the server is still reachable after Everything's timer was set")
}
