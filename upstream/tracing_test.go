package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/internal/fakeremote"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/tracing"
	"github.com/snodod/snodod/tracing/tracingtest"
)

// The client's trace context, as it sends it in _meta.
const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
	clientParent  = "00-" + clientTraceID + "-" + clientSpanID + "-01"
)

// startTracing turns tracing on, exporting to a receiver of the test, and
// makes it the observer of h's aggregated view.
func startTracing(t *testing.T, h *harness) (*tracing.Tracing, *tracingtest.Receiver) {
	t.Helper()
	rcv := tracingtest.Start(t)
	tr, err := tracing.New(context.Background(), tracing.Options{Version: "test"})
	if err != nil || tr == nil {
		t.Fatalf("tracing.New: %v, %v", tr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	h.agg.SetObserver(tr)
	return tr, rcv
}

// flush exports what tr holds to rcv.
func flush(t *testing.T, tr *tracing.Tracing) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatalf("ForceFlush: %v", err)
	}
}

// TestTraceRelayedCall: a relayed tools/call whose client sent a
// traceparent in _meta is one trace: snodod's request span is the
// client's span's child, its upstream span the request span's, and the
// hosted server receives the upstream span as its parent in _meta (the
// fake's echo returns the _meta it got), the client's tracestate
// replaced.
func TestTraceRelayedCall(t *testing.T) {
	h := newHarness(t, oneFake)
	tr, rcv := startTracing(t, h)
	c := h.connect("", t.TempDir(), protocol.Version20250618)
	res := c.call("tools/call", `{"name":"fake__echo","arguments":{"x":1},"_meta":{"traceparent":"`+clientParent+`","tracestate":"client=1"}}`)
	if isError(t, res) {
		t.Fatalf("echo: %s", res["result"])
	}
	var echo struct {
		StructuredContent struct {
			Meta map[string]string `json:"meta"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal(res["result"], &echo); err != nil {
		t.Fatal(err)
	}
	got := echo.StructuredContent.Meta["traceparent"]
	parts := strings.Split(got, "-")
	if len(parts) != 4 || parts[1] != clientTraceID || parts[2] == clientSpanID || parts[3] != "01" {
		t.Fatalf("the upstream got traceparent %q; want trace %s, a parent of snodod's, sampled", got, clientTraceID)
	}
	if ts, ok := echo.StructuredContent.Meta["tracestate"]; ok && ts != "client=1" {
		t.Errorf("the upstream got tracestate %q", ts)
	}
	flush(t, tr)
	req, ok := rcv.Find("tools/call fake__echo")
	if !ok {
		t.Fatalf("no request span among %+v", rcv.Spans())
	}
	if req.TraceID != clientTraceID || req.Parent != clientSpanID {
		t.Errorf("request span: trace %s parent %s; want the client's %s, %s", req.TraceID, req.Parent, clientTraceID, clientSpanID)
	}
	for k, want := range map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "fake__echo",
		"snodod.view": "", "snodod.era": "legacy", "snodod.outcome": "ok", "snodod.upstream": "fake", "mcp.protocol.version": protocol.Version20250618} {
		if v, ok := req.Attributes[k]; !ok || v != want {
			t.Errorf("request span attribute %s = %q (%v); want %q", k, v, ok, want)
		}
	}
	if req.Service != "snodod" {
		t.Errorf("service.name %q", req.Service)
	}
	up, ok := rcv.Find("tools/call echo")
	if !ok {
		t.Fatalf("no upstream span among %+v", rcv.Spans())
	}
	if up.TraceID != clientTraceID || up.Parent != req.SpanID || up.SpanID != parts[2] {
		t.Errorf("upstream span: trace %s parent %s id %s; want %s, %s, the upstream's parent %s", up.TraceID, up.Parent, up.SpanID, clientTraceID, req.SpanID, parts[2])
	}
	if up.Attributes["snodod.upstream"] != "fake" || up.Attributes["gen_ai.tool.name"] != "echo" {
		t.Errorf("upstream span attributes %v", up.Attributes)
	}
}

// TestTraceRemoteCall: a call relayed to a remote server carries the
// upstream span as the traceparent header (and in _meta), the client's
// trace id kept.
func TestTraceRemoteCall(t *testing.T) {
	fr := fakeremote.New("far")
	ts := serveRemote(t, fr, fr.Handler(fakeremote.ModeStreamable))
	h := newHarness(t, fmt.Sprintf("[mcpServers.far]\nurl = %q\n", ts.URL+"/"))
	tr, rcv := startTracing(t, h)
	c := h.connect("", "", "2025-11-25")
	res := c.call("tools/call", `{"name":"far__echo","arguments":{"text":"hi"},"_meta":{"traceparent":"`+clientParent+`"}}`)
	if s := text(t, res); s != "far: hi" {
		t.Fatalf("far__echo: %q", s)
	}
	got := fr.LastHeader().Get("Traceparent")
	parts := strings.Split(got, "-")
	if len(parts) != 4 || parts[1] != clientTraceID || parts[2] == clientSpanID {
		t.Fatalf("the remote server got traceparent %q; want trace %s under snodod's span", got, clientTraceID)
	}
	flush(t, tr)
	up, ok := rcv.Find("tools/call echo")
	if !ok {
		t.Fatalf("no upstream span among %+v", rcv.Spans())
	}
	if up.SpanID != parts[2] || up.TraceID != clientTraceID || up.Attributes["snodod.upstream"] != "far" {
		t.Errorf("upstream span %+v; want the header's parent %s", up, parts[2])
	}
}

// BenchmarkRelayedCallTraced is BenchmarkRelayedCall with tracing off
// and on (every span sampled and exported to a receiver in the process),
// the client sending a traceparent.
func BenchmarkRelayedCallTraced(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			h := newBenchHarness(b)
			ss, sess, _, release, err := h.open(b, 1, "fake", "")
			if err != nil {
				b.Fatal(err)
			}
			defer release()
			if on {
				tracingtest.Start(b)
				tr, err := tracing.New(context.Background(), tracing.Options{})
				if err != nil || tr == nil {
					b.Fatal(tr, err)
				}
				defer func() {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					_ = tr.Shutdown(ctx)
				}()
				sess.SetObserver(tr)
			}
			if _, _, perr := sess.Initialize(ss, json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"b","version":"1"}}`)); perr != nil {
				b.Fatal(perr)
			}
			req := &server.Request{ID: protocol.IntID(1), Method: "tools/call",
				Params: json.RawMessage(`{"name":"echo","arguments":{"text":"hello"},"_meta":{"traceparent":"` + clientParent + `"}}`),
				State:  ss, Header: http.Header{server.HeaderProtocolVersion: {"2025-11-25"}}}
			b.ReportAllocs()
			for b.Loop() {
				if o := sess.Dispatch(context.Background(), req); o.Err != nil {
					b.Fatal(o.Err)
				}
			}
		})
	}
}

// TestTracePassThroughView: a pass-through view's runtime is traced too
// (its passObserver stays a RequestStarter), its request span naming the
// view and the upstream.
func TestTracePassThroughView(t *testing.T) {
	h := newHarness(t, oneFake)
	tr, rcv := startTracing(t, h)
	h.m.opts.Observer = tr // as the daemon's Options give it, before the view is attached
	c := h.connect("fake", "", protocol.Version20250618)
	if res := c.call("tools/call", `{"name":"echo","arguments":{},"_meta":{"traceparent":"`+clientParent+`"}}`); isError(t, res) {
		t.Fatalf("echo: %s", res["result"])
	}
	flush(t, tr)
	var req, up tracingtest.Span
	for _, s := range rcv.Spans() {
		switch s.Kind.String() {
		case "SPAN_KIND_SERVER":
			req = s
		case "SPAN_KIND_CLIENT":
			up = s
		}
	}
	if req.Name != "tools/call echo" || req.Parent != clientSpanID || req.Attributes["snodod.view"] != "fake" || req.Attributes["snodod.upstream"] != "fake" {
		t.Errorf("request span %+v", req)
	}
	if up.Parent != req.SpanID || up.TraceID != clientTraceID {
		t.Errorf("upstream span %+v", up)
	}
}
