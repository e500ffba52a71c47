package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/fakeupstream/fakebuild"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/tracing/tracingtest"
)

// TestTracesThroughDaemon: with OTEL_EXPORTER_OTLP_ENDPOINT set, a
// relayed call over the session socket is one trace from the client's
// traceparent through snodod's request span (beside the metrics) and its
// upstream span to the hosted server, and the spans reach the collector
// when the daemon stops, with no flush of the test's.
func TestTracesThroughDaemon(t *testing.T) {
	rcv := tracingtest.Start(t)
	dir := shortDir(t)
	path := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(`
[daemon]
socket = %q
shutdown_grace = "2s"

[admin]
listen = "127.0.0.1:0"

[mcpServers.fake]
command = %q
`, filepath.Join(dir, "s.sock"), fakebuild.Build(t))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.Options{File: path, Env: []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "none")}})
	if err != nil {
		t.Fatal(err)
	}
	r := startDaemon(t, cfg, Options{StateDir: filepath.Join(dir, "state")})
	if r.d.tracing == nil || r.d.metrics == nil {
		t.Fatal("tracing or metrics off")
	}
	c := dialSession(t, r.cfg.Daemon.Socket)
	c.initialize()
	const traceID, spanID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fake__echo","arguments":{},"_meta":{"traceparent":"00-` + traceID + `-` + spanID + `-01"}}}`)
	var res struct {
		Result struct {
			StructuredContent struct {
				Meta map[string]string `json:"meta"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	line := c.answer(2)
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(res.Result.StructuredContent.Meta["traceparent"], "-")
	if len(parts) != 4 || parts[1] != traceID || parts[2] == spanID {
		t.Fatalf("the hosted server got %s", line)
	}
	r.stop()
	if err := r.wait(t); err != nil {
		t.Fatal(err)
	}
	req, ok := rcv.Find("tools/call fake__echo")
	if !ok {
		t.Fatalf("no request span among %+v", rcv.Spans())
	}
	up, ok := rcv.Find("tools/call echo")
	if !ok {
		t.Fatalf("no upstream span among %+v", rcv.Spans())
	}
	if req.TraceID != traceID || req.Parent != spanID || up.Parent != req.SpanID || up.SpanID != parts[2] {
		t.Errorf("request span %+v, upstream span %+v", req, up)
	}
	if req.Attributes["snodod.session.kind"] != "socket" || req.Attributes["snodod.upstream"] != "fake" || req.Service != "snodod" {
		t.Errorf("request span %+v", req)
	}
}

// Without an OTLP endpoint there is no tracer, and the observer is the
// metrics' and the audit log's.
func TestTracesOff(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	r := startDaemon(t, testConfig(t, shortDir(t), map[string]any{"admin.listen": "127.0.0.1:0"}), Options{})
	if r.d.tracing != nil || r.d.observer() != server.Observer(metricsAndAudit{r.d.metrics, &r.d.audit}) {
		t.Errorf("tracing %v, observer %T", r.d.tracing, r.d.observer())
	}
}
