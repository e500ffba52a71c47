package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// startRecorder is a StartHook that is not Ready for the methods in
// waits, and answers their Start with refuse.
type startRecorder struct {
	waits  []string
	refuse *protocol.Error
	first  *RawResult // answered as an InputFirst, before refuse

	mu      sync.Mutex
	started []string
	callers []*Caller
}

func (h *startRecorder) Ready(req *Request) bool { return !slices.Contains(h.waits, req.Method) }

func (h *startRecorder) Start(_ context.Context, req *Request) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = append(h.started, req.Method)
	h.callers = append(h.callers, req.State.Caller())
	if h.first != nil {
		return &InputFirst{Result: h.first}
	}
	if h.refuse == nil {
		return nil
	}
	return h.refuse
}

// The StartHook runs before a request it is not Ready for, with the
// session's state (its Caller says who asks); such a request is never
// served inline, and Start's error is its answer.
func TestStartHook(t *testing.T) {
	h := newRelayHarness(t)
	who := &Caller{Session: 3, Cwd: "/w", View: "v"}
	h.sess.SetCaller(who)
	hook := &startRecorder{waits: []string{"tools/list", "initialize"}}
	h.s.SetStartHook(hook)
	h.s.Advertise(protocol.ServerCapabilities{Tools: true, Prompts: true})
	legacy := func(method string) *Request {
		return &Request{ID: protocol.IntID(1), Method: method, State: h.sess, Header: http.Header{HeaderProtocolVersion: {"2025-11-25"}}}
	}
	if _, ok := h.s.DispatchInline(context.Background(), legacy("tools/list")); ok {
		t.Fatal("a list the hook is not ready for was served inline")
	}
	if _, ok := h.s.DispatchInline(context.Background(), legacy("prompts/list")); !ok {
		t.Fatal("a list the hook is ready for was not served inline")
	}
	if got := encodeOutcome(t, h.s.Dispatch(context.Background(), legacy("tools/list"))); !strings.Contains(got, `"tools":[]`) {
		t.Fatalf("tools/list after Start: %s", got)
	}
	ss := NewSessionState(0)
	ss.SetCaller(who)
	if _, _, perr := h.s.Initialize(ss, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)); perr != nil {
		t.Fatal(perr)
	}
	hook.refuse = &protocol.Error{Code: -32002, Message: "cannot start"}
	if got := encodeOutcome(t, h.s.Dispatch(context.Background(), legacy("tools/list"))); !strings.Contains(got, `"message":"cannot start"`) {
		t.Fatalf("tools/list with Start failing: %s", got)
	}
	if want := []string{"tools/list", "initialize", "tools/list"}; !slices.Equal(hook.started, want) {
		t.Errorf("started for %v, want %v", hook.started, want)
	}
	for _, c := range hook.callers {
		if c != who {
			t.Errorf("Start saw caller %+v, want %+v", c, who)
		}
	}
}

// A relayed handler and the SubscriptionHook are told who asks: the
// Caller of the request's session.
func TestCallerReachesTheRelay(t *testing.T) {
	h := newRelayHarness(t)
	who := &Caller{Session: 9}
	h.sess.SetCaller(who)
	var got *Caller
	h.s.ReplaceRelayed(map[string]RelayedItems{"o": {Tools: []RawTool{{Name: "who", Definition: json.RawMessage(`{"name":"who","inputSchema":{"type":"object"}}`),
		Handler: func(_ context.Context, req *RawRequest) (*RawResult, error) {
			got = req.Caller
			return &RawResult{Result: json.RawMessage(`{"content":[]}`)}, nil
		}}}}})
	h.legacy("tools/call", `{"name":"who"}`)
	if got != who {
		t.Fatalf("the handler saw caller %+v, want %+v", got, who)
	}
	var subscribed []*Caller
	h.s.SetSubscriptionHook(callerHook(func(ss *SessionState) { subscribed = append(subscribed, ss.Caller()) }))
	h.s.Advertise(protocol.ServerCapabilities{Resources: true, ResourcesSubscribe: true})
	h.legacy("resources/subscribe", `{"uri":"mem://a"}`)
	if len(subscribed) != 1 || subscribed[0] != who {
		t.Fatalf("the subscription hook saw %+v, want %+v", subscribed, who)
	}
}

type callerHook func(*SessionState)

func (f callerHook) Subscribe(ss *SessionState, _ string)   { f(ss) }
func (f callerHook) Unsubscribe(ss *SessionState, _ string) { f(ss) }

// A StartHook's InputFirst is a 2026 request's input_required, after the
// request's own checks, with a state the item's relay handler gets on
// the retry; a legacy request gets -32603.
func TestStartHookInputFirst(t *testing.T) {
	h := newRelayHarness(t)
	var got *RawRequest
	relayAs(h.s, "up", RelayedItems{Tools: []RawTool{{Name: "up__t", Definition: json.RawMessage(`{"name":"up__t"}`),
		Handler: func(_ context.Context, req *RawRequest) (*RawResult, error) {
			got = req
			return &RawResult{Result: json.RawMessage(`{"content":[]}`)}, nil
		}}}})
	hook := &startRecorder{waits: []string{"tools/call"}, first: &RawResult{
		InputRequests: json.RawMessage(`{"login":{"method":"elicitation/create","params":{"mode":"url"}}}`), State: []byte("resend")}}
	h.s.SetStartHook(hook)
	first := h.modern("tools/call", `"name":"up__t","arguments":{}`)
	var ir struct {
		ResultType    string          `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
		RequestState  string          `json:"requestState"`
	}
	if err := json.Unmarshal([]byte(first), &ir); err != nil || ir.ResultType != "input_required" ||
		string(ir.InputRequests) != `{"login":{"method":"elicitation/create","params":{"mode":"url"}}}` || ir.RequestState == "" {
		t.Fatalf("the first round: %s", first)
	}
	if got != nil {
		t.Fatal("the handler ran before the input was given")
	}
	hook.first = nil // the login happened: Start lets the retry through
	retry := `"name":"up__t","arguments":{},"inputResponses":{"login":{"action":"accept"}},"requestState":"` + ir.RequestState + `"`
	if res := h.modern("tools/call", retry); !strings.Contains(res, `"resultType":"complete"`) {
		t.Fatalf("the retry: %s", res)
	}
	if got == nil || string(got.State) != "resend" || string(got.InputResponses["login"]) != `{"action":"accept"}` {
		t.Fatalf("the retry reached the handler as %+v", got)
	}
	hook.first = &RawResult{InputRequests: json.RawMessage(`{}`)}
	// The request's own checks come first.
	bad := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"up__t"}`
	if res := encodeOutcome(t, h.s.Dispatch(context.Background(), &Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(bad)})); !strings.Contains(res, "clientCapabilities") {
		t.Errorf("a request failing §5.2: %s", res)
	}
	if res := h.legacy("tools/call", `{"name":"up__t"}`); res != `error {"code":-32603,"message":"Internal error"}` {
		t.Errorf("a legacy request: %s", res)
	}
}
