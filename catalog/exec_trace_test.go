package catalog_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snodod/snodod/tracing"
	"github.com/snodod/snodod/tracing/tracingtest"
)

// TestExecRunTraced: with tracing on, an exec tool's run is a span of its
// own, a child of the request's, which is the child of the client's
// traceparent; the program inherits the run's span as TRACEPARENT.
func TestExecRunTraced(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	rcv := tracingtest.Start(t)
	tr, err := tracing.New(context.Background(), tracing.Options{Version: "test"})
	if err != nil || tr == nil {
		t.Fatalf("tracing.New: %v, %v", tr, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	defer func() { _ = tr.Shutdown(ctx) }()
	c := execHost(t, t.TempDir(), helperTool(t, "env", "env", nil, ""))
	c.s.SetObserver(tr)
	out := c.dispatch(ctx, "tools/call", map[string]any{"name": "env", "arguments": map[string]any{},
		"_meta": map[string]any{"traceparent": "00-" + traceID + "-" + spanID + "-01"}})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	raw, _ := json.Marshal(out.Result)
	var res struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", raw, err)
	}
	var seen struct{ Env []string }
	if err := json.Unmarshal([]byte(res.Content[0].Text), &seen); err != nil {
		t.Fatalf("output %q: %v", res.Content[0].Text, err)
	}
	var parent string
	for _, kv := range seen.Env {
		if v, ok := strings.CutPrefix(kv, "TRACEPARENT="); ok {
			parent = v
		}
	}
	parts := strings.Split(parent, "-")
	if len(parts) != 4 || parts[1] != traceID || parts[2] == spanID {
		t.Fatalf("the program's TRACEPARENT is %q; want trace %s under snodod's span", parent, traceID)
	}
	if err := tr.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	req, ok := rcv.Find("tools/call env")
	if !ok {
		t.Fatalf("no request span among %+v", rcv.Spans())
	}
	run, ok := rcv.Find("exec env")
	if !ok {
		t.Fatalf("no exec span among %+v", rcv.Spans())
	}
	if req.Parent != spanID || run.TraceID != traceID || run.Parent != req.SpanID || run.SpanID != parts[2] {
		t.Errorf("request span %+v, exec span %+v; want the client's %s → request → exec → %s", req, run, spanID, parts[2])
	}
	if run.Attributes["process.exit.code"] != "0" || run.StatusError {
		t.Errorf("exec span attributes %v, error %v", run.Attributes, run.StatusError)
	}
}
