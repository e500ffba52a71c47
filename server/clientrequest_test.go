package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snodod/snodod/protocol"
)

// answerer is a ClientRequester that records what it was asked and answers
// with a fixed result or error, as a client would.
type answerer struct {
	mu     sync.Mutex
	asked  []string // method and encoded params
	result string
	err    error
}

func (a *answerer) RequestClient(ctx context.Context, method string, params any) (json.RawMessage, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.asked = append(a.asked, method+" "+string(raw))
	a.mu.Unlock()
	if a.err != nil {
		return nil, a.err
	}
	return json.RawMessage(a.result), nil
}

func (a *answerer) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// legacyServer returns a server with one tool that runs ask, and a session
// initialized at 2025-11-25 with capabilities caps.
func legacyServer(t *testing.T, caps string, ask func(ctx context.Context) (string, error)) (*Server, *SessionState) {
	t.Helper()
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.AddTool(&Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, _ *CallToolRequest) (*CallToolResult, error) {
		text, err := ask(ctx)
		if err != nil {
			return nil, err
		}
		return &CallToolResult{Content: []Content{TextContent(text)}}, nil
	})
	sess := NewSessionState(0)
	t.Cleanup(sess.Close)
	init := `{"protocolVersion":"2025-11-25","capabilities":` + caps + `,"clientInfo":{"name":"t","version":"1"}}`
	if _, _, perr := s.Initialize(sess, json.RawMessage(init)); perr != nil {
		t.Fatal(perr)
	}
	return s, sess
}

// callAsk dispatches tools/call ask on sess, with r as the transport's
// requester (none when nil), and returns the encoded outcome.
func callAsk(t *testing.T, s *Server, sess *SessionState, r ClientRequester, modern bool) string {
	t.Helper()
	ctx := context.Background()
	if r != nil {
		ctx = WithClientRequester(ctx, r)
	}
	req := &Request{ID: protocol.IntID(1), Method: "tools/call", Params: json.RawMessage(`{"name":"ask"}`), State: sess,
		Header: http.Header{HeaderProtocolVersion: {protocol.Version20251125}}}
	if modern {
		req.Header = nil
		req.Params = json.RawMessage(`{"name":"ask","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{},"roots":{}}}}`)
	}
	o := s.Dispatch(ctx, req)
	if o.Err != nil {
		raw, _ := json.Marshal(map[string]any{"code": o.Err.Code, "message": o.Err.Message})
		return "error " + string(raw)
	}
	raw, err := protocol.AppendValue(nil, o.Result)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// In a legacy request Elicit, Sample and ListRoots reach the client through
// the transport's requester, and its answer comes back validated
// (docs/protocol.md §3.1).
func TestClientRequestLegacyAnswers(t *testing.T) {
	form := ElicitParams{Message: "name?", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`)}
	for _, tc := range []struct {
		name, answer string
		ask          func(ctx context.Context) (string, error)
		wantSent     string
		wantResult   string
	}{
		{"elicit", `{"action":"accept","content":{"name":"Ada"}}`,
			func(ctx context.Context) (string, error) {
				r, err := Elicit(ctx, "k", form)
				if err != nil {
					return "", err
				}
				return r.Action + " " + r.Content["name"].(string), nil
			},
			`elicitation/create {"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}`,
			"accept Ada"},
		{"sample", `{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}`,
			func(ctx context.Context) (string, error) {
				r, err := Sample(ctx, "k", CreateMessageParams{MaxTokens: 5, Messages: []SamplingMessage{{Role: "user", Content: TextContent("say hi")}}})
				if err != nil {
					return "", err
				}
				return r.Role + " " + r.Model, nil
			},
			`sampling/createMessage {"messages":[{"role":"user","content":{"type":"text","text":"say hi"}}],"maxTokens":5}`,
			"assistant m"},
		{"roots", `{"roots":[{"uri":"file:///a","name":"a"}]}`,
			func(ctx context.Context) (string, error) {
				r, err := ListRoots(ctx, "k")
				if err != nil {
					return "", err
				}
				return r.Roots[0].URI, nil
			},
			`roots/list {}`, "file:///a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, sess := legacyServer(t, `{"elicitation":{},"sampling":{},"roots":{}}`, tc.ask)
			a := &answerer{result: tc.answer}
			got := callAsk(t, s, sess, a, false)
			if want := `"text":"` + tc.wantResult + `"`; !strings.Contains(got, want) || strings.Contains(got, `"isError":true`) {
				t.Errorf("result %s, want one holding %s", got, want)
			}
			if calls := a.calls(); len(calls) != 1 || calls[0] != tc.wantSent {
				t.Errorf("sent %q, want %q", calls, tc.wantSent)
			}
		})
	}
}

// A capability the client did not declare at initialize: nothing is sent,
// the handler gets ErrMissingClientCapability with the -32021 shape, and a
// tool that returns it is answered -32603 "Client does not support
// <method>" (docs/protocol.md §14.2 case 9).
func TestClientRequestMissingCapability(t *testing.T) {
	for _, tc := range []struct {
		caps, method string
		params       any
		required     string
	}{
		{`{}`, "elicitation/create", ElicitParams{Message: "x"}, `{"elicitation":{}}`},
		{`{"elicitation":{}}`, "elicitation/create", json.RawMessage(`{"mode":"url","message":"x","url":"https://x","elicitationId":"1"}`), `{"elicitation":{"url":{}}}`},
		{`{"roots":{}}`, "sampling/createMessage", CreateMessageParams{}, `{"sampling":{}}`},
		{`{"sampling":{}}`, "sampling/createMessage", CreateMessageParams{Tools: []any{map[string]any{"name": "t"}}}, `{"sampling":{"tools":{}}}`},
		{`{"sampling":{}}`, "roots/list", struct{}{}, `{"roots":{}}`},
	} {
		var err error
		s, sess := legacyServer(t, tc.caps, func(ctx context.Context) (string, error) {
			_, err = RequestClient(ctx, tc.method, tc.params)
			return "", err
		})
		a := &answerer{result: `{}`}
		got := callAsk(t, s, sess, a, false)
		if len(a.calls()) != 0 {
			t.Errorf("%s with %s: sent %q", tc.method, tc.caps, a.calls())
		}
		var perr *protocol.Error
		if !errors.Is(err, ErrMissingClientCapability) || !errors.As(err, &perr) || perr.Code != protocol.CodeMissingCapability {
			t.Fatalf("%s with %s: err %v", tc.method, tc.caps, err)
		}
		if data, _ := json.Marshal(perr.Data); string(data) != `{"requiredCapabilities":`+tc.required+`}` {
			t.Errorf("%s with %s: data %s, want requiredCapabilities %s", tc.method, tc.caps, data, tc.required)
		}
		if want := `error {"code":-32603,"message":"Client does not support ` + tc.method + `"}`; got != want {
			t.Errorf("%s with %s: answered %s, want %s", tc.method, tc.caps, got, want)
		}
	}
	// ping needs no capability.
	s, sess := legacyServer(t, `{}`, func(ctx context.Context) (string, error) {
		_, err := RequestClient(ctx, "ping", nil)
		return "pinged", err
	})
	if a := (&answerer{result: `{}`}); !strings.Contains(callAsk(t, s, sess, a, false), "pinged") || len(a.calls()) != 1 {
		t.Errorf("ping: sent %q", a.calls())
	}
}

// An answer that does not fit its request is the handler's error; a
// client's error response is given to the handler as it came.
func TestClientRequestInvalidAnswer(t *testing.T) {
	form := ElicitParams{Message: "n", RequestedSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
	for _, answer := range []string{
		`{"action":"maybe"}`,
		`{"action":"accept","content":{"n":"not a number"}}`,
		`{"action":"accept"}`,
		`[]`,
	} {
		var err error
		s, sess := legacyServer(t, `{"elicitation":{}}`, func(ctx context.Context) (string, error) {
			_, err = Elicit(ctx, "k", form)
			return "", err
		})
		got := callAsk(t, s, sess, &answerer{result: answer}, false)
		if !errors.Is(err, ErrInvalidClientResponse) || !strings.Contains(got, `"isError":true`) {
			t.Errorf("answer %s: err %v, result %s", answer, err, got)
		}
	}
	for _, answer := range []string{`{"role":"assistant","content":"text","model":"m"}`, `{"content":{"type":"text","text":"x"},"model":"m"}`} {
		var err error
		s, sess := legacyServer(t, `{"sampling":{}}`, func(ctx context.Context) (string, error) {
			_, err = Sample(ctx, "k", CreateMessageParams{})
			return "", err
		})
		callAsk(t, s, sess, &answerer{result: answer}, false)
		if !errors.Is(err, ErrInvalidClientResponse) {
			t.Errorf("sampling answer %s: err %v", answer, err)
		}
	}
	declined := &protocol.Error{Code: -1, Message: "User declined"}
	var err error
	s, sess := legacyServer(t, `{"roots":{}}`, func(ctx context.Context) (string, error) {
		_, err = ListRoots(ctx, "k")
		return "", err
	})
	callAsk(t, s, sess, &answerer{err: declined}, false)
	var perr *protocol.Error
	if !errors.As(err, &perr) || perr != declined {
		t.Errorf("client error: got %v", err)
	}
}

// A 2026 request never reaches the requester: Elicit asks through MRTR
// even when a transport put a requester in the context; RequestClient
// refuses. A legacy request without a requester is answered as before.
func TestClientRequestEras(t *testing.T) {
	var direct error
	s, sess := legacyServer(t, `{"elicitation":{}}`, func(ctx context.Context) (string, error) {
		_, direct = RequestClient(ctx, "roots/list", struct{}{})
		_, err := Elicit(ctx, "k", ElicitParams{Message: "x"})
		return "", err
	})
	a := &answerer{result: `{"action":"decline"}`}
	if got := callAsk(t, s, sess, a, true); !strings.Contains(got, `"resultType":"input_required"`) || len(a.calls()) != 0 {
		t.Errorf("2026: result %s, sent %q", got, a.calls())
	}
	if !errors.Is(direct, errInputUnsupported) {
		t.Errorf("2026 RequestClient: %v", direct)
	}
	if got := callAsk(t, s, sess, nil, false); got != `error {"code":-32603,"message":"Input requests are not supported in this protocol version"}` {
		t.Errorf("legacy without a requester: %s", got)
	}
}

// Ids count from 1 on the state, so a restarted session never reuses one.
func TestClientRequestIDs(t *testing.T) {
	sess := NewSessionState(0)
	defer sess.Close()
	for _, want := range []string{`"snodod:1"`, `"snodod:2"`, `"snodod:3"`} {
		if got := sess.NextClientRequestID().String(); got != want {
			t.Fatalf("id %s, want %s", got, want)
		}
	}
}

// Exactly MaxClientRequests places: the next waits until one is given
// back, or its context ends.
func TestClientRequestCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sess := NewSessionState(0)
		defer sess.Close()
		for i := range MaxClientRequests {
			if err := sess.AcquireClientRequest(context.Background()); err != nil {
				t.Fatalf("place %d: %v", i+1, err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := sess.AcquireClientRequest(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("place %d: %v, want it to wait out its context", MaxClientRequests+1, err)
		}
		got := make(chan error, 1)
		go func() { got <- sess.AcquireClientRequest(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("place %d taken while %d are out: %v", MaxClientRequests+1, MaxClientRequests, err)
		default:
		}
		sess.ReleaseClientRequest()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
	})
}

// RequestClientBefore reaches the client of a legacy session before any
// dispatch, checking the capabilities its initialize declared; before an
// initialize, without a requester, or without the capability, nothing is
// sent.
func TestRequestClientBefore(t *testing.T) {
	url := map[string]any{"mode": "url", "message": "sign in", "url": "https://as.example/authorize", "elicitationId": "e1"}
	_, sess := legacyServer(t, `{"elicitation":{"url":{}}}`, nil)
	sess.SetNegotiated(protocol.Version20251125) // as the transport does once initialize is answered
	if !sess.Legacy() || string(sess.ClientCapabilities()) != `{"elicitation":{"url":{}}}` {
		t.Fatalf("the session: legacy %v, capabilities %s", sess.Legacy(), sess.ClientCapabilities())
	}
	a := &answerer{result: `{"action":"accept"}`}
	res, err := RequestClientBefore(WithClientRequester(context.Background(), a), sess, "elicitation/create", url)
	if err != nil || string(res) != `{"action":"accept"}` || len(a.calls()) != 1 {
		t.Errorf("asked: %s %v %v", res, err, a.calls())
	}
	_, formOnly := legacyServer(t, `{"elicitation":{}}`, nil)
	formOnly.SetNegotiated(protocol.Version20251125)
	if _, err := RequestClientBefore(WithClientRequester(context.Background(), a), formOnly, "elicitation/create", url); !errors.Is(err, ErrMissingClientCapability) {
		t.Errorf("a client without URL elicitation: %v", err)
	}
	if _, err := RequestClientBefore(context.Background(), sess, "elicitation/create", url); err == nil {
		t.Error("no requester: no error")
	}
	fresh := NewSessionState(0)
	t.Cleanup(fresh.Close)
	if _, err := RequestClientBefore(WithClientRequester(context.Background(), a), fresh, "elicitation/create", url); err == nil || fresh.Legacy() {
		t.Errorf("before initialize: %v", err)
	}
	if n := len(a.calls()); n != 1 {
		t.Errorf("%d requests sent, want 1", n)
	}
}
