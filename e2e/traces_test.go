package e2e_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/tracing/tracingtest"
)

// The traces end to end (docs/observability.md, "Traces"): snodod serve
// with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP receiver of the
// test; a Go SDK client, through snodod connect, calls a hosted server's
// tool with a traceparent in _meta. The hosted server gets a traceparent
// of the client's trace whose parent is snodod's upstream span, and when
// the daemon stops the receiver has the request span (the client's span
// its parent) and the upstream span under it.
func TestTracesEndToEnd(t *testing.T) {
	rcv := tracingtest.New(t)
	fake := fakeUpstream(t)
	d := startDaemon(t, fmt.Sprintf("[mcpServers.fake]\ncommand = %q\nstart = \"eager\"\n", fake),
		[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL(), "OTEL_SERVICE_NAME=snodod-e2e"})
	d.awaitStatus(t, "the upstream ready", answerWithin, func(st *control.Status) bool {
		return len(st.Upstreams) == 1 && st.Upstreams[0].State == "ready"
	})
	const traceID, spanID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	c := connectGoVia(t, d, "2025-11-25")
	res, err := c.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "fake__echo", Arguments: map[string]any{},
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-" + spanID + "-01", "tracestate": "e2e=1"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var echo struct {
		Meta map[string]string `json:"meta"`
	}
	if err := json.Unmarshal(raw, &echo); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(echo.Meta["traceparent"], "-")
	if len(parts) != 4 || parts[1] != traceID || parts[2] == spanID || echo.Meta["tracestate"] != "e2e=1" {
		t.Fatalf("the hosted server got _meta %v", echo.Meta)
	}
	d.stop(t) // the spans are exported as the daemon ends
	req, ok := rcv.Find("tools/call fake__echo")
	if !ok {
		t.Fatalf("no request span among %+v", rcv.Spans())
	}
	up, ok := rcv.Find("tools/call echo")
	if !ok {
		t.Fatalf("no upstream span among %+v", rcv.Spans())
	}
	if req.TraceID != traceID || req.Parent != spanID || up.TraceID != traceID || up.Parent != req.SpanID || up.SpanID != parts[2] {
		t.Errorf("request span %+v\nupstream span %+v", req, up)
	}
	if req.Service != "snodod-e2e" || req.Attributes["snodod.session.kind"] == "" || req.Attributes["snodod.outcome"] != "ok" {
		t.Errorf("request span %+v", req)
	}
}
