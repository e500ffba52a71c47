package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// TestDecodeInitializeErrors covers docs/protocol.md §2 step 1 and case 4.
func TestDecodeInitializeErrors(t *testing.T) {
	const message = "initialize requires protocolVersion, capabilities and clientInfo name/version"
	for _, params := range []string{
		"",
		"null",
		`[]`,
		`{}`,
		`{"protocolVersion":"2025-11-25"}`,
		`{"protocolVersion":1}`,
		`{"protocolVersion":1,"capabilities":{},"clientInfo":{"name":"c","version":"1"}}`,
		`{"protocolVersion":"","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`,
		`{"protocolVersion":null,"capabilities":{},"clientInfo":{"name":"c","version":"1"}}`,
		`{"capabilities":{},"clientInfo":{"name":"c","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","clientInfo":{"name":"c","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":[],"clientInfo":{"name":"c","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":null,"clientInfo":{"name":"c","version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":null}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":"c"}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":1,"version":"1"}}`,
		`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":null}}`,
	} {
		got, err := DecodeInitialize(rawOrNil(params))
		if got != nil {
			t.Errorf("DecodeInitialize(%s) = %+v, want nil", params, got)
		}
		checkError(t, "DecodeInitialize("+params+")", err, CodeInvalidParams, message)
	}
}

func TestDecodeInitialize(t *testing.T) {
	for _, tt := range []struct {
		params, version, caps, info string
	}{
		{`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`, "2025-06-18", `{}`, `{"name":"c","version":"1"}`},
		// Any proposal is accepted here; negotiation answers it (case 3).
		{`{"protocolVersion":"1999-01-01","capabilities":{"elicitation":{}},"clientInfo":{"name":"","version":"","title":5},"_meta":5,"extra":[]}`, "1999-01-01", `{"elicitation":{}}`, `{"name":"","version":"","title":5}`},
	} {
		got, err := DecodeInitialize(json.RawMessage(tt.params))
		if err != nil {
			t.Errorf("DecodeInitialize(%s) = %s", tt.params, errorText(err))
			continue
		}
		if got.ProtocolVersion != tt.version || string(got.Capabilities) != tt.caps || string(got.ClientInfo) != tt.info {
			t.Errorf("DecodeInitialize(%s) = %q, %s, %s", tt.params, got.ProtocolVersion, got.Capabilities, got.ClientInfo)
		}
	}
}

func uriList(n int, uri func(i int) string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = `"` + uri(i) + `"`
	}
	return "[" + strings.Join(items, ",") + "]"
}

// TestDecodeListenErrors covers docs/protocol.md §9.1 and case 39.
func TestDecodeListenErrors(t *testing.T) {
	const (
		object   = "subscriptions/listen requires a notifications object"
		list     = "subscriptions/listen resourceSubscriptions must be a list"
		absolute = "subscriptions/listen resourceSubscriptions must contain absolute URI strings"
		tooMany  = "subscriptions/listen resourceSubscriptions accepts at most 1000 URIs"
	)
	n := func(members string) string { return `{"notifications":{` + members + `}}` }
	rs := func(value string) string { return n(`"resourceSubscriptions":` + value) }
	valid := func(i int) string { return fmt.Sprintf("test://r/%d", i) }
	tests := []struct {
		params  string
		message string
	}{
		{"", object},
		{"null", object},
		{`{}`, object},
		{`{"notifications":[]}`, object},
		{`{"notifications":null}`, object},
		{`{"notifications":true}`, object},
		{`{"Notifications":{}}`, object},
		{n(`"toolsListChanged":"yes"`), "subscriptions/listen toolsListChanged must be a boolean"},
		{n(`"promptsListChanged":null`), "subscriptions/listen promptsListChanged must be a boolean"},
		{n(`"resourcesListChanged":1`), "subscriptions/listen resourcesListChanged must be a boolean"},
		{n(`"toolsListChanged":true,"resourcesListChanged":{}`), "subscriptions/listen resourcesListChanged must be a boolean"},
		{n(`"resourcesListChanged":0,"toolsListChanged":[]`), "subscriptions/listen toolsListChanged must be a boolean"},
		{n(`"promptsListChanged":"no","resourceSubscriptions":"x"`), "subscriptions/listen promptsListChanged must be a boolean"},
		{rs(`"x"`), list},
		{rs(`null`), list},
		{rs(`{}`), list},
		{rs(`["relative/path"]`), absolute},
		{rs(`["test://a",5]`), absolute},
		{rs(`[null]`), absolute},
		{rs(`[""]`), absolute},
		{rs(`["not a uri"]`), absolute},
		{rs(`[["test://a"]]`), absolute},
		{rs(uriList(1001, valid)), tooMany},
		{rs(uriList(1001, func(int) string { return "test://same" })), tooMany},
		{rs(uriList(1001, func(int) string { return "relative" })), tooMany},
	}
	for _, tt := range tests {
		got, err := DecodeListen(rawOrNil(tt.params))
		if got != nil {
			t.Errorf("DecodeListen(%.80s) = %+v, want nil", tt.params, got)
		}
		checkError(t, fmt.Sprintf("DecodeListen(%.80s)", tt.params), err, CodeInvalidParams, tt.message)
	}
}

func TestDecodeListen(t *testing.T) {
	thousand := make([]string, 1000)
	for i := range thousand {
		thousand[i] = fmt.Sprintf("test://r/%d", i)
	}
	tests := []struct {
		params string
		want   ListenFilter
	}{
		{`{"notifications":{}}`, ListenFilter{}},
		{`{"notifications":{"toolsListChanged":true,"promptsListChanged":true}}`, ListenFilter{ToolsListChanged: true, PromptsListChanged: true}},
		{`{"notifications":{"toolsListChanged":false,"promptsListChanged":false,"resourcesListChanged":true,"other":"x"},"_meta":{}}`, ListenFilter{ResourcesListChanged: true}},
		{`{"notifications":{"resourceSubscriptions":[]}}`, ListenFilter{ResourceSubscriptions: []string{}}},
		{`{"notifications":{"resourceSubscriptions":["test://watched"]}}`, ListenFilter{ResourceSubscriptions: []string{"test://watched"}}},
		{`{"notifications":{"resourceSubscriptions":["test://b","urn:x","test://b","file:///tmp/a","urn:x"]}}`, ListenFilter{ResourceSubscriptions: []string{"test://b", "urn:x", "file:///tmp/a"}}},
		{`{"notifications":{"resourceSubscriptions":` + uriList(1000, func(i int) string { return thousand[i] }) + `}}`, ListenFilter{ResourceSubscriptions: thousand}},
	}
	for _, tt := range tests {
		got, err := DecodeListen(json.RawMessage(tt.params))
		if err != nil {
			t.Errorf("DecodeListen(%.80s) = %s", tt.params, errorText(err))
			continue
		}
		if !sameFilter(*got, tt.want) {
			t.Errorf("DecodeListen(%.80s) = %+v, want %+v", tt.params, *got, tt.want)
		}
	}
}

// sameFilter compares filters, telling a nil list from an empty one.
func sameFilter(a, b ListenFilter) bool {
	return a.ToolsListChanged == b.ToolsListChanged && a.PromptsListChanged == b.PromptsListChanged &&
		a.ResourcesListChanged == b.ResourcesListChanged &&
		(a.ResourceSubscriptions == nil) == (b.ResourceSubscriptions == nil) &&
		slices.Equal(a.ResourceSubscriptions, b.ResourceSubscriptions)
}

// TestAccept covers docs/protocol.md §9.2 and case 36.
func TestAccept(t *testing.T) {
	requested := ListenFilter{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true, ResourceSubscriptions: []string{"test://watched"}}
	tests := []struct {
		name   string
		filter ListenFilter
		caps   ServerCapabilities
		want   ListenFilter
	}{
		{"everything advertised", requested, ServerCapabilities{ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true, ResourcesSubscribe: true}, requested},
		{"nothing advertised", requested, ServerCapabilities{Tools: true, Prompts: true, Resources: true}, ListenFilter{}},
		{"no prompts (case 36)", ListenFilter{ToolsListChanged: true, PromptsListChanged: true}, ServerCapabilities{Tools: true, ToolsListChanged: true}, ListenFilter{ToolsListChanged: true}},
		{"not requested stays off", ListenFilter{}, ServerCapabilities{ToolsListChanged: true, ResourcesSubscribe: true}, ListenFilter{}},
		{"subscriptions only", requested, ServerCapabilities{ResourcesSubscribe: true}, ListenFilter{ResourceSubscriptions: []string{"test://watched"}}},
		{"empty list kept", ListenFilter{ResourceSubscriptions: []string{}}, ServerCapabilities{ResourcesSubscribe: true}, ListenFilter{ResourceSubscriptions: []string{}}},
		{"resources list changes only", requested, ServerCapabilities{ResourcesListChanged: true}, ListenFilter{ResourcesListChanged: true}},
	}
	for _, tt := range tests {
		got := tt.filter.Accept(tt.caps)
		if !sameFilter(got, tt.want) {
			t.Errorf("%s: Accept = %+v, want %+v", tt.name, got, tt.want)
		}
	}
	got := requested.Accept(ServerCapabilities{ResourcesSubscribe: true})
	got.ResourceSubscriptions[0] = "changed"
	if requested.ResourceSubscriptions[0] != "test://watched" {
		t.Error("Accept shares the request's list")
	}
}

func TestIsAbsoluteURI(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"test://watched", true},
		{"test://template/7/data", true},
		{"test://template/{id}/data", true},
		{"https://example.com/x?y=1#z", true},
		{"file:///tmp/a", true},
		{"urn:isbn:0451450523", true},
		{"mailto:a@example.com", true},
		{"a:b", true},
		{"", false},
		{"relative/path", false},
		{"relative", false},
		{"/absolute/path", false},
		{"//host/path", false},
		{"not a uri", false},
		{"://x", false},
		{"1http://x", false},
		{"http://exa mple.com", false},
		{"http://[::1", false},
		{"test://a\x7f", false},
	}
	for _, tt := range tests {
		if got := IsAbsoluteURI(tt.s); got != tt.want {
			t.Errorf("IsAbsoluteURI(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

// TestJSONHelpers pins the value tests the checks above are built on.
func TestJSONHelpers(t *testing.T) {
	if k := JSONKind(json.RawMessage(" \n\t{}")); k != '{' {
		t.Errorf("JSONKind = %q", k)
	}
	if k := JSONKind(nil); k != 0 {
		t.Errorf("JSONKind(nil) = %q", k)
	}
	if s, ok := String(json.RawMessage(` "a\u0041" `)); !ok || s != "aA" {
		t.Errorf("jsonString = %q, %v", s, ok)
	}
	for _, raw := range []string{"", "null", "1", "{}", `"unterminated`} {
		if _, ok := String(rawOrNil(raw)); ok {
			t.Errorf("String(%s) ok", raw)
		}
	}
	for _, raw := range []string{"", "null", "1", `"true"`, "tru"} {
		if _, ok := jsonBool(rawOrNil(raw)); ok {
			t.Errorf("jsonBool(%s) ok", raw)
		}
	}
	if b, ok := jsonBool(json.RawMessage("false")); !ok || b {
		t.Errorf("jsonBool(false) = %v, %v", b, ok)
	}
	if m, err := paramsObject(json.RawMessage(" null ")); m != nil || err != nil {
		t.Errorf("paramsObject(null) = %v, %v", m, err)
	}
	for _, raw := range []string{"5", "[]", `"x"`, "nul", "{"} {
		if _, err := paramsObject(json.RawMessage(raw)); err != ErrParamsType {
			t.Errorf("paramsObject(%s) = %s, want ErrParamsType", raw, errorText(err))
		}
	}
}
