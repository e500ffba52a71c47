package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/snodod/snodod/protocol"
)

// This file lets a connection's runtime state cross a daemon restart
// (docs/transport.md §12.4, docs/operations.md): an upgrade hands it to the
// new process, and a record of it survives a crash. What crosses is plain
// data, in JSON, so that two builds of snodod can exchange it: the legacy
// session (negotiated version, client capabilities and info, log level,
// resource subscriptions, whether notifications/initialized arrived), the
// last id of the requests sent to the client, and each open listen stream.

// SessionSnapshot is a SessionState as plain data. The zero value is a
// connection that has not initialized.
type SessionSnapshot struct {
	// Negotiated is the legacy version the transport recorded.
	Negotiated string `json:"negotiated,omitempty"`
	// Legacy is set once a legacy initialize succeeded; Capabilities and
	// ClientInfo are what it sent.
	Legacy       bool            `json:"legacy,omitempty"`
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	ClientInfo   json.RawMessage `json:"clientInfo,omitempty"`
	// Initialized is set once notifications/initialized arrived: the
	// session then receives list changes and resource updates.
	Initialized bool `json:"initialized,omitempty"`
	// LogLevel is the threshold set with logging/setLevel ("info" by
	// default).
	LogLevel string `json:"logLevel,omitempty"`
	// Subscriptions are the resource URIs subscribed with
	// resources/subscribe, sorted.
	Subscriptions []string `json:"subscriptions,omitempty"`
	// ClientRequests is the number of the last "snodod:<n>" id sent to the
	// client, so that a successor never repeats one.
	ClientRequests uint64 `json:"clientRequests,omitempty"`
}

// Snapshot returns the state as plain data. It may be called from any
// goroutine; the result is a copy.
func (ss *SessionState) Snapshot() SessionSnapshot {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	snap := SessionSnapshot{
		Negotiated:     ss.negotiated,
		Legacy:         ss.legacy,
		Capabilities:   bytes.Clone(ss.caps),
		ClientInfo:     bytes.Clone(ss.clientInfo),
		Initialized:    ss.initialized,
		ClientRequests: ss.clientIDs.Load(),
	}
	snap.LogLevel, _ = protocol.LogLevelName(ss.logRank)
	if len(ss.uris) > 0 {
		snap.Subscriptions = slices.Sorted(maps.Keys(ss.uris))
	}
	return snap
}

// Restore makes a new state continue snap: it must be called before the
// state is used, on a state from NewSessionState. An initialized legacy
// session is marked initialized through d (d.Notify with
// notifications/initialized), so that it receives d's list changes and
// resource updates from now on. Resource subscriptions are restored
// whatever the cap now is (they were admitted under the one in force);
// only new ones are refused beyond it; a Resumer d is told of them, as of a
// resources/subscribe. A snapshot that names an unknown log level is
// refused, and the state is left as it was.
func (ss *SessionState) Restore(snap SessionSnapshot, d Dispatcher) error {
	rank, _ := protocol.LogLevelRank("info")
	if snap.LogLevel != "" {
		var ok bool
		if rank, ok = protocol.LogLevelRank(snap.LogLevel); !ok {
			return fmt.Errorf("restore a session: unknown log level %q", snap.LogLevel)
		}
	}
	ss.mu.Lock()
	ss.negotiated, ss.legacy = snap.Negotiated, snap.Legacy
	ss.caps, ss.clientInfo = bytes.Clone(snap.Capabilities), bytes.Clone(snap.ClientInfo)
	ss.logRank = rank
	ss.uris = nil
	for _, u := range snap.Subscriptions {
		if ss.uris == nil {
			ss.uris = make(map[string]struct{}, len(snap.Subscriptions))
		}
		ss.uris[u] = struct{}{}
	}
	ss.clientIDs.Store(snap.ClientRequests)
	ss.mu.Unlock()
	if snap.Legacy && snap.Initialized && d != nil {
		d.Notify(ss, "notifications/initialized", nil)
	}
	if r, ok := d.(Resumer); ok && len(snap.Subscriptions) > 0 {
		r.ResumeSubscriptions(ss, snap.Subscriptions)
	}
	ss.changed()
	return nil
}

// SetOnChange has fn called after every change of what Snapshot returns
// (an initialize, notifications/initialized, a log level, a resource
// subscription, the negotiated version), so that a record of the state can
// be kept current. fn is called on the goroutine that made the change
// (the transport's, or an executor worker's), never with the state's lock
// held; it must be quick and must not block. Set it before the state is
// used.
func (ss *SessionState) SetOnChange(fn func()) {
	ss.mu.Lock()
	ss.onChange = fn
	ss.mu.Unlock()
}

func (ss *SessionState) changed() {
	ss.mu.Lock()
	fn := ss.onChange
	ss.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// ListenRecord is an open subscriptions/listen stream as plain data: its
// request id (which is also its subscription id, docs/protocol.md §9.2), the
// version it was served under, and the filter it acknowledged.
type ListenRecord struct {
	ID        json.RawMessage `json:"id"`
	Version   string          `json:"version"`
	Tools     bool            `json:"tools,omitempty"`
	Prompts   bool            `json:"prompts,omitempty"`
	Resources bool            `json:"resources,omitempty"`
	// HasURIs says the filter kept resourceSubscriptions (URIs may then
	// be empty: it was acknowledged as an empty list).
	HasURIs bool     `json:"hasUris,omitempty"`
	URIs    []string `json:"uris,omitempty"`
}

// ListenRecordOf returns the record of a stream that Dispatch returned for
// subscriptions/listen; false for a stream of another kind.
func ListenRecordOf(s Stream) (ListenRecord, bool) {
	if h, ok := s.(*hookedStream); ok {
		s = h.Stream
	}
	ls, ok := s.(*listenStream)
	if !ok {
		return ListenRecord{}, false
	}
	return ListenRecord{
		ID: ls.id.AppendJSON(nil), Version: ls.version,
		Tools: ls.filter.tools, Prompts: ls.filter.prompts, Resources: ls.filter.resources,
		HasURIs: ls.filter.uris != nil, URIs: slices.Clone(ls.filter.uris),
	}, true
}

// Resumer is a Dispatcher that can continue, for a connection handed over
// by another process, what the connection had open (a *Server is one).
type Resumer interface {
	// ResumeListen reopens a listen stream of the session of sess (see
	// Server.ResumeListen).
	ResumeListen(sess *SessionState, rec ListenRecord) (Stream, error)
	// ResumeSubscriptions is told of the legacy resource subscriptions a
	// restored SessionState has, as a resources/subscribe of each would
	// have told the SubscriptionHook.
	ResumeSubscriptions(sess *SessionState, uris []string)
}

var _ Resumer = (*Server)(nil)

// ResumeSubscriptions tells the SubscriptionHook, if any, of each URI.
func (s *Server) ResumeSubscriptions(sess *SessionState, uris []string) {
	if hook := s.subscriptionHook(); hook != nil {
		for _, u := range uris {
			hook.Subscribe(sess, u)
		}
	}
}

// errListenRecordID refuses a record whose id is not a request id.
var errListenRecordID = errors.New("listen record: the id is not a JSON-RPC request id")

// ResumeListen opens, for a restored connection, the listen stream rec
// describes: it delivers the catalog changes its filter accepts from now
// on. The acknowledgement was written by the process that opened it, so
// the transport must not write Ack again; the subscription slot is the
// transport's to take, as for any stream. sess is the session's state,
// for the SubscriptionHook.
func (s *Server) ResumeListen(sess *SessionState, rec ListenRecord) (Stream, error) {
	id, ok := protocol.ParseID(rec.ID)
	if !ok {
		return nil, errListenRecordID
	}
	if !s.versions.Enabled(rec.Version) {
		return nil, fmt.Errorf("listen record: version %q is not served", rec.Version)
	}
	filter := listenFilter{tools: rec.Tools, prompts: rec.Prompts, resources: rec.Resources}
	if rec.HasURIs {
		filter.uris = append([]string{}, rec.URIs...)
	}
	ls := newListenStream(s.hub, id, filter, s.serverInfo(rec.Version))
	ls.version = rec.Version
	return s.hookStream(sess, ls), nil
}
