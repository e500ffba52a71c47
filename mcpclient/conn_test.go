package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/protocol"
)

// The client's progressToken and per-hop reserved _meta keys are replaced
// by this hop's; everything else passes (docs/upstreams.md §5).
func TestCallMeta(t *testing.T) {
	clientMeta := map[string]any{
		"progressToken":                        "client-token",
		"io.modelcontextprotocol/clientInfo":   map[string]any{"name": "client", "version": "1"},
		"io.modelcontextprotocol/logLevel":     "debug",
		"io.modelcontextprotocol/related-task": map[string]any{"taskId": "t1"},
		"dev.example/keep":                     7,
		"traceparent":                          "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	passed := []string{"io.modelcontextprotocol/related-task", "dev.example/keep", "traceparent"}
	tests := []struct {
		name     string
		flags    []string
		progress bool
		// want are the _meta members the upstream must get besides passed.
		want map[string]string
	}{
		{"legacy", nil, false, map[string]string{}},
		{"legacy with progress", nil, true, map[string]string{"progressToken": "ID"}},
		{"2026", []string{"-era", "2026"}, false, map[string]string{
			"io.modelcontextprotocol/protocolVersion":    `"2026-07-28"`,
			"io.modelcontextprotocol/clientCapabilities": `{"elicitation":{}}`,
			"io.modelcontextprotocol/clientInfo":         `{"name":"snodod-test","version":"9"}`,
		}},
		{"2026 with progress", []string{"-era", "2026"}, true, map[string]string{
			"progressToken": "ID",
			"io.modelcontextprotocol/protocolVersion":    `"2026-07-28"`,
			"io.modelcontextprotocol/clientCapabilities": `{"elicitation":{}}`,
			"io.modelcontextprotocol/clientInfo":         `{"name":"snodod-test","version":"9"}`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Options{}
			cfg.ClientInfo.Name, cfg.ClientInfo.Version = "snodod-test", "9"
			c := startFake(t, cfg, tt.flags...)
			o := CallOptions{ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)}
			if tt.progress {
				o.Progress = func(json.RawMessage) {}
			}
			res, err := c.Call(context.Background(), "tools/call", toolParams(t, "echo", map[string]any{"x": 1}, clientMeta), o)
			if err != nil {
				t.Fatal(err)
			}
			sc := structuredContent(t, res)
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(sc["meta"], &meta); err != nil {
				t.Fatalf("meta %s: %v", sc["meta"], err)
			}
			if string(sc["arguments"]) != `{"x":1}` {
				t.Errorf("arguments = %s, want them as sent", sc["arguments"])
			}
			want := map[string]string{}
			for _, k := range passed {
				b, _ := json.Marshal(clientMeta[k])
				want[k] = string(b)
			}
			for k, v := range tt.want {
				if v == "ID" {
					v = string(sc["id"]) // the token is the Conn's id: unique on the Conn
				}
				want[k] = v
			}
			got := map[string]string{}
			for k, v := range meta {
				got[k] = string(v)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("upstream's _meta =\n %v\nwant\n %v", got, want)
			}
		})
	}
}

// CallOptions.TraceParent replaces the client's traceparent and
// tracestate in _meta, in both eras, even where nothing else is stamped
// (a legacy call without progress); a call without it passes the
// client's (TestCallMeta).
func TestCallTraceParent(t *testing.T) {
	const mine = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name, state string
		flags       []string
	}{
		{"legacy", "", nil},
		{"legacy with tracestate", "snodod=1", nil},
		{"2026", "", []string{"-era", "2026"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startFake(t, Options{}, tc.flags...)
			res, err := c.Call(context.Background(), "tools/call", toolParams(t, "echo", map[string]any{},
				map[string]any{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "client=1"}),
				CallOptions{TraceParent: mine, TraceState: tc.state})
			if err != nil {
				t.Fatal(err)
			}
			var meta map[string]json.RawMessage
			if err := json.Unmarshal(structuredContent(t, res)["meta"], &meta); err != nil {
				t.Fatal(err)
			}
			if string(meta["traceparent"]) != `"`+mine+`"` {
				t.Errorf("traceparent %s, want %s", meta["traceparent"], mine)
			}
			state, ok := meta["tracestate"]
			if tc.state == "" && ok || tc.state != "" && string(state) != `"`+tc.state+`"` {
				t.Errorf("tracestate %s (%v), want %q", state, ok, tc.state)
			}
		})
	}
}

// Two callers at once get their own answers over distinct ids: a session's
// client id never reaches the upstream, so two sessions both using "id":1
// cannot meet there. The fake refuses a reused id.
func TestConcurrentCalls(t *testing.T) {
	c := startFake(t, Options{})
	const n = 20
	var wg sync.WaitGroup
	ids := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := c.Call(context.Background(), "tools/call", toolParams(t, "slow", map[string]any{"ms": 20, "who": i}, map[string]any{"progressToken": 1}), CallOptions{Owner: i})
			if err != nil {
				errs[i] = err
				return
			}
			sc := structuredContent(t, res)
			var a struct{ Who int }
			_ = json.Unmarshal(sc["arguments"], &a)
			if a.Who != i {
				errs[i] = fmt.Errorf("caller %d got caller %d's answer", i, a.Who)
			}
			ids[i] = string(sc["id"])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != n {
		t.Errorf("upstream ids %v are not distinct", ids)
	}
	if c.InFlight() != 0 {
		t.Errorf("InFlight = %d after every call returned", c.InFlight())
	}
}

// Progress reaches only its own call, in order, without the token, only
// when it increases; colliding client tokens do not matter.
func TestProgress(t *testing.T) {
	c := startFake(t, Options{})
	type update struct {
		Progress      float64
		Total         float64
		Message       string
		ProgressToken any
	}
	const callers = 3
	got := make([][]update, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			o := CallOptions{Progress: func(p json.RawMessage) {
				var u update
				if err := json.Unmarshal(p, &u); err != nil {
					t.Errorf("progress params %s: %v", p, err)
				}
				got[i] = append(got[i], u)
			}}
			params := toolParams(t, "progress", map[string]any{"steps": 3, "repeat": true}, map[string]any{"progressToken": "same-for-all"})
			if _, err := c.Call(context.Background(), "tools/call", params, o); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, us := range got {
		want := []update{{1, 3, "step 1", nil}, {2, 3, "step 2", nil}, {3, 3, "step 3", nil}}
		if !slices.Equal(us, want) {
			t.Errorf("caller %d got progress %+v, want %+v", i, us, want)
		}
	}
	if s := c.Stats().StaleProgress; s != 3*callers {
		t.Errorf("StaleProgress = %d, want %d (each repeated value)", s, 3*callers)
	}
}

// A cancelled call sends notifications/cancelled for the upstream's id and
// returns at once; the upstream's late answer is dropped.
func TestCancel(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late answer %v", late), func(t *testing.T) {
			c := startFake(t, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			o := CallOptions{Progress: func(json.RawMessage) { cancel() }} // cancel once it runs
			params := toolParams(t, "slow", map[string]any{"ms": 300, "ignoreCancel": late, "announce": true}, nil)
			_, err := c.Call(ctx, "tools/call", params, o)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Call = %v, want context.Canceled", err)
			}
			if late {
				eventually.True(t, "the late answer", func() bool { return c.Stats().LateAnswers == 1 })
			}
			h := fakeHistory(t, c)
			var slowID string
			for _, r := range h.Requests {
				if r.Tool == "slow" {
					slowID = string(r.ID)
				}
			}
			if len(h.Cancelled) != 1 || string(h.Cancelled[0].RequestID) != slowID || !strings.HasPrefix(h.Cancelled[0].Reason, "snodod: ") {
				t.Errorf("upstream got cancellations %+v, want one for the slow call's id %s", h.Cancelled, slowID)
			}
			if s := c.Stats(); s.Cancelled != 1 {
				t.Errorf("Stats = %+v, want 1 cancelled", s)
			}
		})
	}
}

// The upstream's error responses come back as sent.
func TestCallErrors(t *testing.T) {
	c := startFake(t, Options{})
	_, err := c.Call(context.Background(), "no/such/method", nil, CallOptions{})
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr.Code != protocol.CodeMethodNotFound || perr.Message != "Method not found: no/such/method" {
		t.Errorf("Call = %v, want the upstream's -32601", err)
	}
	_, err = c.Call(context.Background(), "tools/call", json.RawMessage(`[1]`), CallOptions{})
	if err == nil || !strings.Contains(err.Error(), "params must be a JSON object") {
		t.Errorf("Call with array params = %v, want a params error", err)
	}
}

func TestList(t *testing.T) {
	c := startFake(t, Options{}, "-tools", "250", "-prompts", "3", "-resources", "101", "-templates", "2", "-page-size", "100")
	tests := []struct {
		method string
		n      int
		first  string
	}{
		{"tools/list", fakebuild.BehaviourTools + 250, `"name":"echo"`},
		{"prompts/list", 3, `"name":"prompt-001"`},
		{"resources/list", 101, `"uri":"fake://res/001"`},
		{"resources/templates/list", 2, `"uriTemplate":"fake://tpl/001/{x}"`},
	}
	for _, tt := range tests {
		items, err := c.List(context.Background(), tt.method)
		if err != nil {
			t.Errorf("List(%s): %v", tt.method, err)
			continue
		}
		if len(items) != tt.n || !strings.Contains(string(items[0]), tt.first) {
			t.Errorf("List(%s) = %d items starting %s, want %d starting with %s", tt.method, len(items), items[0], tt.n, tt.first)
		}
	}
	if _, err := c.List(context.Background(), "tools/call"); err == nil {
		t.Error("List(tools/call) succeeded")
	}
}

func TestListRepeatedCursor(t *testing.T) {
	c := startFake(t, Options{}, "-tools", "10", "-page-size", "2", "-repeat-cursor")
	_, err := c.List(context.Background(), "tools/list")
	if err == nil || !strings.Contains(err.Error(), `repeated the cursor "again"`) {
		t.Errorf("List = %v, want the repeated cursor refused", err)
	}
}

func TestPing(t *testing.T) {
	for _, era := range []string{"legacy", "2026"} {
		t.Run(era, func(t *testing.T) {
			c := startFake(t, Options{}, "-era", era)
			if err := c.Ping(context.Background()); err != nil {
				t.Errorf("Ping: %v", err)
			}
		})
	}
}
