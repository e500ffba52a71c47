package metrics

import (
	"maps"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Options are where the scrape-time metrics come from. Each function is
// called once per scrape, on the scraping goroutine; nil leaves its
// metrics out.
type Options struct {
	// Status is the daemon's snapshot, as `snodod status` shows it.
	Status func() *control.Status
	// Limits are the limits in force (reloaded ones included).
	Limits func() limits.Limits
	// AdminRefused counts the admin listener's own refusals by reason.
	AdminRefused func() map[string]uint64
	// AuditDropped counts the audit records dropped on a full queue.
	AuditDropped func() uint64
	// Usage reads a hosted server's process tree; nil is proc.TreeUsage.
	Usage func(pid int) (proc.Usage, error)
	// ClassicOnly leaves out the histograms' native buckets
	// (admin.native_histograms = false), which are much of what an
	// observation costs (docs/observability.md, "Cost").
	ClassicOnly bool
}

// Metrics is the registry and the request instruments. Its methods may
// be called concurrently.
type Metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	upstream  *prometheus.HistogramVec
	collector *statusCollector
	// series caches the instruments of each (method, tool, upstream):
	// resolving a vector's labels hashes and validates every value, most
	// of what a request would cost otherwise. Bounded as the labels are,
	// so it is copied on write: a request reads it without a lock.
	series   atomic.Pointer[map[seriesKey]*series]
	seriesMu sync.Mutex // one writer at a time
}

type seriesKey struct{ method, tool, upstream string }

// series is one label set's instruments; ok is its counter of the
// outcome "ok", the others' are resolved when they happen.
type series struct {
	ok       prometheus.Counter
	latency  prometheus.Observer
	upstream prometheus.Observer // nil until a relayed request
}

var _ server.Observer = (*Metrics)(nil)

// Latency buckets, in seconds: from a cached list (sub-millisecond) to a
// long tool run. Native histograms refine them where the scraper asks for
// protobuf.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

func histogramOpts(name, help string, classicOnly bool) prometheus.HistogramOpts {
	o := prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}
	if !classicOnly {
		o.NativeHistogramBucketFactor = 1.1
		o.NativeHistogramMaxBucketNumber = 160
		o.NativeHistogramMinResetDuration = time.Hour
	}
	return o
}

// New returns the daemon's metrics: the request instruments, the
// scrape-time collector of o, and the Go runtime's and the process's own
// collectors (go_*, process_*).
func New(o Options) *Metrics {
	if o.Usage == nil {
		o.Usage = proc.TreeUsage
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snodod_requests_total",
			Help: "Requests served by the runtime, by method, tool (tools/call), upstream (relayed) and outcome (ok, error with its JSON-RPC code, cancelled, timed_out).",
		}, []string{"method", "tool", "upstream", "outcome", "code"}),
		latency: prometheus.NewHistogramVec(histogramOpts("snodod_request_duration_seconds",
			"Time from dispatch to the handler's return, by method, tool and upstream.", o.ClassicOnly), []string{"method", "tool", "upstream"}),
		upstream: prometheus.NewHistogramVec(histogramOpts("snodod_upstream_request_duration_seconds",
			"Time a relayed request spent with its hosted server (queue, start and answer), by upstream and method.", o.ClassicOnly), []string{"upstream", "method"}),
		collector: newStatusCollector(o),
	}
	m.reg.MustRegister(m.requests, m.latency, m.upstream, m.collector,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry: OpenMetrics, Prometheus text or protobuf
// (native histograms) as the scraper's Accept header asks. A collector's
// failure is served as a 500 naming it.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, ErrorHandling: promhttp.HTTPErrorOnError})
}

// Gather returns the registry's metric families (tests, promtool).
func (m *Metrics) Gather() prometheus.Gatherer { return m.reg }

// RequestEnded counts a request and observes its latencies (the
// server.Observer of every runtime of the daemon). It never blocks.
func (m *Metrics) RequestEnded(e server.RequestEnd) {
	tool := ""
	if e.Method == "tools/call" {
		tool = e.Item
	}
	method := e.Method
	if !knownMethod(method) {
		method = "other" // a client's invention, answered -32601
	}
	s := m.seriesOf(seriesKey{method, tool, e.Owner}, e.Relayed)
	if outcome, code := outcomeOf(&e); outcome == "ok" {
		s.ok.Inc()
	} else {
		m.requests.WithLabelValues(method, tool, e.Owner, outcome, code).Inc()
	}
	s.latency.Observe(e.Duration.Seconds())
	if e.Relayed {
		s.upstream.Observe(e.UpstreamDuration.Seconds())
	}
}

// seriesOf returns k's instruments, made at its first request (with the
// upstream leg's once relayed).
func (m *Metrics) seriesOf(k seriesKey, relayed bool) *series {
	if p := m.series.Load(); p != nil {
		if s := (*p)[k]; s != nil && (s.upstream != nil || !relayed) {
			return s
		}
	}
	m.seriesMu.Lock()
	defer m.seriesMu.Unlock()
	old := map[seriesKey]*series{}
	if p := m.series.Load(); p != nil {
		old = *p
	}
	if s := old[k]; s != nil && (s.upstream != nil || !relayed) {
		return s // another request made it meanwhile
	}
	s := &series{ok: m.requests.WithLabelValues(k.method, k.tool, k.upstream, "ok", ""), latency: m.latency.WithLabelValues(k.method, k.tool, k.upstream)}
	if relayed {
		s.upstream = m.upstream.WithLabelValues(k.upstream, k.method)
	}
	next := maps.Clone(old)
	next[k] = s
	m.series.Store(&next)
	return s
}

// knownMethod reports whether either era serves method
// (docs/protocol.md §3.1).
func knownMethod(method string) bool {
	return protocol.Availability(protocol.Legacy, method) == nil || protocol.Availability(protocol.Modern, method) == nil
}

// outcomeOf names a request's outcome and, for an error, its code: one of
// JSON-RPC's reserved range (-32768 to -32000), else "other", so that a
// hosted server's own codes cannot grow the label set.
func outcomeOf(e *server.RequestEnd) (outcome, code string) {
	switch {
	case e.TimedOut:
		return "timed_out", ""
	case e.Cancelled:
		return "cancelled", ""
	case e.Err == nil:
		return "ok", ""
	case e.Err.Code >= -32768 && e.Err.Code <= -32000:
		return "error", strconv.FormatInt(e.Err.Code, 10)
	}
	return "error", "other"
}
