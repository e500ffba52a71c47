package daemon

import (
	"cmp"
	"encoding/json"
	"os"
	"runtime"
	"slices"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/upstream"
)

// Status returns a snapshot of the daemon: what `snodod status` shows
// (control.Status), the control socket's answer to "status".
func (d *Daemon) Status() *control.Status {
	g := d.gen.Load()
	list := d.sessions.started()
	rows := make([]control.Session, 0, len(list))
	for _, e := range list {
		st, at := e.s.Stats(), e.at
		rows = append(rows, control.Session{
			ID: st.ID, Kind: string(st.Kind), PeerPID: st.Peer.PID, PeerUID: st.Peer.UID,
			Started: st.Started, Version: st.Version, Client: clientInfo(st.ClientInfo),
			Via: at.via, View: at.view, InFlight: st.InFlight, Requests: st.Requests,
			Subscriptions: st.Subscriptions, Restarts: st.Restarts,
			BytesIn: st.BytesIn, BytesOut: st.BytesOut,
		})
	}
	slices.SortFunc(rows, func(a, b control.Session) int { return cmp.Compare(a.ID, b.ID) })
	load, limits := g.exec.Stats(), g.exec.Limits()
	state := "running"
	if d.draining.Err() != nil {
		state = "draining"
	}
	views := d.viewRows(g, rows)
	return &control.Status{
		Views:         views,
		State:         state,
		Version:       d.version(),
		PID:           os.Getpid(),
		Started:       d.started,
		Goroutines:    runtime.NumGoroutine(),
		BufferedBytes: d.budget.Used(),
		MaxSessions:   g.limits.MaxSessions,
		Sessions:      rows,
		Executor: control.Executor{
			Running: load.Running, Detached: load.Detached, Queued: load.Queued,
			MaxConcurrency: limits.MaxConcurrency, MaxQueue: limits.MaxQueue, SessionQueue: limits.ConnQueue,
			RequestTimeout: limits.RequestTimeout.String(),
		},
		Upstreams: upstreamRows(d.ups.Status()),
		Warnings:  append(d.reloadWarnings(), d.host.Warnings()...),
		HTTP:      d.httpStatus(),
		Refused:   d.refusals(),
	}
}

// clientInfo is the name and version of a client's clientInfo object, nil
// when it sent none (or one without a name).
func clientInfo(raw json.RawMessage) *control.ClientInfo {
	var info control.ClientInfo
	if len(raw) == 0 || json.Unmarshal(raw, &info) != nil || info.Name == "" {
		return nil
	}
	return &info
}

// upstreamRows converts the upstream package's rows to the control
// protocol's, field by field (TestUpstreamRowsCopyEveryField keeps the
// two types alike).
func upstreamRows(in []upstream.Status) []control.Upstream {
	out := make([]control.Upstream, len(in))
	for i, r := range in {
		out[i] = control.Upstream{
			Name: r.Name, State: string(r.State), Instance: r.Instance, Share: r.Share, Start: r.Start,
			PID: r.PID, URL: r.URL, Auth: r.Auth, Era: r.Era, Version: r.Version, Server: r.Server, Since: r.Since, StartingSince: r.StartingSince,
			Restarts: r.Restarts, ManualRestarts: r.ManualRestarts, Failures: r.Failures, Cause: r.Cause, LastExit: r.LastExit,
			RetryInMs: r.RetryInMs, InFlight: r.InFlight, Queued: r.Queued, Sessions: r.Sessions,
			Tools: r.Tools, Prompts: r.Prompts, Resources: r.Resources, Templates: r.Templates,
			Cached: r.Cached, Hidden: r.Hidden, Collided: r.Collided, Shortened: r.Shortened,
			Unattributed: r.Unattributed, Dropped: r.Dropped, Subscribed: r.Subscribed,
			Refused:   r.Refused,
			Truncated: r.Truncated,
			Changed:   r.Changed, New: r.New, Quarantined: r.Quarantined,
			Sandbox: r.Sandbox, Unenforced: r.Unenforced, CPUMs: r.CPUMs, RSSBytes: r.RSSBytes,
		}
	}
	return out
}
