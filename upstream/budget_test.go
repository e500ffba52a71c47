package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/transport/stdio"
)

// budgetFake is one fake upstream with 30 extra tools beside its own, and
// a budget of 8 for every client.
const budgetFake = `
[upstreams]
max_tools = 8
always = ["fake__tool-02[01]"]

[mcpServers.fake]
command = "FAKE"
args = ["-tools", "30"]
`

// goSession is a Go SDK client on a session of the aggregated view, over
// real pipes into a stdio transport, with the progress it was sent.
type goSession struct {
	cs       *mcp.ClientSession
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
}

// reports counts the progress notifications of token.
func (g *goSession) reports(token string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range g.progress {
		if p.ProgressToken == token {
			n++
		}
	}
	return n
}

// goConnect opens a session of the aggregated view for a Go SDK client
// named client, speaking version.
func (h *harness) goConnect(t *testing.T, client, version string) *goSession {
	t.Helper()
	h.nextID++
	ss, srv, _, release, err := h.open(t, h.nextID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tr := &stdio.Transport{In: inR, Out: outW, Dispatcher: srv, State: ss, Executor: h.exec, Logger: slog.New(slog.DiscardHandler)}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = tr.Serve(context.Background())
		outW.Close()
		inR.Close()
	}()
	g := &goSession{}
	c := mcp.NewClient(&mcp.Implementation{Name: client, Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			g.mu.Lock()
			g.progress = append(g.progress, req.Params)
			g.mu.Unlock()
		},
	})
	g.cs, err = c.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect at %s: %v", version, err)
	}
	t.Cleanup(func() {
		g.cs.Close()
		<-served
		release()
	})
	return g
}

func (g *goSession) toolNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for tool, err := range g.cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	return names
}

func textOf(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestBudgetSearchAndCall is a budget in effect for a Go SDK client in
// each era: the list fits, search_tools finds a tool the list leaves out,
// call_tool calls it, with progress relayed, and a cancel reaches the
// upstream.
func TestBudgetSearchAndCall(t *testing.T) {
	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			h := newHarness(t, budgetFake)
			g := h.goConnect(t, "some-agent", version)
			names := g.toolNames(t)
			if len(names) > 8 || !slices.Contains(names, "search_tools") || !slices.Contains(names, "call_tool") {
				t.Fatalf("listed %d tools %v, want at most 8 with search_tools and call_tool", len(names), names)
			}
			for _, pinned := range []string{"fake__tool-020", "fake__tool-021"} {
				if !slices.Contains(names, pinned) {
					t.Errorf("upstreams.always's %s not listed: %v", pinned, names)
				}
			}
			if slices.Contains(names, "fake__progress") {
				t.Fatalf("fake__progress listed: the test needs it left out (%v)", names)
			}

			res, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "send progress notifications", "limit": 3}})
			if err != nil || res.IsError {
				t.Fatalf("search_tools: %v %v", err, res)
			}
			var found struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal([]byte(textOf(t, res)), &found); err != nil {
				t.Fatalf("search_tools text: %v: %s", err, textOf(t, res))
			}
			if len(found.Tools) == 0 || found.Tools[0].Name != "fake__progress" || len(found.Tools[0].InputSchema) == 0 {
				t.Fatalf("search_tools found %s, want fake__progress first with its schema", textOf(t, res))
			}

			params := &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "fake__progress", "arguments": map[string]any{"steps": 3, "ms": 1}}}
			params.SetProgressToken("p1")
			res, err = g.cs.CallTool(t.Context(), params)
			if err != nil || res.IsError {
				t.Fatalf("call_tool fake__progress: %v %+v", err, res)
			}
			var echoed struct {
				Arguments map[string]any `json:"arguments"`
			}
			if b, _ := json.Marshal(res.StructuredContent); json.Unmarshal(b, &echoed) != nil || echoed.Arguments["steps"] != float64(3) {
				t.Errorf("call_tool's result is not the tool's own: %+v", res.StructuredContent)
			}
			if !eventually.Within(5*time.Second, func() bool { return g.reports("p1") >= 1 }) {
				t.Errorf("no progress relayed through call_tool")
			}

			// A tool left out of the list is still called by its own name.
			res, err = g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fake__tool-001"})
			if err != nil || res.IsError || textOf(t, res) != "tool-001" {
				t.Errorf("fake__tool-001 by its name: %v %+v", err, res)
			}

			// A cancelled call_tool cancels the upstream's call.
			ctx, cancel := context.WithCancel(t.Context())
			slow := &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "fake__slow", "arguments": map[string]any{"ms": 60000, "announce": true}}}
			slow.SetProgressToken("s1")
			done := make(chan error, 1)
			go func() {
				_, err := g.cs.CallTool(ctx, slow)
				done <- err
			}()
			if !eventually.Within(5*time.Second, func() bool { return g.reports("s1") >= 1 }) {
				t.Fatal("fake__slow never announced it started")
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("cancelled call_tool: %v", err)
			}
			if !eventually.Within(5*time.Second, func() bool { return len(h.fakeCancelled(t, g)) > 0 }) {
				t.Errorf("the upstream never heard of the cancel")
			}
		})
	}
}

// fakeCancelled is the cancellations the fake upstream received.
func (h *harness) fakeCancelled(t *testing.T, g *goSession) []json.RawMessage {
	res, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fake__history"})
	if err != nil {
		t.Fatal(err)
	}
	var hist struct {
		Cancelled []json.RawMessage `json:"cancelled"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &hist)
	return hist.Cancelled
}

// TestBudgetByClient is the default budget: the known limit of the
// client, none for one the table does not know.
func TestBudgetByClient(t *testing.T) {
	h := newHarness(t, `
[mcpServers.fake]
command = "FAKE"
args = ["-tools", "120"]
`)
	cursor := h.goConnect(t, "cursor-vscode", "2025-11-25").toolNames(t)
	if len(cursor) != 80 || !slices.Contains(cursor, "search_tools") {
		t.Errorf("cursor-vscode sees %d tools, want 80 with search_tools", len(cursor))
	}
	other := h.goConnect(t, "some-agent", "2025-11-25").toolNames(t)
	if len(other) < 120 || slices.Contains(other, "search_tools") || slices.Contains(other, "call_tool") {
		t.Errorf("an unknown client sees %d tools (search_tools among them: %v), want all and not the budget's", len(other), slices.Contains(other, "search_tools"))
	}
	code := h.goConnect(t, "Visual Studio Code", "2026-07-28").toolNames(t)
	if len(code) != 128 {
		t.Errorf("Visual Studio Code sees %d tools, want 128", len(code))
	}
}

// TestBudgetMostUsedFirst is the ranking: the tools called most in the
// view come first, counted in the state directory across a restart.
func TestBudgetMostUsedFirst(t *testing.T) {
	state := t.TempDir()
	h := newHarness(t, budgetFake, state)
	g := h.goConnect(t, "some-agent", "2025-11-25")
	before := g.toolNames(t)
	if slices.Contains(before, "fake__tool-030") {
		t.Fatalf("fake__tool-030 listed before any call: %v", before)
	}
	for range 3 {
		if _, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fake__tool-030"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "fake__tool-029"}}); err != nil {
		t.Fatal(err)
	}
	g.cs.Close()
	h.stop()
	if b, err := os.ReadFile(state + "/usage.json"); err != nil || !strings.Contains(string(b), `"fake__tool-030":3`) || !strings.Contains(string(b), `"fake__tool-029":1`) {
		t.Fatalf("usage.json: %s %v", b, err)
	}
	h2 := newHarness(t, budgetFake, state)
	after := h2.goConnect(t, "some-agent", "2025-11-25").toolNames(t)
	if !slices.Contains(after, "fake__tool-030") || !slices.Contains(after, "fake__tool-029") {
		t.Errorf("the most used tools are not listed after a restart: %v", after)
	}
}

// TestBudgetNameTaken is a tool of snodod's own catalog named
// search_tools: it keeps its name, and the budget's is snodod_search_tools.
func TestBudgetNameTaken(t *testing.T) {
	h := newHarness(t, budgetFake)
	h.agg.AddTool(&server.Tool{Name: "search_tools", Description: "the configuration's own", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
			return &server.CallToolResult{Content: []server.Content{server.TextContent("own")}}, nil
		})
	h.m.refreshViews()
	g := h.goConnect(t, "some-agent", "2025-11-25")
	names := g.toolNames(t)
	if !slices.Contains(names, "search_tools") || !slices.Contains(names, "snodod_search_tools") || !slices.Contains(names, "call_tool") {
		t.Fatalf("listed %v, want search_tools (own), snodod_search_tools and call_tool", names)
	}
	res, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "x"}})
	if err != nil || textOf(t, res) != "own" {
		t.Errorf("the own search_tools: %v %+v", err, res)
	}
	res, err = g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "snodod_search_tools", Arguments: map[string]any{"query": "echo"}})
	if err != nil || !strings.Contains(textOf(t, res), "fake__echo") {
		t.Errorf("snodod_search_tools: %v %+v", err, res)
	}
}

// TestCallToolOwn is call_tool of a tool of snodod's own catalog, left out
// of the list by the budget: searched, then called through the server,
// its progress relayed.
func TestCallToolOwn(t *testing.T) {
	h := newHarness(t, budgetFake)
	for _, n := range []string{"own_a", "own_b", "own_c", "own_d", "own_e", "own_f", "own_g", "own_h"} {
		h.agg.AddTool(&server.Tool{Name: n, Description: "filler", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *server.CallToolRequest) (*server.CallToolResult, error) {
				return nil, errors.New("not this one")
			})
	}
	h.agg.AddTool(&server.Tool{Name: "zz_weather", Description: "Tells the weather forecast of a city", Icons: []protocol.Icon{{Src: "https://example.com/sun.png"}}, InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)},
		func(ctx context.Context, req *server.CallToolRequest) (*server.CallToolResult, error) {
			_ = server.ReportProgress(ctx, server.Progress{Progress: 1, Total: 1, HasTotal: true})
			return &server.CallToolResult{Content: []server.Content{server.TextContent("sunny in " + string(req.Arguments))}}, nil
		})
	h.m.refreshViews()
	for _, version := range []string{"2025-06-18", "2025-11-25", "2026-07-28"} {
		g := h.goConnect(t, "some-agent", version)
		names := g.toolNames(t)
		if len(names) != 8 || slices.Contains(names, "zz_weather") {
			t.Fatalf("%s: listed %v, want 8 without zz_weather", version, names)
		}
		res, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_tools", Arguments: map[string]any{"query": "weather forecast"}})
		if err != nil || !strings.Contains(textOf(t, res), `"name":"zz_weather"`) {
			t.Fatalf("%s: search_tools: %v %+v", version, err, res)
		}
		if icons := strings.Contains(textOf(t, res), "sun.png"); icons == (version == "2025-06-18") {
			t.Errorf("%s: search_tools' definitions have icons: %v (2025-06-18's listings leave them out)", version, icons)
		}
		params := &mcp.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "zz_weather", "arguments": map[string]any{"city": "Oslo"}}}
		params.SetProgressToken("w")
		res, err = g.cs.CallTool(t.Context(), params)
		if err != nil || res.IsError || textOf(t, res) != `sunny in {"city":"Oslo"}` {
			t.Fatalf("%s: call_tool zz_weather: %v %+v", version, err, res)
		}
		if !eventually.Within(5*time.Second, func() bool { return g.reports("w") == 1 }) {
			t.Errorf("%s: the own tool's progress was not relayed", version)
		}
	}
}

// TestCallToolRefusals are call_tool's answers to a name it cannot call.
func TestCallToolRefusals(t *testing.T) {
	h := newHarness(t, budgetFake)
	g := h.goConnect(t, "some-agent", "2025-11-25")
	for _, args := range []map[string]any{{}, {"name": "nope__x"}, {"name": "call_tool"}, {"name": "fake__echo", "arguments": []int{1}}} {
		res, err := g.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "call_tool", Arguments: args})
		if err != nil || !res.IsError {
			t.Errorf("call_tool %v: %v %+v, want an isError result", args, err, res)
		}
	}
}
