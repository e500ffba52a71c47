package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

var started = time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)

// fixture is a daemon's status that tests change between scrapes.
type fixture struct{ st *control.Status }

func (f *fixture) status() *control.Status { return f.st }

func newFixture() *fixture {
	return &fixture{st: &control.Status{
		State: "running", Version: "1.2.3", Started: started, MaxSessions: 100, BufferedBytes: 4096,
		Sessions: []control.Session{
			{ID: 1, Kind: "socket", Version: "2025-11-25", InFlight: 2, BytesIn: 100, BytesOut: 1000},
			{ID: 2, Kind: "pipe", Version: "2026-07-28", BytesIn: 10, BytesOut: 20},
			{ID: 3, Kind: "pty"},
		},
		Executor: control.Executor{Running: 3, Detached: 1, Queued: 4, MaxConcurrency: 16, MaxQueue: 256},
		Upstreams: []control.Upstream{
			{Name: "mem", State: control.StateReady, PID: 4242, Since: started.Add(time.Minute), Restarts: 2, ManualRestarts: 1, InFlight: 1, Queued: 1, Sessions: 2},
			{Name: "mem", State: control.StateBackoff, Restarts: 1},
			{Name: "web", State: control.StateReady, URL: "https://example.invalid/mcp", Since: started},
		},
		HTTP:    &control.HTTP{Sessions: 5, Streams: 2, Requests2026: 7, RequestsLegacy: 9, Refused: map[string]uint64{"origin": 1}, Statuses: map[int]uint64{200: 12, 403: 1}},
		Refused: map[string]int64{"uid": 3},
	}}
}

func newTestMetrics(f *fixture) *Metrics {
	return New(Options{
		Status: f.status,
		Limits: func() limits.Limits {
			return limits.Limits{MaxBufferedBytes: 64_000_000, MaxPendingOutputBytes: 8_000_000}
		},
		AdminRefused: func() map[string]uint64 { return map[string]uint64{"peer": 4} },
		AuditDropped: func() uint64 { return 3 },
		Usage: func(pid int) (proc.Usage, error) {
			if pid != 4242 {
				return proc.Usage{}, errors.New("no such process")
			}
			return proc.Usage{CPU: 1500 * time.Millisecond, RSSBytes: 1 << 20, Processes: 2}, nil
		},
	})
}

// Every request outcome lands under its labels: ok, an error with its
// code (a hosted server's own code as "other"), cancelled, timed out;
// an unknown method as "other"; the upstream leg only for relayed ones.
// A label set's "ok" series exists, at 0, from its first request on.
func TestRequestMetrics(t *testing.T) {
	m := newTestMetrics(newFixture())
	ends := []server.RequestEnd{
		{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Duration: 3 * time.Millisecond, UpstreamDuration: 2 * time.Millisecond},
		{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Duration: time.Millisecond, UpstreamDuration: time.Millisecond},
		{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Err: &protocol.Error{Code: 42}},
		{Method: "tools/call", Item: "echo", Err: &protocol.Error{Code: protocol.CodeInvalidParams}},
		{Method: "tools/call", Item: "echo", Cancelled: true},
		{Method: "prompts/get", Item: "greet", TimedOut: true},
		{Method: "x/invented", Err: &protocol.Error{Code: protocol.CodeMethodNotFound}},
		{Method: "tools/list"},
	}
	for i := range ends {
		m.RequestEnded(ends[i])
	}
	want := `
# HELP snodod_requests_total Requests served by the runtime, by method, tool (tools/call), upstream (relayed) and outcome (ok, error with its JSON-RPC code, cancelled, timed_out).
# TYPE snodod_requests_total counter
snodod_requests_total{code="",method="other",outcome="ok",tool="",upstream=""} 0
snodod_requests_total{code="",method="prompts/get",outcome="ok",tool="",upstream=""} 0
snodod_requests_total{code="",method="prompts/get",outcome="timed_out",tool="",upstream=""} 1
snodod_requests_total{code="",method="tools/call",outcome="cancelled",tool="echo",upstream=""} 1
snodod_requests_total{code="",method="tools/call",outcome="ok",tool="echo",upstream=""} 0
snodod_requests_total{code="",method="tools/call",outcome="ok",tool="mem__read",upstream="mem"} 2
snodod_requests_total{code="",method="tools/list",outcome="ok",tool="",upstream=""} 1
snodod_requests_total{code="-32601",method="other",outcome="error",tool="",upstream=""} 1
snodod_requests_total{code="-32602",method="tools/call",outcome="error",tool="echo",upstream=""} 1
snodod_requests_total{code="other",method="tools/call",outcome="error",tool="mem__read",upstream="mem"} 1
`
	if err := testutil.GatherAndCompare(m.Gather(), strings.NewReader(want), "snodod_requests_total"); err != nil {
		t.Error(err)
	}
	if got := histogramCount(t, m, "snodod_upstream_request_duration_seconds", "upstream", "mem"); got != 3 {
		t.Errorf("upstream leg of mem: %d observations, want 3", got)
	}
	if got := histogramCount(t, m, "snodod_request_duration_seconds", "tool", "echo"); got != 2 {
		t.Errorf("latency of echo: %d observations, want 2", got)
	}
	if n := testutil.CollectAndCount(m.upstream); n != 1 {
		t.Errorf("upstream leg: %d series, want 1 (mem, tools/call)", n)
	}
}

// histogramCount is the sample count of the series of family name whose
// label has value.
func histogramCount(t *testing.T, m *Metrics, name, label, value string) uint64 {
	t.Helper()
	fams, err := m.Gather().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return mt.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return 0
}

// The scrape-time metrics read the status snapshot: sessions by kind and
// era (HTTP's legacy sessions too), the executor, the budgets, refusals
// by listener, each hosted server summed over its instances with the
// CPU and memory of its process tree (a remote one has none).
func TestStatusMetrics(t *testing.T) {
	m := newTestMetrics(newFixture())
	want := map[string]string{
		"snodod_sessions": `
# HELP snodod_sessions Sessions open, by kind (pipe, socket, pty, http) and era (legacy, 2026, none before the first request).
# TYPE snodod_sessions gauge
snodod_sessions{era="2026",kind="pipe"} 1
snodod_sessions{era="2026",kind="pty"} 0
snodod_sessions{era="2026",kind="socket"} 0
snodod_sessions{era="legacy",kind="http"} 5
snodod_sessions{era="legacy",kind="pipe"} 0
snodod_sessions{era="legacy",kind="pty"} 0
snodod_sessions{era="legacy",kind="socket"} 1
snodod_sessions{era="none",kind="pipe"} 0
snodod_sessions{era="none",kind="pty"} 1
snodod_sessions{era="none",kind="socket"} 0
`,
		"snodod_refused_connections_total": `
# HELP snodod_refused_connections_total Clients refused before they were served, by listener (socket, http, admin) and reason.
# TYPE snodod_refused_connections_total counter
snodod_refused_connections_total{listener="admin",reason="peer"} 4
snodod_refused_connections_total{listener="http",reason="origin"} 1
snodod_refused_connections_total{listener="socket",reason="uid"} 3
`,
		"snodod_upstream_instances": `
# HELP snodod_upstream_instances Instances of a hosted server, by state.
# TYPE snodod_upstream_instances gauge
snodod_upstream_instances{state="backoff",upstream="mem"} 1
snodod_upstream_instances{state="backoff",upstream="web"} 0
snodod_upstream_instances{state="disabled",upstream="mem"} 0
snodod_upstream_instances{state="disabled",upstream="web"} 0
snodod_upstream_instances{state="draining",upstream="mem"} 0
snodod_upstream_instances{state="draining",upstream="web"} 0
snodod_upstream_instances{state="failed",upstream="mem"} 0
snodod_upstream_instances{state="failed",upstream="web"} 0
snodod_upstream_instances{state="ready",upstream="mem"} 1
snodod_upstream_instances{state="ready",upstream="web"} 1
snodod_upstream_instances{state="starting",upstream="mem"} 0
snodod_upstream_instances{state="starting",upstream="web"} 0
snodod_upstream_instances{state="stopped",upstream="mem"} 0
snodod_upstream_instances{state="stopped",upstream="web"} 0
`,
		"snodod_upstream_cpu_seconds_total": `
# HELP snodod_upstream_cpu_seconds_total CPU time of a hosted server's running process trees (user and system).
# TYPE snodod_upstream_cpu_seconds_total counter
snodod_upstream_cpu_seconds_total{upstream="mem"} 1.5
`,
		"snodod_upstream_resident_memory_bytes": `
# HELP snodod_upstream_resident_memory_bytes Resident memory of a hosted server's running process trees.
# TYPE snodod_upstream_resident_memory_bytes gauge
snodod_upstream_resident_memory_bytes{upstream="mem"} 1.048576e+06
`,
		"snodod_upstream_restarts_total": `
# HELP snodod_upstream_restarts_total Restarts of a hosted server's instances (those alive now), by reason: crash (exited or lost, restarted) or manual (snodod upstream restart).
# TYPE snodod_upstream_restarts_total counter
snodod_upstream_restarts_total{reason="crash",upstream="mem"} 2
snodod_upstream_restarts_total{reason="crash",upstream="web"} 0
snodod_upstream_restarts_total{reason="manual",upstream="mem"} 1
snodod_upstream_restarts_total{reason="manual",upstream="web"} 0
`,
		"snodod_upstream_start_time_seconds": `
# HELP snodod_upstream_start_time_seconds When the most recently started ready instance of a hosted server became ready, in seconds since the epoch.
# TYPE snodod_upstream_start_time_seconds gauge
snodod_upstream_start_time_seconds{upstream="mem"} 1.79619486e+09
snodod_upstream_start_time_seconds{upstream="web"} 1.7961948e+09
`,
		"snodod_executor_queued": `
# HELP snodod_executor_queued Admitted requests waiting for an executor slot.
# TYPE snodod_executor_queued gauge
snodod_executor_queued 4
`,
		"snodod_buffered_bytes_limit": `
# HELP snodod_buffered_bytes_limit daemon.max_buffered_bytes, the budget snodod_buffered_bytes is held to.
# TYPE snodod_buffered_bytes_limit gauge
snodod_buffered_bytes_limit 6.4e+07
`,
		"snodod_http_responses_total": `
# HELP snodod_http_responses_total Responses of the HTTP listener that ended, by status code.
# TYPE snodod_http_responses_total counter
snodod_http_responses_total{code="200"} 12
snodod_http_responses_total{code="403"} 1
`,
		"snodod_http_requests_total": `
# HELP snodod_http_requests_total Requests the HTTP listener served, by era.
# TYPE snodod_http_requests_total counter
snodod_http_requests_total{era="2026"} 7
snodod_http_requests_total{era="legacy"} 9
`,
	}
	for name, text := range want {
		if err := testutil.GatherAndCompare(m.Gather(), strings.NewReader(text), name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The bytes counters keep what a session that ended had moved at the
// last scrape: they never go down.
func TestBytesSurviveSessionEnd(t *testing.T) {
	f := newFixture()
	m := newTestMetrics(f)
	bytesIn := func() float64 {
		fams, err := m.Gather().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, fam := range fams {
			if fam.GetName() == "snodod_received_bytes_total" {
				for _, mt := range fam.GetMetric() {
					if mt.GetLabel()[0].GetValue() == "socket" {
						return mt.GetCounter().GetValue()
					}
				}
			}
		}
		return -1
	}
	if got := bytesIn(); got != 100 {
		t.Fatalf("socket bytes in: %v, want 100", got)
	}
	f.st.Sessions = f.st.Sessions[1:] // session 1 ended
	if got := bytesIn(); got != 100 {
		t.Errorf("after its session ended: %v, want 100", got)
	}
	f.st.Sessions = append(f.st.Sessions, control.Session{ID: 9, Kind: "socket", BytesIn: 5})
	if got := bytesIn(); got != 105 {
		t.Errorf("with a new session: %v, want 105", got)
	}
}

// What the handler serves passes promtool's lint (the library promtool
// check metrics runs), and promtool itself where it is installed; the
// scraper gets OpenMetrics when it asks for it.
func TestExpositionLint(t *testing.T) {
	m := newTestMetrics(newFixture())
	m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "mem__read", Relayed: true, Owner: "mem", Duration: time.Millisecond, UpstreamDuration: time.Millisecond})
	problems, err := testutil.GatherAndLint(m.Gather())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "snodod_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	text := scrape(t, srv.URL, "")
	if !strings.Contains(text, "snodod_requests_total{") {
		t.Fatalf("the text exposition has no snodod_requests_total:\n%s", text)
	}
	if om := scrape(t, srv.URL, "application/openmetrics-text; version=1.0.0"); !strings.HasSuffix(om, "# EOF\n") {
		t.Errorf("OpenMetrics asked, got:\n%.300s", om)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed: the lint library alone checked")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

func scrape(t *testing.T, url, accept string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// ClassicOnly (admin.native_histograms = false) leaves the native
// buckets out; by default an observation has them.
func TestClassicOnly(t *testing.T) {
	for _, classic := range []bool{false, true} {
		m := New(Options{ClassicOnly: classic})
		m.RequestEnded(server.RequestEnd{Method: "tools/call", Item: "echo", Duration: time.Millisecond})
		fams, err := m.Gather().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "snodod_request_duration_seconds" {
				continue
			}
			h := f.GetMetric()[0].GetHistogram()
			if native := len(h.GetPositiveSpan()) > 0; native == classic {
				t.Errorf("classic only %v: native buckets %v", classic, native)
			}
			if len(h.GetBucket()) != len(latencyBuckets) {
				t.Errorf("classic only %v: %d classic buckets, want %d", classic, len(h.GetBucket()), len(latencyBuckets))
			}
		}
	}
}
