package http

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	nethttp "net/http"
	"strconv"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
	"github.com/snodod/snodod/transport/internal/cancelled"
)

// Legacy sessions (docs/protocol.md §13.4). A session is a connection in the
// sense of docs/transport.md: its own recorded version, in-flight ids, log
// level, resource subscriptions and subscription cap (a server.SessionState),
// and its own executor connection. Its requests arrive as separate POSTs,
// possibly at once on several connections; its state is guarded by mu.

// sessionTable holds the live sessions, at most Options.MaxSessions, and
// at most Options.MaxSessionsPerPeer of one peer.
type sessionTable struct {
	h      *Handler
	mu     sync.Mutex
	byID   map[string]*session
	byPeer map[string]int
}

func newSessionTable(h *Handler) *sessionTable {
	return &sessionTable{h: h, byID: map[string]*session{}, byPeer: map[string]int{}}
}

func (t *sessionTable) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

func sessionCapacityError(limit int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInternalError,
		Message: "Server session capacity exhausted (http.max_sessions = " + strconv.Itoa(limit) + ")"}
}

func peerCapacityError(limit int, peer string) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInternalError,
		Message: "Server session capacity exhausted (http.max_sessions_per_peer = " + strconv.Itoa(limit) + ", held by " + peer + ")"}
}

// full returns the refusal of a new session of peer, nil when there is
// room.
func (t *sessionTable) full(peer string) *refusal {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.fullLocked(peer)
}

func (t *sessionTable) fullLocked(peer string) *refusal {
	o := &t.h.o
	switch {
	case len(t.byID) >= o.MaxSessions:
		return &refusal{status: nethttp.StatusServiceUnavailable, err: sessionCapacityError(o.MaxSessions), reason: "sessions"}
	case t.byPeer[peer] >= o.MaxSessionsPerPeer:
		return &refusal{status: nethttp.StatusServiceUnavailable, err: peerCapacityError(o.MaxSessionsPerPeer, peer), reason: "peer_sessions"}
	}
	return nil
}

// create registers a new session of peer served on view, or returns the
// refusal at a cap (the caller then releases what it opened). release runs
// once the session has ended.
func (t *sessionTable) create(state *server.SessionState, version string, disp server.Dispatcher, release func(), view, peer string) (*session, *refusal) {
	h := t.h
	s := &session{
		t:        t,
		id:       newSessionID(h.o.NodeID),
		view:     view,
		peer:     peer,
		state:    state,
		version:  version,
		header:   nethttp.Header{server.HeaderProtocolVersion: {version}},
		disp:     disp,
		close:    release,
		exec:     h.o.Executor.Conn(),
		ended:    make(chan struct{}),
		inflight: map[protocol.ID]*exchange{},
	}
	t.mu.Lock()
	if ref := t.fullLocked(peer); ref != nil { // initialize checked; another took the place meanwhile
		t.mu.Unlock()
		return nil, ref
	}
	t.byID[s.id] = s
	t.byPeer[peer]++
	t.mu.Unlock()
	s.mu.Lock()
	s.armIdleLocked()
	s.mu.Unlock()
	return s, nil
}

// find returns the session a request names, or the status and error that
// refuse it: 404 for an unknown or ended session, or one opened on another
// path (the client initializes again; a session minted by another node is
// unknown here too), 400 for a
// version header that is not the session's. A header naming an MCP
// version older than every one snodod speaks (2025-03-26, 2024-11-05) is
// tolerated: the TypeScript SDK's transports send 2025-03-26 in some
// requests of a 2025-11-25 session, and the conformance suite's
// server-sse-multiple-streams does; docs/protocol.md §13.4 would
// refuse it.
func (t *sessionTable) find(r *nethttp.Request) (*session, int, *protocol.Error) {
	t.mu.Lock()
	s := t.byID[r.Header.Get(headerSessionID)]
	t.mu.Unlock()
	// A session belongs to the view it was opened on: elsewhere its id
	// names no session (the client initializes again where it is).
	if s == nil || s.view != t.h.viewName(r) {
		return nil, nethttp.StatusNotFound, errSessionNotFound
	}
	if v := r.Header.Get(headerProtocolVersion); v != "" && v != s.version && !olderVersions[v] {
		return nil, nethttp.StatusBadRequest, errSessionVersion
	}
	return s, 0, nil
}

// olderVersions are the MCP versions before snodod's oldest.
var olderVersions = map[string]bool{"2025-03-26": true, "2024-11-05": true}

func (t *sessionTable) remove(s *session) {
	t.mu.Lock()
	if t.byID[s.id] == s {
		delete(t.byID, s.id)
		if t.byPeer[s.peer]--; t.byPeer[s.peer] <= 0 {
			delete(t.byPeer, s.peer)
		}
	}
	t.mu.Unlock()
}

// closeAll ends every session (Shutdown).
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	all := make([]*session, 0, len(t.byID))
	for _, s := range t.byID {
		all = append(all, s)
	}
	t.mu.Unlock()
	for _, s := range all {
		s.end()
	}
}

// newSessionID returns 32 lowercase hex characters from 128 random bits,
// after "NODE." when the handler has a node tag.
func newSessionID(node string) string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24+)
	id := hex.EncodeToString(b[:])
	if node != "" {
		return node + "." + id
	}
	return id
}

// session is one legacy session.
type session struct {
	t       *sessionTable
	id      string
	view    string // the view it was opened on: "" the endpoint, else NAME of Path/NAME
	peer    string // who opened it, as Handler.peerKey names it
	state   *server.SessionState
	version string
	header  nethttp.Header // Mcp-Protocol-Version: version; read-only
	disp    server.Dispatcher
	close   func() // what View.Open returned as release; run once by end
	exec    *executor.Conn
	ended   chan struct{} // closed by end

	mu        sync.Mutex
	inflight  map[protocol.ID]*exchange
	pending   map[protocol.ID]chan clientReply // requests to the client, by id
	streaming bool                             // the GET stream is open
	closed    bool
	idle      *time.Timer
}

// armIdleLocked (re)starts the idle timer when nothing keeps the session
// alive: idleness counts from the last request's end or stream's close.
func (s *session) armIdleLocked() {
	if s.closed || s.streaming || len(s.inflight) > 0 {
		if s.idle != nil {
			s.idle.Stop()
		}
		return
	}
	if s.idle == nil {
		s.idle = time.AfterFunc(s.t.h.o.SessionIdleTimeout, s.expire)
		return
	}
	s.idle.Reset(s.t.h.o.SessionIdleTimeout)
}

func (s *session) expire() {
	s.mu.Lock()
	busy := s.closed || s.streaming || len(s.inflight) > 0
	s.mu.Unlock()
	if !busy {
		s.t.h.o.Logger.Info("HTTP session ended: idle", "session", s.id, "idle_timeout", s.t.h.o.SessionIdleTimeout)
		s.end()
	}
}

// end ends the session (DELETE, idle expiry, Shutdown): its requests are
// cancelled, its subscriptions dropped, its stream closed; its id is then
// unknown. Idempotent.
func (s *session) end() {
	s.t.remove(s)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.inflight = nil
	if s.idle != nil {
		s.idle.Stop()
	}
	s.mu.Unlock()
	s.exec.CancelAll()
	s.state.Close()
	s.close()
	close(s.ended)
}

// admit enters x in flight; false for an id already in flight (or an
// ended session).
func (s *session) admit(x *exchange) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.inflight[x.id] != nil {
		return false
	}
	s.inflight[x.id] = x
	s.armIdleLocked()
	return true
}

// release takes x out of flight once its outcome arrived (or it was
// withdrawn). It never blocks: the executor's worker calls it.
func (s *session) release(x *exchange) {
	s.mu.Lock()
	if s.inflight[x.id] == x {
		delete(s.inflight, x.id)
	}
	s.armIdleLocked()
	s.mu.Unlock()
}

// serve serves one request of the session.
func (s *session) serve(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message) {
	h := s.t.h
	timeout := h.o.WriteTimeout
	x := newExchange(msg)
	x.req.Header, x.req.State = s.header, s.state
	x.cancelled = make(chan struct{})
	if !s.admit(x) {
		refuse(w, nethttp.StatusBadRequest, msg.ID, protocol.ErrDuplicateID, timeout)
		return
	}
	// With SSE accepted, any request of a session may become a stream:
	// the response is committed as SSE only when a first event (progress,
	// a log message, a request to the client) or a keep-alive is due, and
	// is plain JSON otherwise (docs/protocol.md §13.1).
	stream := accepts(r, "text/event-stream")
	ctx := x.context(msg.ProgressToken, stream)
	if stream {
		ctx = server.WithClientRequester(ctx, &clientRequester{s: s, x: x})
	}
	run := func(ctx context.Context) server.Outcome { return s.disp.Dispatch(ctx, &x.req) }
	done := func(o server.Outcome) {
		// The id is free before the answer is written, so a client may
		// reuse it as soon as it has read the answer.
		s.release(x)
		x.deliver(o)
	}
	if err := s.exec.Submit(ctx, msg.ID, run, done); err != nil {
		s.release(x)
		refuse(w, nethttp.StatusOK, msg.ID, err, timeout)
		return
	}
	h.served[1].Add(1)
	rsp := newResponder(w, timeout)
	if stream {
		h.streams.Add(1)
		defer h.streams.Add(-1)
	}
	o, end := h.await(r.Context(), x, rsp, stream, s.ended)
	switch end {
	case endClient:
		// A dropped stream is not a cancellation: the request runs on and
		// its response is discarded (§13.4).
		return
	case endCancelled:
		// Nothing is ever written for a cancelled request (docs/transport.md §9).
		rsp.empty(nethttp.StatusNoContent)
		return
	case endGrace, endSession:
		s.exec.Cancel(msg.ID)
		s.release(x)
		rsp.json(nethttp.StatusOK, protocol.AppendError(nil, msg.ID, errClosed))
		return
	}
	h.final(rsp, msg.ID, o, legacyStatus)
}

// notify handles a notification of the session: a cancellation (valid by
// docs/transport.md §9) withdraws its request; anything else goes to the
// runtime (notifications/initialized).
func (s *session) notify(msg *protocol.Message) {
	s.mu.Lock()
	s.armIdleLocked()
	s.mu.Unlock()
	if msg.Method != "notifications/cancelled" {
		s.disp.Notify(s.state, msg.Method, msg.Params)
		return
	}
	id, _, ok := cancelled.Parse(&msg.Split)
	if !ok {
		return
	}
	s.mu.Lock()
	x := s.inflight[id]
	if x != nil {
		delete(s.inflight, id)
		s.armIdleLocked()
	}
	s.mu.Unlock()
	if x == nil {
		return
	}
	s.exec.Cancel(id)
	close(x.cancelled)
}

// stream serves the session's GET stream; one at a time (a second is 409).
func (s *session) stream(ctx context.Context, rsp *responder) {
	s.mu.Lock()
	if s.streaming || s.closed {
		s.mu.Unlock()
		rsp.json(nethttp.StatusConflict, protocol.AppendError(nil, protocol.ID{}, errStreamOpen))
		return
	}
	s.streaming = true
	s.armIdleLocked()
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.streaming = false
		s.armIdleLocked()
		s.mu.Unlock()
	}()
	s.t.h.sessionStream(ctx, rsp, s)
}

// initialize answers a legacy initialize and creates its session
// (docs/protocol.md §13.4). A stale Mcp-Session-Id on it is ignored: clients
// keep the header across restarts.
func (h *Handler) initialize(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message, v View) {
	disp := v.Dispatcher
	timeout := h.o.WriteTimeout
	peer := h.peerKey(r)
	if ref := h.sessions.full(peer); ref != nil {
		h.refused.add(ref.reason)
		refuse(w, ref.status, msg.ID, ref.err, timeout)
		return
	}
	release := func() {}
	var caller *server.Caller
	if v.Open != nil {
		caller, release = v.Open()
	}
	state := server.NewSessionState(h.o.SessionMaxSubscriptions)
	state.SetCaller(caller)
	if p := h.peer(r); p.known() {
		state.SetPeer(server.Peer{Known: true, UID: p.UID}) // the audit log's
	}
	result, version, perr := disp.Initialize(state, msg.Params)
	if perr != nil {
		release()
		state.Close()
		status := nethttp.StatusOK
		if perr.Code == protocol.CodeInvalidRequest {
			status = nethttp.StatusBadRequest // no legacy version is enabled
		}
		refuse(w, status, msg.ID, perr, timeout)
		return
	}
	frame, err := protocol.AppendResult(nil, msg.ID, result)
	if err != nil {
		release()
		state.Close()
		refuse(w, nethttp.StatusOK, msg.ID, protocol.ErrInvalidResult, timeout)
		return
	}
	state.SetNegotiated(version)
	s, ref := h.sessions.create(state, version, disp, release, h.viewName(r), peer)
	if ref != nil {
		release()
		state.Close()
		h.refused.add(ref.reason)
		refuse(w, ref.status, msg.ID, ref.err, timeout)
		return
	}
	h.served[1].Add(1)
	w.Header().Set(headerSessionID, s.id)
	newResponder(w, timeout).json(nethttp.StatusOK, frame)
}

// legacy serves a request that names a session.
func (h *Handler) legacy(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message) {
	s, status, err := h.sessions.find(r)
	if err != nil {
		refuse(w, status, msg.ID, err, h.o.WriteTimeout)
		return
	}
	s.serve(w, r, msg)
}
