package server

import (
	"context"
)

// Caller is who asks: the session a request comes from, as whoever made
// the session knows it (the daemon from the hand-over of snodod connect or
// the HTTP path, snodod stdio from its arguments). It is set on the
// session's SessionState before the session is served, never changed,
// and handed by the runtime to what a view that relays other servers
// installs: its RawHandlers (RawRequest.Caller), its SubscriptionHook and
// its StartHook (Request.State). The runtime itself never reads it. Its
// identity is the pointer: two sessions never share one, while every 2026
// POST of one HTTP view may (they keep nothing between requests).
type Caller struct {
	// Session is the daemon's session id; 0 for a process's only session.
	Session uint64
	// Cwd is the client's working directory, sent with the hand-over by
	// snodod connect; "" means the daemon's.
	Cwd string
	// View is the view's identity: "" for the aggregated view, "@NAME"
	// for the named view [views.NAME] (docs/views.md), else the upstream
	// passed through (docs/upstreams.md §2).
	View string
	// Kind is how the session came, as snodod status names it: "pipe",
	// "socket", "pty" (the session socket's), "http"; "" when unknown
	// (a process's only session). Traces carry it (docs/observability.md).
	Kind string
	// MayLogIn lets a request of this session that needs a login to a
	// remote server ask its client to open the login's URL (URL-mode
	// elicitation, docs/upstreams.md §9). The daemon sets it for a client
	// of its own uid only, as only such a client may run snodod login;
	// HTTP sessions never have it.
	MayLogIn bool
	// Peer is the client's process as the daemon learnt it, for the audit
	// log (docs/observability.md, "Audit log"); the zero Peer is unknown.
	Peer Peer
}

// Peer is the process at the other end of a session: for a connection
// to the session socket, SO_PEERCRED's uid and pid and the executable of
// /proc/PID/exe, read when the session was made; for an HTTP client on
// loopback or a Unix socket, the uid the listener judged it by.
type Peer struct {
	// Known is true when UID (and PID, when not 0) were learnt.
	Known bool
	UID   int
	PID   int
	// Exe is the executable's path, "" when it could not be read.
	Exe string
}

// SetCaller records who asks on this session's requests. Whoever creates
// the state sets it before the session serves a request; it is not
// changed after.
func (s *SessionState) SetCaller(c *Caller) { s.caller.Store(c) }

// Caller is SetCaller's, or nil.
func (s *SessionState) Caller() *Caller {
	if s == nil {
		return nil
	}
	return s.caller.Load()
}

// SetPeer records the peer of this state's requests when it is not its
// Caller's: the HTTP transport's, whose 2026 POSTs share one Caller
// across connections. Set before the state serves a request.
func (s *SessionState) SetPeer(p Peer) { s.peer.Store(&p) }

// Peer is SetPeer's, else the Caller's, else the zero (unknown) Peer.
func (s *SessionState) Peer() Peer {
	if s == nil {
		return Peer{}
	}
	if p := s.peer.Load(); p != nil {
		return *p
	}
	if c := s.caller.Load(); c != nil {
		return c.Peer
	}
	return Peer{}
}

// StartHook prepares what a request needs before the runtime serves it: a
// view relaying hosted servers starts those that have nothing listed yet
// (docs/upstreams.md §4, lazy start), so that a list or a call never sees
// a server merely not started. The relay installs it (SetStartHook).
type StartHook interface {
	// Ready reports, without blocking, that req needs nothing started:
	// the runtime serves it at once, on the connection's coordinator for
	// the methods of DispatchInline. It is asked of every request and of
	// a legacy initialize (Method "initialize", Params its params), and
	// must be cheap.
	Ready(req *Request) bool
	// Start starts what req needs and waits for it, within ctx: in the
	// request's executor worker for a request, on the coordinator for an
	// initialize (whose answer it may hold back, at most its own bound).
	// A non-nil error is the request's answer instead of the method's: a
	// *protocol.Error as it is, an *InputFirst as that type says, any
	// other -32603. An initialize is answered whatever Start returns.
	Start(ctx context.Context, req *Request) error
}

// InputFirst is what a StartHook's Start returns for a 2026-era request
// whose client must give input before what the request needs can start:
// a person's login to the server it calls, which the server has never
// been listed without (docs/upstreams.md §9). The runtime checks the
// request as it checks any (docs/protocol.md §5.2) and answers
// input_required with Result's inputRequests and its state, signed as a
// relay handler's are (RawResult), so that the retry reaches the item's
// relay handler with that state once Start lets it through. For a legacy
// request, or a method that may not ask for input (§12.1), the answer is
// -32603.
type InputFirst struct{ Result *RawResult }

func (*InputFirst) Error() string { return "the request needs its client's input before it can start" }

// SetStartHook installs h (nil removes it).
func (s *Server) SetStartHook(h StartHook) {
	if h == nil {
		s.start.Store(nil)
		return
	}
	s.start.Store(&h)
}

// startHook is SetStartHook's, or nil; read without Server.mu, on every
// request.
func (s *Server) startHook() StartHook {
	if h := s.start.Load(); h != nil {
		return *h
	}
	return nil
}
