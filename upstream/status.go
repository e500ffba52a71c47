package upstream

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/mcpclient"
)

// Status is one row of `snodod status` (docs/upstreams.md §8): one per
// instance, or one per upstream that has none yet.
type Status struct {
	Name string `json:"name"`
	// State is stopped, starting, ready, backoff, failed, disabled or
	// draining.
	State State `json:"state"`
	// Instance is the share key: "all", the directory of a cwd instance,
	// "session N".
	Instance string `json:"instance"`
	Share    string `json:"share"`
	Start    string `json:"start"`
	PID      int    `json:"pid,omitempty"`
	// URL is a remote server's (its query's values hidden), instead of a
	// process; Auth its authorization: "ok (expires in 52m)", "login
	// required", "refresh failed: <reason>", "" when it asked for none.
	URL  string `json:"url,omitempty"`
	Auth string `json:"auth,omitempty"`
	// Era is "legacy" or "2026"; Version the protocol version spoken.
	Era     string `json:"era,omitempty"`
	Version string `json:"version,omitempty"`
	// Server is the upstream's serverInfo name and version.
	Server string    `json:"server,omitempty"`
	Since  time.Time `json:"since,omitzero"` // ready since
	// StartingSince is when the start under way began (state starting);
	// PID is then the starting process's, before its handshake ends.
	StartingSince time.Time `json:"starting_since,omitzero"`
	// Restarts counts the instance's process restarts, ManualRestarts
	// those of them that snodod upstream restart ordered (the rest: a
	// crash restarted).
	Restarts       int `json:"restarts"`
	ManualRestarts int `json:"manual_restarts"`
	// Failures counts consecutive failed starts or crashes; Cause the
	// last one's reason; RetryInMs when the next attempt is due.
	Failures  int    `json:"failures"`
	Cause     string `json:"cause,omitempty"`
	LastExit  string `json:"last_exit,omitempty"`
	RetryInMs *int64 `json:"retry_in_ms,omitempty"`
	InFlight  int    `json:"in_flight"`
	Queued    int    `json:"queued"`
	Sessions  int    `json:"sessions"`
	Tools     int    `json:"tools"`
	Prompts   int    `json:"prompts"`
	Resources int    `json:"resources"`
	Templates int    `json:"templates"`
	// Cached is true when the counts come from the catalog cache.
	Cached bool `json:"cached"`
	// Hidden are the items its filters leave out; Collided the names it
	// could not take in the aggregated view.
	Hidden       []string `json:"hidden,omitempty"`
	Collided     []string `json:"collided,omitempty"`
	Shortened    []string `json:"shortened,omitempty"`
	Unattributed int      `json:"unattributed"`
	Dropped      int      `json:"dropped_notifications"`
	Subscribed   int      `json:"subscribed"`
	// Refused are the server's requests (sampling, elicitation, roots,
	// ping) refused -32603 at once, or dropped, because
	// upstreams.max_server_requests of them already waited: for one
	// session's client, or on this instance.
	Refused int `json:"refused_requests"`

	// Truncated says which of its lists were cut at their bounds (10,000
	// items, 100 pages), from the catalog.
	Truncated []string `json:"truncated,omitempty"`
	// Changed and New are the tools its pins hold out of every view
	// until approved (pin = true): their definitions changed, or they
	// are new; Quarantined is set while it lists nothing until approved
	// (quarantine = true). docs/views.md, "Pinned definitions".
	Changed     []string `json:"changed_tools,omitempty"`
	New         []string `json:"new_tools,omitempty"`
	Quarantined bool     `json:"quarantined,omitempty"`

	// Sandbox is the sandbox level in force for its process (standard,
	// strict; "off" for an unconfined one; "" for a remote server), from
	// the launcher's report once it started; Unenforced what that level
	// asks for and this kernel did not enforce (docs/security.md,
	// "Sandbox").
	Sandbox    string   `json:"sandbox,omitempty"`
	Unenforced []string `json:"unenforced,omitempty"`
	// CPUMs and RSSBytes are what its running process and the whole tree
	// under it use: CPU time (user and system, reaped children included)
	// in milliseconds, resident memory summed over the tree's processes.
	CPUMs    int64 `json:"cpu_ms,omitempty"`
	RSSBytes int64 `json:"rss_bytes,omitempty"`
}

// Status returns a row per instance, upstreams in name order.
func (m *Manager) Status() []Status {
	now := time.Now()
	m.mu.Lock()
	collided, shortened := m.collided, m.shortened
	clients := make([]*Client, 0, len(m.clients))
	for _, c := range m.clients {
		clients = append(clients, c)
	}
	m.mu.Unlock()
	rows := []Status{}
	for _, u := range m.sorted() {
		cfg := u.conf()
		base := Status{Name: u.name, Share: cfg.Share, Start: cfg.Start, Collided: collided[u.name], Shortened: shortened[u.name]}
		if cfg.Remote != nil {
			base.URL, base.Auth = mcpclient.RedactURL(cfg.Remote.URL), u.authStatus()
		}
		if st := u.pin.Load(); st != nil {
			base.Quarantined = st.quarantined
			for _, n := range slices.Sorted(maps.Keys(st.held)) {
				if st.held[n] == "new" {
					base.New = append(base.New, n)
				} else {
					base.Changed = append(base.Changed, n)
				}
			}
		}
		u.mu.Lock()
		cat, cached := u.catalog, u.cached
		u.mu.Unlock()
		if cat != nil {
			base.Tools, base.Prompts, base.Resources, base.Templates = len(cat.Tools), len(cat.Prompts), len(cat.Resources), len(cat.Templates)
			base.Cached, base.Era, base.Version = cached, cat.Era, cat.Version
			base.Server = serverName(cat)
			base.Hidden = hidden(u, cat)
			base.Truncated = cat.Truncated
		}
		sessions := 0
		for _, c := range clients {
			if c.uses(u.name) {
				sessions++
			}
		}
		n := 0
		u.each(func(in *instance) {
			n++
			row := base
			row.Instance = in.label
			in.mu.Lock()
			s := in.snapshotLocked(now)
			row.State, row.Failures, row.Cause, row.LastExit = s.state, s.failures, s.cause, s.lastExit
			row.Restarts, row.Unattributed, row.Dropped = in.restarts, in.stats.unattributed, in.stats.dropped
			row.ManualRestarts = in.manualRestarts
			row.Subscribed = len(in.subs)
			if s.retryIn > 0 {
				ms := s.retryIn.Milliseconds()
				row.RetryInMs = &ms
			}
			row.Refused = in.stats.refused
			switch {
			case in.conn != nil:
				row.PID, row.Era, row.Version, row.Since = in.conn.PID(), in.conn.Era(), in.conn.Version(), in.readySince
				cs := in.conn.Stats()
				row.Refused += int(cs.RefusedRequests + cs.DroppedRequests)
			case s.state == StateStarting:
				row.PID, row.StartingSince = in.pid, in.lastAttempt
			}
			if cfg.Remote == nil {
				row.Sandbox = string(sandbox.Off)
				if u.sandboxed() {
					row.Sandbox = string(u.sandbox.Level)
				}
				if r := in.sandboxReport; r != nil {
					row.Sandbox = string(r.Level)
					for _, f := range r.Missing() {
						row.Unenforced = append(row.Unenforced, f.String())
					}
				}
			}
			in.mu.Unlock()
			if row.PID > 0 {
				if use, err := proc.TreeUsage(row.PID); err == nil {
					row.CPUMs, row.RSSBytes = use.CPU.Milliseconds(), use.RSSBytes
				}
			}
			row.InFlight, row.Queued = in.gate.load()
			row.Sessions = sessions
			if cfg.Share == "session" {
				row.Sessions = 1
			}
			rows = append(rows, row)
		})
		if n == 0 {
			base.State = StateStopped
			rows = append(rows, base)
		}
	}
	return rows
}

func serverName(cat *catalog) string {
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	if len(cat.ServerInfo) == 0 || json.Unmarshal(cat.ServerInfo, &info) != nil || info.Name == "" {
		return ""
	}
	return info.Name + " " + info.Version
}

// hidden lists the items u's filters leave out.
func hidden(u *upstream, cat *catalog) []string {
	cfg := u.conf()
	var out []string
	for _, def := range cat.Tools {
		if n, ok := itemKey(def, "name"); ok && !cfg.Tools.Allows(n) {
			out = append(out, "tool "+n)
		}
	}
	for _, def := range cat.Prompts {
		if n, ok := itemKey(def, "name"); ok && !cfg.Prompts.Allows(n) {
			out = append(out, "prompt "+n)
		}
	}
	for _, def := range cat.Resources {
		if n, ok := itemKey(def, "uri"); ok && !cfg.Resources.Allows(n) {
			out = append(out, "resource "+n)
		}
	}
	return out
}
