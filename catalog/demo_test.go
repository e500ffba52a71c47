package catalog_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// The catalog is tested through server.Server.Dispatch, the way a transport
// serves it: legacy requests carry the negotiated version in the header and
// a session that went through Initialize; 2026 requests carry the version
// and client capabilities in params._meta.

const v2026 = "2026-07-28"

// newServer returns a server with the given catalogs registered.
func newServer(t *testing.T, register ...func(*server.Server)) *server.Server {
	t.Helper()
	// The runtime logs recovered panics; the tests provoke some.
	s, err := server.New(server.Options{SubscribableResources: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range register {
		r(s)
	}
	return s
}

// client sends requests to a server in one protocol version.
type client struct {
	t       testing.TB
	s       *server.Server
	version string
	caps    string // client capabilities, a JSON object
	sess    *server.SessionState
	nextID  int64
}

// newClient returns a client of s speaking version with the client
// capabilities caps; a legacy client initializes first.
func newClient(t testing.TB, s *server.Server, version, caps string) *client {
	t.Helper()
	c := &client{t: t, s: s, version: version, caps: caps, sess: server.NewSessionState(0)}
	if version != v2026 {
		params := `{"protocolVersion":"` + version + `","capabilities":` + caps + `,"clientInfo":{"name":"test","version":"1"}}`
		if _, got, perr := s.Initialize(c.sess, json.RawMessage(params)); perr != nil || got != version {
			t.Fatalf("initialize %s: version %q, error %v", version, got, perr)
		}
		s.Notify(c.sess, "notifications/initialized", nil)
	}
	t.Cleanup(c.sess.Close)
	return c
}

// call sends method with params (nil for none) and returns the result as
// JSON, or the error.
func (c *client) call(ctx context.Context, method string, params map[string]any) (json.RawMessage, *protocol.Error) {
	c.t.Helper()
	out := c.dispatch(ctx, method, params)
	if out.Err != nil {
		return nil, out.Err
	}
	res, err := json.Marshal(out.Result)
	if err != nil {
		c.t.Errorf("%s: result does not encode: %v", method, err)
	}
	return res, nil
}

// dispatch sends method with params (nil for none) and returns the outcome.
func (c *client) dispatch(ctx context.Context, method string, params map[string]any) server.Outcome {
	c.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	req := &server.Request{Method: method, State: c.sess, Header: http.Header{}}
	c.nextID++
	req.ID = protocol.IntID(c.nextID)
	if c.version == v2026 {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    v2026,
			"io.modelcontextprotocol/clientCapabilities": json.RawMessage(c.caps),
		}
	} else {
		req.Header.Set(server.HeaderProtocolVersion, c.version)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		c.t.Errorf("%s: params do not encode: %v", method, err)
	}
	req.Params = raw
	return c.s.Dispatch(ctx, req)
}

// result is call that fails the test on an error, decoding the result into
// a value of type T.
func result[T any](t *testing.T, c *client, ctx context.Context, method string, params map[string]any) T {
	t.Helper()
	raw, perr := c.call(ctx, method, params)
	if perr != nil {
		t.Fatalf("%s %v: error %d %q %v", method, params, perr.Code, perr.Message, perr.Data)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: result %s: %v", method, raw, err)
	}
	return v
}

// toolResult is a tools/call result.
type toolResult struct {
	ResultType string `json:"resultType"`
	Content    []struct {
		Type, Text, Data, MIMEType string
		Resource                   *struct{ URI, MIMEType, Text, Blob string }
	}
	IsError bool `json:"isError"`
	// input_required results
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

// text returns the single text block of a tools/call result.
func (r toolResult) text(t *testing.T) string {
	t.Helper()
	if len(r.Content) != 1 || r.Content[0].Type != "text" {
		t.Fatalf("content = %+v, want one text block", r.Content)
	}
	return r.Content[0].Text
}

func callTool(t *testing.T, c *client, ctx context.Context, name string, args map[string]any) toolResult {
	t.Helper()
	params := map[string]any{"name": name}
	if args != nil {
		params["arguments"] = args
	}
	return result[toolResult](t, c, ctx, "tools/call", params)
}

func TestDemoTools(t *testing.T) {
	s := newServer(t, catalog.Demo)
	for _, version := range []string{"2025-06-18", "2025-11-25", v2026} {
		list := result[struct {
			Tools []struct {
				Name, Description string
				InputSchema       struct {
					Type       string
					Properties map[string]struct{ Type string }
					Required   []string
				}
			}
		}](t, newClient(t, s, version, `{}`), t.Context(), "tools/list", nil)
		want := []string{"big bytes:integer", "echo text:string", "fail", "panic", "sleep ms:integer"}
		var got []string
		for _, tool := range list.Tools {
			if tool.Description == "" || tool.InputSchema.Type != "object" {
				t.Errorf("%s: tool %s: description %q, schema %+v", version, tool.Name, tool.Description, tool.InputSchema)
			}
			sig := tool.Name
			for _, r := range tool.InputSchema.Required {
				sig += " " + r + ":" + tool.InputSchema.Properties[r].Type
			}
			got = append(got, sig)
		}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: tools = %q, want %q", version, got, want)
		}
	}
}

func TestDemoCalls(t *testing.T) {
	c := newClient(t, newServer(t, catalog.Demo), "2025-11-25", `{}`)
	tests := []struct {
		name, tool string
		args       map[string]any
		text       string // "" with isError: any text
		isError    bool
	}{
		{"echo", "echo", map[string]any{"text": "hi"}, "hi", false},
		{"echo empty", "echo", map[string]any{"text": ""}, "", false},
		{"echo unicode", "echo", map[string]any{"text": "héllo \u2028 <b>"}, "héllo \u2028 <b>", false},
		{"echo not a string", "echo", map[string]any{"text": 5}, "", true},
		{"echo missing text", "echo", map[string]any{}, "Missing required arguments: text", true},
		{"fail", "fail", nil, "fail: this demo tool always fails, on purpose", true},
		{"sleep zero", "sleep", map[string]any{"ms": 0}, "done", false},
		{"sleep short", "sleep", map[string]any{"ms": 20}, "done", false},
		{"sleep integral float", "sleep", map[string]any{"ms": json.RawMessage("1e1")}, "done", false},
		{"sleep fraction", "sleep", map[string]any{"ms": 1.5}, "", true},
		{"sleep string", "sleep", map[string]any{"ms": "10"}, "", true},
		{"sleep negative", "sleep", map[string]any{"ms": -1}, "", true},
		{"sleep too long", "sleep", map[string]any{"ms": 3600001}, "", true},
		{"sleep huge", "sleep", map[string]any{"ms": json.RawMessage("1e400")}, "", true},
		{"big zero", "big", map[string]any{"bytes": 0}, "", false},
		{"big over the cap", "big", map[string]any{"bytes": 67108865}, "", true},
		{"big over int64", "big", map[string]any{"bytes": json.RawMessage("99999999999999999999")}, "", true},
		{"big negative", "big", map[string]any{"bytes": -5}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, c, t.Context(), tt.tool, tt.args)
			got := res.text(t)
			if res.IsError != tt.isError || (tt.text != "" || !tt.isError) && got != tt.text {
				t.Errorf("got %q (isError %v), want %q (isError %v)", got, res.IsError, tt.text, tt.isError)
			}
		})
	}
}

func TestDemoBig(t *testing.T) {
	c := newClient(t, newServer(t, catalog.Demo), v2026, `{}`)
	// MaxBigBytes itself takes seconds under the race detector: the bound is
	// checked by "big over the cap" in TestDemoCalls.
	for _, n := range []int{1, 1000, 1 << 20} {
		res := callTool(t, c, t.Context(), "big", map[string]any{"bytes": n})
		if got := res.text(t); res.IsError || len(got) != n || strings.Trim(got, "x") != "" {
			t.Errorf("big %d: %d bytes, isError %v", n, len(got), res.IsError)
		}
	}
}

func TestDemoPanic(t *testing.T) {
	for _, version := range []string{"2025-06-18", v2026} {
		c := newClient(t, newServer(t, catalog.Demo), version, `{}`)
		if _, perr := c.call(t.Context(), "tools/call", map[string]any{"name": "panic"}); perr == nil ||
			perr.Code != protocol.CodeInternalError || perr.Message != "Tool raised an exception" {
			t.Errorf("%s: panic = %+v, want -32603 Tool raised an exception", version, perr)
		}
	}
}

// reporter records progress reports, as a transport's sink would.
type reporter struct {
	mu      sync.Mutex
	reports []server.Progress
	err     error // returned by every Report
}

func (r *reporter) Report(p server.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports = append(r.reports, p)
	return r.err
}

func (r *reporter) all() []server.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]server.Progress(nil), r.reports...)
}

func TestDemoSleepProgress(t *testing.T) {
	c := newClient(t, newServer(t, catalog.Demo), "2025-06-18", `{}`)
	for _, refuse := range []error{nil, server.ErrProgressBusy} {
		r := &reporter{err: refuse}
		start := time.Now()
		res := callTool(t, c, server.WithProgress(t.Context(), r), "sleep", map[string]any{"ms": 450})
		if got := res.text(t); got != "done" || res.IsError {
			t.Fatalf("sleep = %q, isError %v", got, res.IsError)
		}
		if took := time.Since(start); took < 450*time.Millisecond {
			t.Errorf("sleep 450 took %v", took)
		}
		reports := r.all()
		if len(reports) < 1 || len(reports) > 4 {
			t.Errorf("%d reports, want about one per 100 ms: %+v", len(reports), reports)
		}
		last := 0.0
		for _, p := range reports {
			if p.Progress <= last || p.Progress >= 450 || !p.HasTotal || p.Total != 450 || p.Message != "" {
				t.Errorf("report %+v after progress %v", p, last)
			}
			last = p.Progress
		}
	}
}

func TestDemoSleepCancel(t *testing.T) {
	c := newClient(t, newServer(t, catalog.Demo), v2026, `{}`)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan json.RawMessage, 1)
	start := time.Now()
	go func() {
		raw, _ := c.call(ctx, "tools/call", map[string]any{"name": "sleep", "arguments": map[string]any{"ms": 60000}})
		done <- raw
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case raw := <-done:
		// The transport writes nothing for a cancelled request; the outcome
		// itself says why the handler ended.
		var res toolResult
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatalf("cancelled sleep: %s: %v", raw, err)
		}
		if got := res.text(t); !res.IsError || got != context.Canceled.Error() {
			t.Errorf("cancelled sleep = %q, isError %v", got, res.IsError)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("cancelled sleep returned after %v", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sleep did not return after cancellation")
	}
}

func TestStatus(t *testing.T) {
	s := newServer(t)
	catalog.Status(s, "1.2.3", time.Now().Add(-90*time.Second))
	res := callTool(t, newClient(t, s, "2025-11-25", `{}`), t.Context(), "status", map[string]any{})
	if got := res.text(t); got != "snodod 1.2.3, up 1m30s" || res.IsError {
		t.Errorf("status = %q, isError %v", got, res.IsError)
	}
	if got := strconv.Quote(res.ResultType); got != `""` {
		t.Errorf("legacy result has resultType %s", got)
	}
}
