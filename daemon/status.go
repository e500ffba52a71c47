package daemon

import (
	"cmp"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/snodod/snodod/upstream"
)

// Status is what `snodod status` shows: the daemon, each session, and the
// shared executor's load. It is the control socket's answer to "status".
type Status struct {
	// State is "running", or "draining" once a drain has begun: no new
	// sessions, and the ones listed are finishing.
	State       string    `json:"state"`
	Version     string    `json:"version"`
	PID         int       `json:"pid"`
	Started     time.Time `json:"started"`
	MaxSessions int       `json:"max_sessions"`
	// Goroutines is the process's goroutine count, and BufferedBytes the
	// bytes of unfinished lines its sessions hold (daemon.max_buffered_bytes):
	// what a soak or a leak hunt watches.
	Goroutines    int   `json:"goroutines"`
	BufferedBytes int64 `json:"buffered_bytes"`
	// Sessions are ordered by id (oldest first).
	Sessions []SessionStatus `json:"sessions"`
	Executor ExecutorStatus  `json:"executor"`
	// Upstreams has one row per hosted server instance (docs/upstreams.md §8).
	Upstreams []upstream.Status `json:"upstreams"`
	// Warnings are what the configured catalog could not do, such as a
	// folder with more directories than max_watched_dirs.
	Warnings []string `json:"warnings,omitempty"`
	// HTTP is the HTTP listener's state; nil without http.listen.
	HTTP *HTTPStatus `json:"http,omitempty"`
	// Refused counts the clients of the sockets refused since the start,
	// by reason: "uid" (daemon.allowed_uids), "capacity"
	// (daemon.max_sessions), "uid_capacity" (daemon.max_sessions_per_uid),
	// "draining", "descriptors"; and "initialize_timeout", the sessions
	// ended for sending no request (daemon.initialize_timeout).
	Refused map[string]int64 `json:"refused,omitempty"`
}

// SessionStatus is one session's row.
type SessionStatus struct {
	ID uint64 `json:"id"`
	// Kind is the device: "pipe", "socket" or "pty".
	Kind    string    `json:"kind"`
	PeerPID int       `json:"peer_pid"`
	PeerUID int       `json:"peer_uid"`
	Started time.Time `json:"started"`
	// Version is the negotiated MCP version; "" before initialize.
	Version       string `json:"version"`
	InFlight      int    `json:"in_flight"`
	Subscriptions int    `json:"subscriptions"`
	Restarts      int    `json:"restarts"`
	BytesIn       int64  `json:"bytes_in"`
	BytesOut      int64  `json:"bytes_out"`
}

// ExecutorStatus is the load of the executor new sessions use, and its
// limits. (After a reload that changed executor.* the sessions started
// before it go on sharing the previous executor, which is not counted.)
type ExecutorStatus struct {
	Running int `json:"running"`
	// Detached counts requests in flight that hold no slot while they wait
	// on a child (docs/transport.md §13.7).
	Detached       int `json:"detached"`
	Queued         int `json:"queued"`
	MaxConcurrency int `json:"max_concurrency"`
	// MaxQueue is the queue places every session shares; each session
	// has SessionQueue more of its own besides (docs/config.md,
	// executor.max_queue).
	MaxQueue       int    `json:"max_queue"`
	SessionQueue   int    `json:"session_queue"`
	RequestTimeout string `json:"request_timeout"`
}

// Status returns a snapshot of the daemon.
func (d *Daemon) Status() *Status {
	g := d.gen.Load()
	list := d.liveSessions()
	rows := make([]SessionStatus, 0, len(list))
	for _, s := range list {
		st := s.Stats()
		rows = append(rows, SessionStatus{
			ID: st.ID, Kind: string(st.Kind), PeerPID: st.Peer.PID, PeerUID: st.Peer.UID,
			Started: st.Started, Version: st.Version, InFlight: st.InFlight,
			Subscriptions: st.Subscriptions, Restarts: st.Restarts,
			BytesIn: st.BytesIn, BytesOut: st.BytesOut,
		})
	}
	slices.SortFunc(rows, func(a, b SessionStatus) int { return cmp.Compare(a.ID, b.ID) })
	load, limits := g.exec.Stats(), g.exec.Limits()
	state := "running"
	if d.draining.Err() != nil {
		state = "draining"
	}
	return &Status{
		State:         state,
		Version:       d.version(),
		PID:           os.Getpid(),
		Started:       d.started,
		Goroutines:    runtime.NumGoroutine(),
		BufferedBytes: d.budget.Used(),
		MaxSessions:   g.limits.MaxSessions,
		Sessions:      rows,
		Executor: ExecutorStatus{
			Running: load.Running, Detached: load.Detached, Queued: load.Queued,
			MaxConcurrency: limits.MaxConcurrency, MaxQueue: limits.MaxQueue, SessionQueue: limits.ConnQueue,
			RequestTimeout: limits.RequestTimeout.String(),
		},
		Upstreams: d.ups.Status(),
		Warnings:  d.host.Warnings(),
		HTTP:      d.httpStatus(),
		Refused:   d.refusals(),
	}
}
