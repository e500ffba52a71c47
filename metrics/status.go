package metrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/protocol"
)

// statusCollector turns the daemon's status snapshot into metrics at each
// scrape. Counters that the snapshot holds per live session (bytes) keep
// what ended sessions had counted at the last scrape before they ended,
// so that they never go down; what a session moved between that scrape
// and its end is not counted.
type statusCollector struct {
	o Options

	mu      sync.Mutex
	seen    map[uint64]sessionBytes // live sessions at the last scrape
	retired map[string]sessionBytes // by kind: what ended sessions moved
}

type sessionBytes struct {
	kind    string
	in, out int64
}

func newStatusCollector(o Options) *statusCollector {
	return &statusCollector{o: o, seen: map[uint64]sessionBytes{}, retired: map[string]sessionBytes{}}
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descInfo          = desc("snodod_build_info", "The daemon's version, always 1.", "version")
	descStart         = desc("snodod_start_time_seconds", "When the daemon started, in seconds since the epoch.")
	descDraining      = desc("snodod_draining", "1 once a drain has begun (shutdown or upgrade), else 0.")
	descSessions      = desc("snodod_sessions", "Sessions open, by kind (pipe, socket, pty, http) and era (legacy, 2026, none before the first request).", "kind", "era")
	descSessionsMax   = desc("snodod_sessions_limit", "daemon.max_sessions.")
	descInFlight      = desc("snodod_session_requests_in_flight", "Requests the sessions have in flight, all sessions together.")
	descBytesIn       = desc("snodod_received_bytes_total", "Bytes read from clients, by session kind (up to each ended session's last scrape).", "kind")
	descBytesOut      = desc("snodod_sent_bytes_total", "Bytes written to clients, by session kind (up to each ended session's last scrape).", "kind")
	descRunning       = desc("snodod_executor_running", "Executor slots busy (handlers cancelled but not yet returned included).")
	descDetached      = desc("snodod_executor_detached", "Handlers that gave their slot back while they wait (relayed calls).")
	descQueued        = desc("snodod_executor_queued", "Admitted requests waiting for an executor slot.")
	descSlots         = desc("snodod_executor_slots", "executor.max_concurrency: the executor's slots.")
	descQueueMax      = desc("snodod_executor_queue_limit", "executor.max_queue: requests that may wait for a slot.")
	descBuffered      = desc("snodod_buffered_bytes", "Bytes of unfinished lines and pending output all sessions hold.")
	descBufferedMax   = desc("snodod_buffered_bytes_limit", "daemon.max_buffered_bytes, the budget snodod_buffered_bytes is held to.")
	descPendingMax    = desc("snodod_session_pending_output_bytes_limit", "session.max_pending_output_bytes, each session's output budget.")
	descAuditDropped  = desc("snodod_audit_dropped_total", "Audit records dropped because the audit log's queue was full (the writer could not keep up).")
	descRefused       = desc("snodod_refused_connections_total", "Clients refused before they were served, by listener (socket, http, admin) and reason.", "listener", "reason")
	descHTTPRequests  = desc("snodod_http_requests_total", "Requests the HTTP listener served, by era.", "era")
	descHTTPStreams   = desc("snodod_http_streams", "Open SSE responses of the HTTP listener.")
	descHTTPResponses = desc("snodod_http_responses_total", "Responses of the HTTP listener that ended, by status code.", "code")
	descUpInstances   = desc("snodod_upstream_instances", "Instances of a hosted server, by state.", "upstream", "state")
	descUpRestarts    = desc("snodod_upstream_restarts_total", "Restarts of a hosted server's instances (those alive now), by reason: crash (exited or lost, restarted) or manual (snodod upstream restart).", "upstream", "reason")
	descUpStart       = desc("snodod_upstream_start_time_seconds", "When the most recently started ready instance of a hosted server became ready, in seconds since the epoch.", "upstream")
	descUpInFlight    = desc("snodod_upstream_requests_in_flight", "Requests a hosted server's instances have in flight.", "upstream")
	descUpQueued      = desc("snodod_upstream_requests_queued", "Requests waiting for a hosted server's instances.", "upstream")
	descUpRefused     = desc("snodod_upstream_refused_requests_total", "Requests refused by a hosted server's queue bound (instances alive now).", "upstream")
	descUpSessions    = desc("snodod_upstream_sessions", "Sessions using a hosted server.", "upstream")
	descUpCPU         = desc("snodod_upstream_cpu_seconds_total", "CPU time of a hosted server's running process trees (user and system).", "upstream")
	descUpRSS         = desc("snodod_upstream_resident_memory_bytes", "Resident memory of a hosted server's running process trees.", "upstream")
	descUpProcs       = desc("snodod_upstream_processes", "Processes in a hosted server's running process trees.", "upstream")
	upstreamStates    = []string{control.StateStopped, control.StateStarting, control.StateReady, control.StateBackoff, control.StateFailed, control.StateDisabled, control.StateDraining}
	allDescs          = []*prometheus.Desc{descInfo, descStart, descDraining, descSessions, descSessionsMax, descInFlight, descBytesIn, descBytesOut, descRunning, descDetached, descQueued, descSlots, descQueueMax, descBuffered, descBufferedMax, descPendingMax, descRefused, descHTTPRequests, descHTTPStreams, descHTTPResponses, descUpInstances, descUpRestarts, descUpStart, descUpInFlight, descUpQueued, descUpRefused, descUpSessions, descUpCPU, descUpRSS, descUpProcs}
	sessionKinds      = []string{"pipe", "socket", "pty"}
	sessionEras       = []string{"legacy", "2026", "none"}
)

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
}

// eraOf names a session's era by its negotiated version.
func eraOf(version string) string {
	switch {
	case version == "":
		return "none"
	case version == protocol.Version2026:
		return "2026"
	}
	return "legacy"
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	if c.o.Limits != nil {
		l := c.o.Limits()
		gauge(ch, descBufferedMax, float64(l.MaxBufferedBytes))
		gauge(ch, descPendingMax, float64(l.MaxPendingOutputBytes))
	}
	if c.o.AdminRefused != nil {
		for reason, n := range c.o.AdminRefused() {
			counter(ch, descRefused, float64(n), "admin", reason)
		}
	}
	if c.o.AuditDropped != nil {
		counter(ch, descAuditDropped, float64(c.o.AuditDropped()))
	}
	if c.o.Status == nil {
		return
	}
	st := c.o.Status()
	gauge(ch, descInfo, 1, st.Version)
	gauge(ch, descStart, float64(st.Started.UnixNano())/1e9)
	draining := 0.0
	if st.State == "draining" {
		draining = 1
	}
	gauge(ch, descDraining, draining)
	c.collectSessions(ch, st)
	x := st.Executor
	gauge(ch, descRunning, float64(x.Running))
	gauge(ch, descDetached, float64(x.Detached))
	gauge(ch, descQueued, float64(x.Queued))
	gauge(ch, descSlots, float64(x.MaxConcurrency))
	gauge(ch, descQueueMax, float64(x.MaxQueue))
	gauge(ch, descBuffered, float64(st.BufferedBytes))
	for reason, n := range st.Refused {
		counter(ch, descRefused, float64(n), "socket", reason)
	}
	if h := st.HTTP; h != nil {
		for reason, n := range h.Refused {
			counter(ch, descRefused, float64(n), "http", reason)
		}
		counter(ch, descHTTPRequests, float64(h.Requests2026), "2026")
		counter(ch, descHTTPRequests, float64(h.RequestsLegacy), "legacy")
		gauge(ch, descHTTPStreams, float64(h.Streams))
		for code, n := range h.Statuses {
			counter(ch, descHTTPResponses, float64(n), strconv.Itoa(code))
		}
	}
	c.collectUpstreams(ch, st.Upstreams)
}

func (c *statusCollector) collectSessions(ch chan<- prometheus.Metric, st *control.Status) {
	counts := map[[2]string]int{}
	for _, k := range sessionKinds {
		for _, e := range sessionEras {
			counts[[2]string{k, e}] = 0
		}
	}
	inFlight := 0
	live := map[uint64]sessionBytes{}
	totals := map[string]sessionBytes{}
	for _, s := range st.Sessions {
		counts[[2]string{s.Kind, eraOf(s.Version)}]++
		inFlight += s.InFlight
		live[s.ID] = sessionBytes{kind: s.Kind, in: s.BytesIn, out: s.BytesOut}
	}
	if st.HTTP != nil {
		counts[[2]string{"http", "legacy"}] = st.HTTP.Sessions
	}
	for k, n := range counts {
		gauge(ch, descSessions, float64(n), k[0], k[1])
	}
	gauge(ch, descInFlight, float64(inFlight))
	gauge(ch, descSessionsMax, float64(st.MaxSessions))

	c.mu.Lock()
	for id, b := range c.seen {
		if _, ok := live[id]; !ok {
			r := c.retired[b.kind]
			r.in, r.out = r.in+b.in, r.out+b.out
			c.retired[b.kind] = r
		}
	}
	c.seen = live
	for k, r := range c.retired {
		totals[k] = r
	}
	c.mu.Unlock()
	for _, b := range live {
		t := totals[b.kind]
		t.in, t.out = t.in+b.in, t.out+b.out
		totals[b.kind] = t
	}
	for _, k := range sessionKinds {
		if _, ok := totals[k]; !ok {
			totals[k] = sessionBytes{}
		}
	}
	for k, t := range totals {
		counter(ch, descBytesIn, float64(t.in), k)
		counter(ch, descBytesOut, float64(t.out), k)
	}
}

// upstreamSums is one hosted server's instances added up.
type upstreamSums struct {
	states                                             map[string]int
	restarts, manual, inFlight, queued, refused, procs int
	sessions                                           int
	start                                              float64
	cpu                                                float64
	rss                                                int64
	running                                            bool
}

func (c *statusCollector) collectUpstreams(ch chan<- prometheus.Metric, rows []control.Upstream) {
	sums := map[string]*upstreamSums{}
	var order []string
	for _, r := range rows {
		s := sums[r.Name]
		if s == nil {
			s = &upstreamSums{states: map[string]int{}}
			sums[r.Name] = s
			order = append(order, r.Name)
		}
		s.states[r.State]++
		s.restarts += r.Restarts
		s.manual += r.ManualRestarts
		s.inFlight += r.InFlight
		s.queued += r.Queued
		s.refused += r.Refused
		s.sessions = max(s.sessions, r.Sessions)
		if r.State == control.StateReady && !r.Since.IsZero() {
			s.start = max(s.start, float64(r.Since.UnixNano())/1e9)
		}
		if r.PID > 0 && r.URL == "" {
			if u, err := c.o.Usage(r.PID); err == nil {
				s.running = true
				s.cpu += u.CPU.Seconds()
				s.rss += u.RSSBytes
				s.procs += u.Processes
			}
		}
	}
	for _, name := range order {
		s := sums[name]
		for _, state := range upstreamStates {
			gauge(ch, descUpInstances, float64(s.states[state]), name, state)
		}
		counter(ch, descUpRestarts, float64(s.restarts-s.manual), name, "crash")
		counter(ch, descUpRestarts, float64(s.manual), name, "manual")
		if s.start > 0 {
			gauge(ch, descUpStart, s.start, name)
		}
		gauge(ch, descUpInFlight, float64(s.inFlight), name)
		gauge(ch, descUpQueued, float64(s.queued), name)
		counter(ch, descUpRefused, float64(s.refused), name)
		gauge(ch, descUpSessions, float64(s.sessions), name)
		if s.running {
			counter(ch, descUpCPU, s.cpu, name)
			gauge(ch, descUpRSS, float64(s.rss), name)
			gauge(ch, descUpProcs, float64(s.procs), name)
		}
	}
}
