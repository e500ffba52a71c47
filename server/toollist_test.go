package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// listedNames decodes a tools/list result's names and cursor.
func listedNames(t *testing.T, out string) ([]string, string) {
	t.Helper()
	var res struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("tools/list: %v: %s", err, out)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names, res.NextCursor
}

// TestToolListFilter: a filter hides tools from one client's listing
// (paged, its cursor valid), by the client's name in either era, and
// never refuses a call of a hidden tool.
func TestToolListFilter(t *testing.T) {
	h := newRelayHarness(t)
	var tools []RawTool
	for i := range 150 {
		name := fmt.Sprintf("t%03d", i)
		tools = append(tools, RawTool{Name: name, Definition: json.RawMessage(`{"name":"x","inputSchema":{"type":"object"}}`), Handler: echoRelay(`{"content":[]}`)})
	}
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": {Tools: tools}})
	var seen []ToolListing
	h.s.SetToolListFilter(func(l ToolListing) func(string) bool {
		seen = append(seen, l)
		if l.ClientName == "all" {
			return nil
		}
		return func(n string) bool { return n >= "t020" } // 130 of 150: two pages
	})
	names, cursor := listedNames(t, h.legacy("tools/list", ""))
	if len(names) != 100 || names[0] != "t020" || cursor == "" {
		t.Fatalf("first page %d from %v, cursor %q", len(names), names[:1], cursor)
	}
	rest, cursor := listedNames(t, h.legacy("tools/list", fmt.Sprintf(`{"cursor":%q}`, cursor)))
	if len(rest) != 30 || rest[29] != "t149" || cursor != "" {
		t.Errorf("second page %d, cursor %q", len(rest), cursor)
	}
	if len(seen) == 0 || seen[0].ClientName != "c" || len(seen[0].Names) != 150 || !slices.IsSorted(seen[0].Names) {
		t.Errorf("the filter saw %+v", seen[0])
	}
	if out := h.legacy("tools/call", `{"name":"t001","arguments":{}}`); strings.HasPrefix(out, "error") {
		t.Errorf("a hidden tool's call: %s", out)
	}
	modernInfo := `,"io.modelcontextprotocol/clientInfo":{"name":"all","version":"1"}}`
	p := "{" + strings.TrimSuffix(modernMeta, "}") + modernInfo + "}"
	all, _ := listedNames(t, encodeOutcome(t, h.s.Dispatch(context.Background(), &Request{ID: protocol.IntID(2), Method: "tools/list", Params: json.RawMessage(p)})))
	if len(all) != 100 || all[0] != "t000" {
		t.Errorf("a 2026 client named all: %d from %v", len(all), all[:1])
	}
}

// TestCallToolFromHandler: a handler calls another tool of its server
// through CallTool, as its own client would; outside a handler it fails.
func TestCallToolFromHandler(t *testing.T) {
	h := newRelayHarness(t)
	h.s.AddTool(&Tool{Name: "inner", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)},
		func(ctx context.Context, req *CallToolRequest) (*CallToolResult, error) {
			return &CallToolResult{Content: []Content{TextContent("inner got " + string(req.Arguments))}}, nil
		})
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": {Tools: []RawTool{{Name: "outer", Definition: json.RawMessage(`{"name":"outer","inputSchema":{"type":"object"}}`),
		Handler: func(ctx context.Context, req *RawRequest) (*RawResult, error) {
			return h.s.CallTool(ctx, protocol.SetMember(req.Params, "name", json.RawMessage(`"inner"`)))
		}}}}})
	if out := h.legacy("tools/call", `{"name":"outer","arguments":{"n":1}}`); !strings.Contains(out, `inner got {\"n\":1}`) {
		t.Errorf("legacy: %s", out)
	}
	if out := h.modern("tools/call", `"name":"outer","arguments":{"n":2}`); !strings.Contains(out, `inner got {\"n\":2}`) {
		t.Errorf("2026: %s", out)
	}
	if out := h.legacy("tools/call", `{"name":"outer","arguments":{}}`); !strings.Contains(out, "isError") && !strings.HasPrefix(out, "error") {
		t.Errorf("the inner tool's validation: %s", out)
	}
	if _, err := h.s.CallTool(context.Background(), json.RawMessage(`{"name":"inner"}`)); !errors.Is(err, errNotInHandler) {
		t.Errorf("outside a handler: %v", err)
	}
	if own := h.s.OwnTools(); len(own) != 1 || !strings.Contains(string(own["inner"]), `"required":["n"]`) {
		t.Errorf("OwnTools: %s", own)
	}
	if owner, relayed := h.s.ToolRelayed("outer"); owner != "up" || !relayed {
		t.Errorf("ToolRelayed(outer) = %q %v", owner, relayed)
	}
}
