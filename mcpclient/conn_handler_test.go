package mcpclient

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/protocol"
)

// recorder is a Handler that records what the upstream sent.
type recorder struct {
	mu       sync.Mutex
	notified []string
	requests []string
	owners   [][]any
	answer   func(method string) (json.RawMessage, *protocol.Error)
}

func (r *recorder) Notify(method string, params json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notified = append(r.notified, method+" "+string(params))
}

func (r *recorder) Request(req *Request) {
	r.mu.Lock()
	r.requests = append(r.requests, req.Method)
	r.owners = append(r.owners, req.Owners)
	r.mu.Unlock()
	if r.answer != nil {
		req.Reply(r.answer(req.Method))
		return
	}
	req.Reply(json.RawMessage(`{"answered":"`+req.Method+`"}`), nil)
}

// The upstream's requests reach the Handler with the owners of the calls in
// flight (oldest first); its answer goes back to the upstream.
func TestHandlerRequests(t *testing.T) {
	h := &recorder{}
	c := startFake(t, Options{Handler: h})
	running := make(chan struct{})
	go func() { // an earlier call of another owner, in flight meanwhile
		o := CallOptions{Owner: "session-b", Progress: func(json.RawMessage) { close(running) }}
		_, _ = c.Call(context.Background(), "tools/call", toolParams(t, "slow", map[string]any{"ms": 60000, "announce": true}, nil), o)
	}()
	<-running
	for _, tool := range []string{"sample", "elicit", "roots"} {
		sc := callTool(t, c, tool, nil, CallOptions{Owner: "session-a"})
		want := map[string]string{"sample": "sampling/createMessage", "elicit": "elicitation/create", "roots": "roots/list"}[tool]
		if string(sc["response"]) != `{"answered":"`+want+`"}` {
			t.Errorf("%s: the upstream got %s, want the Handler's answer", tool, sc["response"])
		}
	}
	h.mu.Lock()
	if !slices.Equal(h.requests, []string{"sampling/createMessage", "elicitation/create", "roots/list"}) {
		t.Errorf("Handler got %v", h.requests)
	}
	for _, o := range h.owners {
		if !slices.Equal(o, []any{"session-b", "session-a"}) {
			t.Errorf("owners = %v, want [session-b session-a]", o)
		}
	}
	h.mu.Unlock()

	// ping is answered by the Conn itself.
	sc := callTool(t, c, "ping-client", nil, CallOptions{})
	if string(sc["response"]) != `{}` {
		t.Errorf("ping answered %s, want {}", sc["response"])
	}
	h.mu.Lock()
	if len(h.requests) != 3 {
		t.Errorf("ping reached the Handler: %v", h.requests)
	}
	h.mu.Unlock()
}

func TestHandlerErrors(t *testing.T) {
	t.Run("no handler", func(t *testing.T) {
		c := startFake(t, Options{})
		sc := callTool(t, c, "sample", nil, CallOptions{})
		if !strings.Contains(string(sc["error"]), `"code":-32601`) {
			t.Errorf("upstream got %s, want -32601", sc["error"])
		}
	})
	t.Run("handler error", func(t *testing.T) {
		h := &recorder{answer: func(string) (json.RawMessage, *protocol.Error) {
			return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: cannot attribute", Data: map[string]int{"sessions": 2}}
		}}
		c := startFake(t, Options{Handler: h})
		sc := callTool(t, c, "elicit", nil, CallOptions{})
		if string(sc["error"]) != `{"code":-32603,"message":"snodod: cannot attribute","data":{"sessions":2}}` {
			t.Errorf("upstream got %s", sc["error"])
		}
	})
}

// Notifications other than progress reach Notify in order, before the
// answer of the call that caused them.
func TestHandlerNotify(t *testing.T) {
	h := &recorder{}
	c := startFake(t, Options{Handler: h})
	for _, m := range []string{"notifications/tools/list_changed", "notifications/resources/updated"} {
		callTool(t, c, "notify", map[string]any{"method": m, "params": map[string]string{"uri": "fake://res/001"}}, CallOptions{})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	want := []string{
		`notifications/tools/list_changed {"uri":"fake://res/001"}`,
		`notifications/resources/updated {"uri":"fake://res/001"}`,
	}
	if !slices.Equal(h.notified, want) {
		t.Errorf("Notify got %q, want %q", h.notified, want)
	}
}

// A 2026 upstream's input_required is a result like any other: the rounds
// belong to the layer above.
func TestInputRequired2026(t *testing.T) {
	c := startFake(t, Options{}, "-era", "2026")
	res, err := c.Call(context.Background(), "tools/call", toolParams(t, "elicit", nil, nil), CallOptions{ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)})
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.ResultType != "input_required" || r.InputRequests["u1"] == nil || r.RequestState != "fake-state" {
		t.Fatalf("result %s, want input_required", res)
	}
	retry, _ := json.Marshal(map[string]any{"name": "elicit", "inputResponses": map[string]any{"u1": map[string]any{"action": "accept", "content": map[string]string{"name": "Ada"}}}, "requestState": r.RequestState})
	res, err = c.Call(context.Background(), "tools/call", retry, CallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc := structuredContent(t, res); string(sc["response"]) != `{"action":"accept","content":{"name":"Ada"}}` {
		t.Errorf("retry answered %s", res)
	}
}

// The upstream cancelling its own request ends the Request's Context, and
// the Handler's answer is not sent.
func TestHandlerCancelledByUpstream(t *testing.T) {
	started, ended := make(chan struct{}), make(chan error, 1)
	h := &blockingHandler{started: started, ended: ended}
	c := startFake(t, Options{Handler: h})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel() // the client gives up: the fake cancels its sampling request
	}()
	if _, err := c.Call(ctx, "tools/call", toolParams(t, "sample", nil, nil), CallOptions{}); err != context.Canceled {
		t.Fatalf("Call = %v, want context.Canceled", err)
	}
	if err := <-ended; err != context.Canceled {
		t.Errorf("Handler ctx ended with %v, want context.Canceled", err)
	}
	if err := c.Ping(context.Background()); err != nil { // the Conn is fine
		t.Error(err)
	}
}

type blockingHandler struct {
	started chan struct{}
	ended   chan error
}

func (blockingHandler) Notify(string, json.RawMessage) {}

// Request answers only once the request's Context has ended, from a
// goroutine of its own, as a Handler relaying to a client does.
func (h *blockingHandler) Request(r *Request) {
	close(h.started)
	go func() {
		<-r.Context().Done()
		h.ended <- r.Context().Err()
		r.Reply(json.RawMessage(`{}`), nil)
	}()
}
