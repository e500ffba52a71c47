package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// relayHarness is a server with relayed items and helpers that dispatch
// requests as a legacy session and as 2026 requests.
type relayHarness struct {
	t    *testing.T
	s    *Server
	sess *SessionState
}

func newRelayHarness(t *testing.T) *relayHarness {
	t.Helper()
	s, err := New(Options{Info: testServerInfo, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := &relayHarness{t: t, s: s, sess: NewSessionState(0)}
	if _, _, perr := s.Initialize(h.sess, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)); perr != nil {
		t.Fatal(perr)
	}
	s.Notify(h.sess, "notifications/initialized", nil)
	return h
}

// encode writes an outcome as the transport would: the result or the error.
func encodeOutcome(t *testing.T, o Outcome) string {
	t.Helper()
	if o.Err != nil {
		var line struct {
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal(protocol.AppendError(nil, protocol.IntID(1), o.Err), &line); err != nil {
			t.Fatal(err)
		}
		return "error " + string(line.Error)
	}
	b, err := protocol.AppendValue(nil, o.Result)
	if err != nil {
		t.Fatalf("encode result: %v", err)
	}
	return string(b)
}

func (h *relayHarness) legacy(method, params string) string {
	h.t.Helper()
	req := &Request{ID: protocol.IntID(1), Method: method, Params: json.RawMessage(params), State: h.sess,
		Header: http.Header{HeaderProtocolVersion: {"2025-11-25"}}}
	return encodeOutcome(h.t, h.s.Dispatch(context.Background(), req))
}

const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// modern dispatches a 2026 request; params are the members besides _meta.
func (h *relayHarness) modern(method, params string) string {
	h.t.Helper()
	p := "{" + modernMeta
	if params != "" {
		p += "," + params
	}
	p += "}"
	return encodeOutcome(h.t, h.s.Dispatch(context.Background(), &Request{ID: protocol.IntID(1), Method: method, Params: json.RawMessage(p)}))
}

func echoRelay(result string) RawHandler {
	return func(ctx context.Context, req *RawRequest) (*RawResult, error) {
		return &RawResult{Result: json.RawMessage(result)}, nil
	}
}

func TestRelayedListings(t *testing.T) {
	h := newRelayHarness(t)
	h.s.AddTool(&Tool{Name: "own"}, func(context.Context, *CallToolRequest) (*CallToolResult, error) { return nil, nil })
	refused := h.s.ReplaceRelayed(map[string]RelayedItems{"up": {
		Tools: []RawTool{
			{Name: "gh__search", Definition: json.RawMessage(`{"name":"search","inputSchema":{"type":"object","x-extra":1},"icons":[{"src":"a.png"}],"execution":{"taskSupport":"optional"}}`), Handler: echoRelay(`{}`)},
			{Name: "own", Definition: json.RawMessage(`{"name":"own"}`), Handler: echoRelay(`{}`)},
			{Name: "bad", Definition: json.RawMessage(`[1]`), Handler: echoRelay(`{}`)},
		},
		Resources: []RawResource{{URI: "file:///a", Definition: json.RawMessage(`{"uri":"file:///a","name":"a"}`), Handler: echoRelay(`{}`)}},
	}})["up"]
	if want := []string{"tool own", "tool bad"}; !slices.Equal(refused, want) {
		t.Errorf("refused %q, want %q", refused, want)
	}
	got := h.legacy("tools/list", `{}`)
	want := `{"tools":[{"execution":{"taskSupport":"optional"},"icons":[{"src":"a.png"}],"inputSchema":{"type":"object","x-extra":1},"name":"gh__search"},{"name":"own","inputSchema":{"type":"object"}}]}`
	if got != want {
		t.Errorf("tools/list:\n got %s\nwant %s", got, want)
	}
	h.sess.SetNegotiated("2025-06-18")
	req := &Request{ID: protocol.IntID(1), Method: "tools/list", State: h.sess, Header: http.Header{HeaderProtocolVersion: {"2025-06-18"}}}
	if got := encodeOutcome(t, h.s.Dispatch(context.Background(), req)); strings.Contains(got, "icons") {
		t.Errorf("2025-06-18 listing keeps the relayed icons: %s", got)
	}
	if got := h.legacy("resources/list", `{}`); got != `{"resources":[{"name":"a","uri":"file:///a"}]}` {
		t.Errorf("resources/list: %s", got)
	}
}

// TestRelayedListingKeepsHTMLCharacters pins that a relayed definition is
// listed with its <, > and & as they are (docs/transport.md §11.1), as a
// registered item's are, not escaped as json.Marshal escapes them.
func TestRelayedListingKeepsHTMLCharacters(t *testing.T) {
	h := newRelayHarness(t)
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": {Tools: []RawTool{
		{Name: "t", Definition: json.RawMessage(`{"name":"t","description":"a <b> & c"}`), Handler: echoRelay(`{}`)},
	}}})
	want := `{"tools":[{"description":"a <b> & c","name":"t"}]}`
	if got := h.legacy("tools/list", `{}`); got != want {
		t.Errorf("tools/list:\n got %s\nwant %s", got, want)
	}
}

// TestReplaceRelayedNotifies checks one list change per kind that changed,
// and none for an identical replacement.
func TestReplaceRelayedNotifies(t *testing.T) {
	h := newRelayHarness(t)
	items := RelayedItems{
		Tools:   []RawTool{{Name: "t", Definition: json.RawMessage(`{"name":"t"}`), Handler: echoRelay(`{}`)}},
		Prompts: []RawPrompt{{Name: "p", Definition: json.RawMessage(`{"name":"p"}`), Handler: echoRelay(`{}`)}},
	}
	events := func() []string {
		var out []string
		for {
			ev, ok, _ := h.sess.Poll()
			if !ok {
				return out
			}
			out = append(out, ev.Method)
		}
	}
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": items})
	if got, want := events(), []string{"notifications/tools/list_changed", "notifications/prompts/list_changed"}; !slices.Equal(got, want) {
		t.Errorf("first replace: %q, want %q", got, want)
	}
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": items})
	if got := events(); len(got) != 0 {
		t.Errorf("identical replace sent %q", got)
	}
	items.Tools[0].Definition = json.RawMessage(`{"name":"t","description":"new"}`)
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": items})
	if got, want := events(), []string{"notifications/tools/list_changed"}; !slices.Equal(got, want) {
		t.Errorf("changed tool: %q, want %q", got, want)
	}
	h.s.ReplaceRelayed(map[string]RelayedItems{"up": {}})
	if got, want := events(), []string{"notifications/tools/list_changed", "notifications/prompts/list_changed"}; !slices.Equal(got, want) {
		t.Errorf("emptied: %q, want %q", got, want)
	}
}

func TestRelayedCallShaping(t *testing.T) {
	h := newRelayHarness(t)
	var seen []*RawRequest
	var mu sync.Mutex
	relayAs(h.s, "up", RelayedItems{Tools: []RawTool{{Name: "x__t", Definition: json.RawMessage(`{"name":"t","inputSchema":{"type":"string"}}`),
		Handler: func(ctx context.Context, req *RawRequest) (*RawResult, error) {
			mu.Lock()
			seen = append(seen, req)
			mu.Unlock()
			return &RawResult{Result: json.RawMessage(`{"content":[{"type":"text","text":"<ok>"}],"structuredContent":[1],"resultType":"complete","ttlMs":5,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"},"k":1}}`)}, nil
		}}}})
	legacy := h.legacy("tools/call", `{"name":"x__t","arguments":{"a":"not a string schema"},"_meta":{"progressToken":"p1"}}`)
	if want := `{"content":[{"type":"text","text":"<ok>"}],"_meta":{"k":1}}`; legacy != want {
		t.Errorf("legacy:\n got %s\nwant %s", legacy, want)
	}
	modern := h.modern("tools/call", `"name":"x__t","arguments":{}`)
	if want := `{"content":[{"type":"text","text":"<ok>"}],"structuredContent":[1],"resultType":"complete","ttlMs":5,"_meta":{"k":1,"io.modelcontextprotocol/serverInfo":{"name":"snodod","version":"1.0.0"}}}`; modern != want {
		t.Errorf("2026:\n got %s\nwant %s", modern, want)
	}
	if len(seen) != 2 || seen[0].Modern || string(seen[0].ProgressToken) != `"p1"` || seen[0].Name != "x__t" || !seen[1].Modern || seen[1].Version != "2026-07-28" {
		t.Errorf("requests seen: %+v", seen)
	}
	if !strings.Contains(string(seen[0].Params), `"arguments":{"a":"not a string schema"}`) {
		t.Errorf("arguments were validated or rewritten: %s", seen[0].Params)
	}
}

func TestRelayedErrors(t *testing.T) {
	h := newRelayHarness(t)
	upstreamErr := &protocol.Error{Code: -31001, Message: "snodod: upstream \"x\" is unavailable", Data: map[string]any{"name": "x"}}
	relayAs(h.s, "up", RelayedItems{Tools: []RawTool{
		{Name: "e", Definition: json.RawMessage(`{"name":"e"}`), Handler: func(context.Context, *RawRequest) (*RawResult, error) { return nil, upstreamErr }},
		{Name: "p", Definition: json.RawMessage(`{"name":"p"}`), Handler: func(context.Context, *RawRequest) (*RawResult, error) { panic("boom") }},
		{Name: "n", Definition: json.RawMessage(`{"name":"n"}`), Handler: echoRelay(`[1]`)},
	}})
	for _, tc := range []struct{ name, want string }{
		{"e", `error {"code":-31001,"message":"snodod: upstream \"x\" is unavailable","data":{"name":"x"}}`},
		{"p", `error {"code":-32603,"message":"Request worker failed"}`},
		{"n", `error {"code":-32603,"message":"Server produced an invalid result"}`},
	} {
		if got := h.legacy("tools/call", `{"name":"`+tc.name+`"}`); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRelayedInputRequired is a 2026 round trip: the handler's state comes
// back on the retry, bound to the request.
func TestRelayedInputRequired(t *testing.T) {
	h := newRelayHarness(t)
	var got *RawRequest
	relayAs(h.s, "up", RelayedItems{Tools: []RawTool{{Name: "ask", Definition: json.RawMessage(`{"name":"ask"}`),
		Handler: func(ctx context.Context, req *RawRequest) (*RawResult, error) {
			got = req
			if req.State == nil {
				return &RawResult{InputRequests: json.RawMessage(`{"u1":{"method":"elicitation/create","params":{"message":"?"}}}`), State: []byte("upstream gh: inner-state")}, nil
			}
			return &RawResult{Result: json.RawMessage(`{"content":[]}`)}, nil
		}}}})
	first := h.modern("tools/call", `"name":"ask","arguments":{"q":1}`)
	var ir struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  string          `json:"requestState"`
	}
	if err := json.Unmarshal([]byte(first), &ir); err != nil || ir.ResultType != "input_required" ||
		string(ir.InputRequests) != `{"u1":{"method":"elicitation/create","params":{"message":"?"}}}` {
		t.Fatalf("first round: %s", first)
	}
	retry := `"name":"ask","arguments":{"q":1},"inputResponses":{"u1":{"action":"decline"}},"requestState":"` + ir.RequestState + `"`
	if res := h.modern("tools/call", retry); !strings.Contains(res, `"resultType":"complete"`) {
		t.Fatalf("retry: %s", res)
	}
	if string(got.State) != "upstream gh: inner-state" || string(got.InputResponses["u1"]) != `{"action":"decline"}` {
		t.Errorf("retry request: state %q responses %v", got.State, got.InputResponses)
	}
	for name, params := range map[string]string{
		"other arguments": `"name":"ask","arguments":{"q":2},"requestState":"` + ir.RequestState + `"`,
		"forged":          `"name":"ask","arguments":{"q":1},"requestState":"eA.` + ir.RequestState[strings.LastIndexByte(ir.RequestState, '.')+1:] + `"`,
		"not a string":    `"name":"ask","arguments":{"q":1},"requestState":1`,
	} {
		if res := h.modern("tools/call", params); !strings.HasPrefix(res, `error {"code":-32602`) {
			t.Errorf("%s: %s, want -32602", name, res)
		}
	}
	if res := h.legacy("tools/call", `{"name":"ask"}`); res != `error {"code":-32603,"message":"Input requests are not supported in this protocol version"}` {
		t.Errorf("legacy input_required: %s", res)
	}
}

func TestRelayedReadRouting(t *testing.T) {
	h := newRelayHarness(t)
	h.s.AddResourceTemplate(&ResourceTemplate{URITemplate: "own://{x}", Name: "own"}, func(context.Context, *ReadResourceRequest) (*ReadResourceResult, error) {
		return &ReadResourceResult{Contents: []ResourceContents{{URI: "own://1", Text: "own"}}}, nil
	})
	reader := func(tag string) RawHandler {
		return func(ctx context.Context, req *RawRequest) (*RawResult, error) {
			return &RawResult{Result: json.RawMessage(`{"contents":[{"uri":"` + req.Name + `","text":"` + tag + `"}]}`)}, nil
		}
	}
	relayAs(h.s, "up", RelayedItems{
		Resources: []RawResource{{URI: "mem://exact", Definition: json.RawMessage(`{"uri":"mem://exact","name":"e"}`), Handler: reader("exact")}},
		Templates: []RawTemplate{
			{URITemplate: "repo://{owner}/{+path}", Definition: json.RawMessage(`{"uriTemplate":"repo://{owner}/{+path}","name":"r"}`), Handler: reader("template")},
			{URITemplate: "own://{x}", Definition: json.RawMessage(`{"uriTemplate":"own://{x}","name":"o"}`), Handler: reader("stolen")},
		},
	})
	h.s.SetReadFallback(reader("fallback"))
	for uri, want := range map[string]string{
		"mem://exact":           "exact",
		"repo://me/a/b/c.go":    "template",
		"own://1":               "own",
		"elsewhere://anything/": "fallback",
	} {
		if got := h.legacy("resources/read", `{"uri":"`+uri+`"}`); !strings.Contains(got, `"text":"`+want+`"`) {
			t.Errorf("read %s: %s, want %s", uri, got, want)
		}
	}
	if got := h.modern("resources/read", `"uri":"mem://exact"`); !strings.Contains(got, `"ttlMs":0`) || !strings.Contains(got, `"cacheScope":"private"`) {
		t.Errorf("2026 read lacks the cache fields: %s", got)
	}
}

type recordingHook struct {
	mu     sync.Mutex
	events []string
}

func (r *recordingHook) Subscribe(_ *SessionState, uri string) {
	r.mu.Lock()
	r.events = append(r.events, "+"+uri)
	r.mu.Unlock()
}

func (r *recordingHook) Unsubscribe(_ *SessionState, uri string) {
	r.mu.Lock()
	r.events = append(r.events, "-"+uri)
	r.mu.Unlock()
}

func TestSubscriptionHook(t *testing.T) {
	h := newRelayHarness(t)
	hook := &recordingHook{}
	h.s.SetSubscriptionHook(hook)
	h.s.Advertise(protocol.ServerCapabilities{Resources: true, ResourcesSubscribe: true})
	h.legacy("resources/subscribe", `{"uri":"mem://a"}`)
	h.legacy("resources/unsubscribe", `{"uri":"mem://a"}`)
	o := h.s.Dispatch(context.Background(), &Request{ID: protocol.StringID("l"), Method: "subscriptions/listen",
		Params: json.RawMessage(`{` + modernMeta + `,"notifications":{"resourceSubscriptions":["mem://b","mem://b","mem://c"]}}`)})
	if o.Stream == nil {
		t.Fatalf("listen: %+v", o.Err)
	}
	o.Stream.Close(Disconnected, "")
	o.Stream.Close(Disconnected, "")
	want := []string{"+mem://a", "-mem://a", "+mem://b", "+mem://c", "-mem://b", "-mem://c"}
	if !slices.Equal(hook.events, want) {
		t.Errorf("hook saw %q, want %q", hook.events, want)
	}
}

func TestIdentitySetters(t *testing.T) {
	h := newRelayHarness(t)
	h.s.SetInfo(protocol.Implementation{Name: "upstream-x", Version: "9"})
	h.s.SetInstructions("use it well")
	h.s.Advertise(protocol.ServerCapabilities{Tools: true, Completions: true})
	res, _, perr := h.s.Initialize(NewSessionState(0), json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`))
	if perr != nil {
		t.Fatal(perr)
	}
	got := jsonOf(t, res)
	for _, want := range []string{`"name":"upstream-x","version":"9"`, `"instructions":"use it well"`, `"tools":{"listChanged":true}`, `"completions":{}`} {
		if !strings.Contains(got, want) {
			t.Errorf("initialize %s lacks %s", got, want)
		}
	}
	if got := h.modern("tools/list", ""); !strings.Contains(got, `"io.modelcontextprotocol/serverInfo":{"name":"upstream-x","version":"9"}`) {
		t.Errorf("2026 result _meta lacks the new serverInfo: %s", got)
	}
}

// relayAs replaces one owner's items and returns what was refused.
func relayAs(s *Server, owner string, items RelayedItems) []string {
	return s.ReplaceRelayed(map[string]RelayedItems{owner: items})[owner]
}

// TestReplaceRelayedMovesNames moves a name from one owner to another in
// one replacement, whatever their order.
func TestReplaceRelayedMovesNames(t *testing.T) {
	h := newRelayHarness(t)
	def := func(name string) []RawTool {
		return []RawTool{{Name: name, Definition: json.RawMessage(`{"name":"` + name + `"}`), Handler: echoRelay(`{}`)}}
	}
	relayAs(h.s, "b", RelayedItems{Tools: def("x")})
	refused := h.s.ReplaceRelayed(map[string]RelayedItems{"a": {Tools: def("x")}, "b": {}})
	if len(refused["a"]) != 0 {
		t.Errorf("refused %v: the name b gave up in the same change", refused)
	}
	if owner, ok := h.s.RelayOwner("none://x"); ok {
		t.Errorf("RelayOwner of an unknown URI = %q", owner)
	}
}
