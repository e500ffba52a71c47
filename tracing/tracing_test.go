package tracing_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.uber.org/goleak"

	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/internal/syncbuf"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/tracing"
	"github.com/snodod/snodod/tracing/tracingtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// Tracing is off unless an OTLP endpoint is named, and the SDK's own
// switches turn it off again.
func TestEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  func(string) string
		want bool
	}{
		{env(), false},
		{env("OTEL_SERVICE_NAME", "x", "OTEL_TRACES_SAMPLER", "always_on"), false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true},
		{env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", "true"), false},
		{env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "none"), false},
	} {
		if got := tracing.Enabled(tc.env); got != tc.want {
			t.Errorf("Enabled = %v; want %v", got, tc.want)
		}
	}
	tr, err := tracing.New(context.Background(), tracing.Options{Getenv: env()})
	if tr != nil || err != nil {
		t.Errorf("New without an endpoint: %v, %v; want nil, nil", tr, err)
	}
}

// With tracing off a request's context has no span, and the child spans'
// functions do nothing and allocate nothing.
func TestOffCostsNothing(t *testing.T) {
	ctx := context.Background()
	fail := errors.New("x")
	allocs := testing.AllocsPerRun(100, func() {
		if tracing.Active(ctx) {
			t.Fatal("active without a span")
		}
		c, s := tracing.StartUpstream(ctx, "fake", "tools/call", "echo")
		if c != ctx || s != nil {
			t.Fatal("a span without tracing")
		}
		s.End(fail)
		s.EndRun(true, nil)
		s.SetExit(1)
		if tp, _ := tracing.Parent(ctx); tp != "" {
			t.Fatal(tp)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations with tracing off", allocs)
	}
}

// newTracing starts a receiver and a Tracing exporting to it.
func newTracing(t *testing.T) (*tracing.Tracing, *tracingtest.Receiver) {
	t.Helper()
	rcv := tracingtest.Start(t)
	t.Setenv("OTEL_SERVICE_NAME", "snodod-test")
	tr, err := tracing.New(context.Background(), tracing.Options{Version: "1.2.3"})
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	return tr, rcv
}

// dispatch serves one legacy request of method with params on s.
func dispatch(s *server.Server, sess *server.SessionState, method, params string) server.Outcome {
	msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`))
	req := &server.Request{ID: msg.ID, Method: msg.Method, Params: msg.Params, Split: &msg.Split, State: sess,
		Header: map[string][]string{server.HeaderProtocolVersion: {protocol.Version20250618}}}
	return s.Dispatch(context.Background(), req)
}

func echoServer(t testing.TB) *server.Server {
	s, err := server.New(server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type echoIn struct {
		Text string `json:"text"`
	}
	server.AddTool(s, &server.Tool{Name: "echo"}, func(_ context.Context, _ *server.CallToolRequest, in echoIn) (*server.CallToolResult, any, error) {
		return &server.CallToolResult{Content: []server.Content{server.TextContent(in.Text)}}, nil, nil
	})
	return s
}

// A request without a traceparent is the root of a trace of its own; an
// unknown tool's error is the span's status and error.type; the
// environment's service name wins.
func TestRequestSpans(t *testing.T) {
	tr, rcv := newTracing(t)
	s := echoServer(t)
	s.SetObserver(tr)
	sess := server.NewSessionState(0)
	sess.SetCaller(&server.Caller{View: "fake", Kind: "pty"})
	sess.SetNegotiated(protocol.Version20250618)
	if out := dispatch(s, sess, "tools/call", `{"name":"echo","arguments":{"text":"a"}}`); out.Err != nil {
		t.Fatal(out.Err)
	}
	if out := dispatch(s, sess, "tools/call", `{"name":"nope"}`); out.Err == nil {
		t.Fatal("an unknown tool served")
	}
	if err := tr.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ok, found := rcv.Find("tools/call echo")
	if !found {
		t.Fatalf("spans %+v", rcv.Spans())
	}
	if ok.Parent != "" || len(ok.TraceID) != 32 || ok.Service != "snodod-test" || ok.StatusError {
		t.Errorf("span %+v", ok)
	}
	for k, want := range map[string]string{"snodod.view": "fake", "snodod.session.kind": "pty", "snodod.era": "legacy",
		"snodod.outcome": "ok", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool"} {
		if ok.Attributes[k] != want {
			t.Errorf("%s = %q; want %q", k, ok.Attributes[k], want)
		}
	}
	bad, found := rcv.Find("tools/call")
	if !found {
		t.Fatalf("no span of the unknown tool among %+v", rcv.Spans())
	}
	if !bad.StatusError || bad.Attributes["snodod.outcome"] != "error" || bad.Attributes["error.type"] != "-32602" {
		t.Errorf("span of the unknown tool %+v", bad)
	}
}

// Exporter errors are logged once, then at most once per ErrorInterval.
func TestExportErrorsLoggedOncePerMinute(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1") // nothing listens there
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "200")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	var logs syncbuf.Buffer
	tr, err := tracing.New(context.Background(), tracing.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil || tr == nil {
		t.Fatalf("New: %v, %v", tr, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	}()
	s := echoServer(t)
	s.SetObserver(tr)
	sess := server.NewSessionState(0)
	sess.SetNegotiated(protocol.Version20250618)
	dispatch(s, sess, "tools/call", `{"name":"echo","arguments":{}}`)
	eventually.True(t, "the failed export logged", func() bool { return strings.Contains(logs.String(), "exporting spans failed") })
	for range 3 {
		otel.Handle(errors.New("another failure"))
	}
	if n := strings.Count(logs.String(), "exporting spans failed"); n != 1 {
		t.Errorf("%d lines logged of 4 failures within a minute:\n%s", n, logs.String())
	}
}

// A client's unsampled traceparent is not recorded, but the upstream is
// still handed a context of the same trace, unsampled, under a span id
// of snodod's.
func TestUnsampledStillPropagates(t *testing.T) {
	tr, _ := newTracing(t)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	msg := protocol.Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"` + parent + `","tracestate":"a=b"}}}`))
	ctx := tr.RequestStarted(context.Background(), &server.RequestStart{Method: "tools/call", Meta: msg.Split.Meta, Session: server.NewSessionState(0)})
	ctx, span := tracing.StartUpstream(ctx, "fake", "tools/call", "x")
	defer span.End(nil)
	tp, ts := tracing.Parent(ctx)
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[1] != "4bf92f3577b34da6a3ce929d0e0e4736" || parts[2] == "00f067aa0ba902b7" || parts[3] != "00" || ts != "a=b" {
		t.Errorf("handed on %q, %q", tp, ts)
	}
	tr.RequestEnded(server.RequestEnd{Method: "tools/call", Context: ctx})
}
