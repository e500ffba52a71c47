package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/limits"
	"github.com/snodod/snodod/protocol"
)

// DefaultMaxSubscriptions caps a connection's subscriptions (docs/transport.md
// §15).
const DefaultMaxSubscriptions = limits.DefaultMaxSubscriptions

// SessionState is one connection's state as the runtime keeps it: the legacy
// session (client capabilities, log threshold, resource subscriptions,
// whether notifications/initialized arrived) and the subscription count that
// listen streams and legacy resource subscriptions share (docs/protocol.md §9.5).
//
// A transport makes one per connection with NewSession and passes it with
// every call. It outlives a transport instance: a restarted session keeps
// it, and with it the log level and resource subscriptions. Its methods may
// be called from any goroutine.
type SessionState struct {
	max int

	mu          sync.Mutex
	legacy      bool   // a legacy initialize succeeded
	negotiated  string // the version the transport recorded
	caps        json.RawMessage
	clientInfo  json.RawMessage // the legacy initialize's clientInfo
	initialized bool
	logRank     int
	uris        map[string]struct{}
	listens     int
	feed        *feed         // session-level notifications, once initialized
	wake        chan struct{} // 1-buffered: feed may have grown, or was replaced
	closed      bool
	clientSlots chan struct{} // places for requests to the client, made on first use
	onChange    func()        // SetOnChange's; called outside mu (handover.go)

	clientIDs atomic.Uint64 // the last "snodod:<n>" id handed out
	// modernInfo is the io.modelcontextprotocol/clientInfo of the
	// connection's last 2026 request that sent one, for status.
	modernInfo atomic.Pointer[json.RawMessage]
	// caller is SetCaller's (caller.go).
	caller atomic.Pointer[Caller]
	// peer is SetPeer's (caller.go).
	peer atomic.Pointer[Peer]
}

// NewSessionState returns the state of a new connection whose subscriptions are
// capped at maxSubscriptions (0 means DefaultMaxSubscriptions).
func NewSessionState(maxSubscriptions int) *SessionState {
	if maxSubscriptions <= 0 {
		maxSubscriptions = DefaultMaxSubscriptions
	}
	info, _ := protocol.LogLevelRank("info")
	return &SessionState{max: maxSubscriptions, logRank: info, wake: make(chan struct{}, 1)}
}

// Negotiated is the legacy version the connection negotiated, "" before
// initialize. A transport records it with SetNegotiated once the initialize
// result is written, so a restarted session keeps it.
func (ss *SessionState) Negotiated() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.negotiated
}

// Legacy reports whether the connection negotiated a legacy version
// (its client's initialize was answered).
func (ss *SessionState) Legacy() bool {
	v := ss.Negotiated()
	return v != "" && v != protocol.Version2026
}

// ClientCapabilities are the capabilities the client declared in its
// legacy initialize, as it sent them; nil before one (a 2026 client
// declares them in each request's _meta).
func (ss *SessionState) ClientCapabilities() json.RawMessage { return ss.clientCaps() }

// ClientInfo is the clientInfo object the client sent, as it sent it: a
// legacy initialize's, else the one of its last 2026 request that had
// one in _meta; nil before either. It is for status: the runtime decides
// nothing by it.
func (ss *SessionState) ClientInfo() json.RawMessage {
	ss.mu.Lock()
	info := ss.clientInfo
	ss.mu.Unlock()
	if info != nil {
		return info
	}
	if p := ss.modernInfo.Load(); p != nil {
		return *p
	}
	return nil
}

// noteModernClient records a 2026 request's clientInfo; it copies only
// when it differs from the one held (a client sends the same each time).
func (ss *SessionState) noteModernClient(info json.RawMessage) {
	if info == nil {
		return
	}
	if p := ss.modernInfo.Load(); p != nil && bytes.Equal(*p, info) {
		return
	}
	held := json.RawMessage(bytes.Clone(info))
	ss.modernInfo.Store(&held)
}

// SetNegotiated records the negotiated legacy version.
func (ss *SessionState) SetNegotiated(version string) {
	ss.mu.Lock()
	ss.negotiated = version
	ss.mu.Unlock()
	ss.changed()
}

// Subscriptions is the number of open listen streams plus subscribed
// legacy resource URIs: what counts against the cap.
func (ss *SessionState) Subscriptions() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.listens + len(ss.uris)
}

// AcquireSubscription takes one subscription slot for a listen stream,
// reporting false at the cap. ReleaseSubscription gives it back.
func (ss *SessionState) AcquireSubscription() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.listens+len(ss.uris) >= ss.max {
		return false
	}
	ss.listens++
	return true
}

// ReleaseSubscription gives back a slot taken by AcquireSubscription.
func (ss *SessionState) ReleaseSubscription() {
	ss.mu.Lock()
	ss.listens--
	ss.mu.Unlock()
}

var errSessionClosed = errors.New("session closed")

// Next blocks until the next session-level notification of a legacy
// session (docs/protocol.md §4.1, §9.7, §9.8): a list change or an update of a
// subscribed resource, delivered only once notifications/initialized has
// arrived. It returns ctx's error when ctx ends, or an error once the
// session is closed. One goroutine at a time may call it.
func (ss *SessionState) Next(ctx context.Context) (Event, error) {
	for {
		ev, ok, wake := ss.Poll()
		if ok {
			return ev, nil
		}
		if wake == nil {
			return Event{}, errSessionClosed
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
}

// Poll returns the next session-level notification when one is waiting
// (the same as Next, without blocking). When none is, it returns the
// channel that signals a possible one (nil once the session is closed):
// call Poll again once it fires. It lets a transport that already selects
// on its own events take these too, without a goroutine per connection,
// and with one channel to watch. One goroutine at a time may call Poll or
// Next.
func (ss *SessionState) Poll() (ev Event, ok bool, wake <-chan struct{}) {
	for {
		ss.mu.Lock()
		f, closed := ss.feed, ss.closed
		ss.mu.Unlock()
		if closed {
			return Event{}, false, nil
		}
		if f == nil {
			return Event{}, false, ss.wake
		}
		c, ok, replaced := f.poll()
		switch {
		case replaced:
			continue // a new legacy session began
		case !ok:
			return Event{}, false, ss.wake
		case c.kind == changeResourceUpdated && !ss.subscribed(c.uri):
			continue
		}
		method, params := legacyEvent(c)
		return Event{Method: method, Params: params}, true, nil
	}
}

// Close ends the session: resource subscriptions are dropped and Next
// returns. Idempotent.
func (ss *SessionState) Close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	ss.replaceFeedLocked(nil)
	ss.uris = nil
}

func (ss *SessionState) subscribed(uri string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	_, ok := ss.uris[uri]
	return ok
}

func (ss *SessionState) replaceFeedLocked(f *feed) {
	if ss.feed != nil {
		ss.feed.close()
	}
	ss.feed = f
	ss.nudge()
}

// nudge says, without blocking, that Poll may have something new.
func (ss *SessionState) nudge() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// startLegacy begins a fresh legacy session after a successful initialize
// (docs/protocol.md §2 step 4).
func (ss *SessionState) startLegacy(caps, clientInfo json.RawMessage) {
	info, _ := protocol.LogLevelRank("info")
	ss.mu.Lock()
	// Copies: caps would otherwise keep the whole initialize line alive
	// for the connection's life.
	ss.legacy, ss.caps, ss.clientInfo, ss.initialized, ss.logRank, ss.uris = true, bytes.Clone(caps), bytes.Clone(clientInfo), false, info, nil
	ss.replaceFeedLocked(nil)
	ss.mu.Unlock()
	ss.changed()
}

// markInitialized starts delivering session-level notifications.
func (ss *SessionState) markInitialized(h *hub, accept func(change) bool) {
	ss.mu.Lock()
	if !ss.legacy || ss.initialized || ss.closed {
		ss.mu.Unlock()
		return
	}
	ss.initialized = true
	ss.replaceFeedLocked(h.subscribe(accept, ss.wake))
	ss.mu.Unlock()
	ss.changed()
}

func (ss *SessionState) clientCaps() json.RawMessage {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.caps
}

func (ss *SessionState) setLogRank(r int) {
	ss.mu.Lock()
	ss.logRank = r
	ss.mu.Unlock()
	ss.changed()
}

func (ss *SessionState) logThreshold() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.logRank
}

// subscribe adds uri to the legacy resource subscriptions; false at the cap
// (a URI already subscribed is a no-op).
func (ss *SessionState) subscribe(uri string) bool {
	ss.mu.Lock()
	if _, ok := ss.uris[uri]; ok {
		ss.mu.Unlock()
		return true
	}
	if ss.listens+len(ss.uris) >= ss.max {
		ss.mu.Unlock()
		return false
	}
	if ss.uris == nil {
		ss.uris = map[string]struct{}{}
	}
	ss.uris[uri] = struct{}{}
	ss.mu.Unlock()
	ss.changed()
	return true
}

func (ss *SessionState) unsubscribe(uri string) {
	ss.mu.Lock()
	_, had := ss.uris[uri]
	delete(ss.uris, uri)
	ss.mu.Unlock()
	if had {
		ss.changed()
	}
}
