package http

import (
	"errors"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snodod/snodod/protocol"
)

// Handler serves one Streamable HTTP endpoint for both eras (docs/protocol.md
// §13): stateless 2026-07-28 POSTs and legacy 2025 sessions. It is an
// http.Handler; its methods may be called concurrently. Serve it from an
// http.Server built by NewServer (or with the same settings: no
// WriteTimeout, no ReadTimeout, which would end streams).
type Handler struct {
	o        Options
	guard    *guard
	versions protocol.Versions
	sessions *sessionTable

	listens  atomic.Int64 // open 2026 listen streams (Options.MaxSubscriptions)
	streams  atomic.Int64 // open SSE responses of every kind
	served   [2]atomic.Uint64
	refused  refusals
	statuses statusCounts
	conns    atomic.Int64 // open connections of NewServer's server

	closeOnce  sync.Once
	closing    chan struct{} // Shutdown began
	retireOnce sync.Once
	retired    atomic.Bool   // Retire was called: every answer closes its connection
	streamsEnd chan struct{} // Retire or Shutdown: listen and session streams end
	graceOnce  sync.Once
	graceEnd   chan struct{} // the grace period ended: what runs is cancelled

	// The requests being served, counted under a mutex rather than a
	// WaitGroup: a request may arrive on a kept-alive connection while
	// Shutdown waits, which a WaitGroup forbids.
	activeMu sync.Mutex
	active   int
	idle     chan struct{} // closed when active drops to 0, while Shutdown waits
}

// New validates o, applies its defaults and returns a Handler.
func New(o Options) (*Handler, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	versions, _ := protocol.ParseVersions(o.Versions)
	h := &Handler{
		o:          o,
		guard:      newGuard(&o),
		versions:   versions,
		closing:    make(chan struct{}),
		streamsEnd: make(chan struct{}),
		graceEnd:   make(chan struct{}),
	}
	h.sessions = newSessionTable(h)
	return h, nil
}

// Path is the endpoint the handler serves (and Path + "/NAME").
func (h *Handler) Path() string { return h.o.Path }

// Stats is a snapshot of the handler's load, for `snodod status`.
type Stats struct {
	// Sessions are the legacy sessions alive; Streams the SSE responses
	// open (listen streams, session streams, streamed calls); Listens the
	// 2026 listen streams among them.
	Sessions, Streams, Listens int
	// Modern and Legacy count the requests admitted in each era.
	Modern, Legacy uint64
	// Refused counts the requests refused before they were served, by
	// reason: "host", "origin", "unauthorized" (no or a wrong token),
	// "view" (a View's Access refused it),
	// "peer" (a local uid not allowed), "sessions" (http.max_sessions),
	// "peer_sessions" (http.max_sessions_per_peer). Only reasons seen
	// are present.
	Refused map[string]uint64
	// Connections are the open connections (of NewServer's server).
	Connections int
	// Statuses counts the responses that ended, by HTTP status; only
	// statuses seen are present.
	Statuses map[int]uint64
}

// Stats returns the handler's current load.
func (h *Handler) Stats() Stats {
	return Stats{
		Sessions:    h.sessions.count(),
		Streams:     int(h.streams.Load()),
		Listens:     int(h.listens.Load()),
		Modern:      h.served[0].Load(),
		Legacy:      h.served[1].Load(),
		Refused:     h.refused.snapshot(),
		Connections: int(h.conns.Load()),
		Statuses:    h.statuses.snapshot(),
	}
}

var (
	errClosed           = protocol.ErrSessionClosed
	errContentType      = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Content-Type must be application/json"}
	errMissingSession   = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Missing Mcp-Session-Id header"}
	errSessionNotFound  = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Session not found"}
	errSessionVersion   = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "MCP-Protocol-Version header does not match the session"}
	errListenAccept     = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "subscriptions/listen requires Accept: text/event-stream"}
	errStreamAccept     = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "A session stream requires Accept: text/event-stream"}
	errStreamOpen       = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "The session already has an open stream"}
	errMethodNotAllowed = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Method not allowed: use POST (and GET or DELETE with an Mcp-Session-Id)"}
)

func bodyLimitError(limit int) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Message exceeds the " + strconv.Itoa(limit) + "-byte body limit"}
}

func readTimeoutError(d time.Duration) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Request body not received within the " + d.String() + " read timeout"}
}

func shortBodyError(got int, want int64) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest,
		Message: "Request body ended after " + strconv.Itoa(got) + " of its " + strconv.FormatInt(want, 10) + " bytes (Content-Length)"}
}

func viewNotFound(path string) *protocol.Error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "No MCP endpoint at " + path}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	sw := &statusWriter{ResponseWriter: w}
	defer func() { h.statuses.add(sw.status) }()
	w = sw
	h.enter()
	defer h.leave()
	timeout := h.o.WriteTimeout
	if h.retired.Load() {
		// The answer is this connection's last: net/http closes it once
		// the answer is written, and the client's next request opens a
		// connection to the process that took the listener over.
		w.Header().Set("Connection", "close")
	}
	peer := func() Peer { return h.peer(r) }
	var ref *refusal
	if access := h.access(r.URL.Path); access != nil {
		ref = h.guard.checkView(r, peer, access)
	} else {
		ref = h.guard.check(r, peer)
	}
	if ref != nil {
		h.refused.add(ref.reason)
		if ref.challenge != "" {
			w.Header().Set("WWW-Authenticate", ref.challenge)
		}
		refuse(w, ref.status, protocol.ID{}, ref.err, timeout)
		return
	}
	v, _, ok := h.route(r.URL.Path)
	if !ok {
		refuse(w, nethttp.StatusNotFound, protocol.ID{}, h.notFound(r.URL.Path), timeout)
		return
	}
	select {
	case <-h.closing:
		w.Header().Set("Connection", "close")
		refuse(w, nethttp.StatusServiceUnavailable, protocol.ID{}, errClosed, timeout)
		return
	default:
	}
	switch r.Method {
	case nethttp.MethodPost:
		h.post(w, r, v)
	case nethttp.MethodGet:
		h.get(w, r)
	case nethttp.MethodDelete:
		h.delete(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		refuse(w, nethttp.StatusMethodNotAllowed, protocol.ID{}, errMethodNotAllowed, timeout)
	}
}

func (h *Handler) enter() {
	h.activeMu.Lock()
	h.active++
	h.activeMu.Unlock()
}

func (h *Handler) leave() {
	h.activeMu.Lock()
	h.active--
	if h.active == 0 && h.idle != nil {
		select {
		case <-h.idle:
		default:
			close(h.idle)
		}
	}
	h.activeMu.Unlock()
}

// route finds the view a path names: the endpoint itself (name ""), or
// one view below it.
func (h *Handler) route(path string) (v View, name string, ok bool) {
	if path == h.o.Path || path == h.o.Path+"/" {
		if h.o.Views != nil {
			if v, ok := h.o.Views.View(""); ok {
				return v, "", true
			}
		}
		return View{Dispatcher: h.o.Dispatcher}, "", h.o.Dispatcher != nil
	}
	name, ok = strings.CutPrefix(path, h.o.Path+"/")
	if !ok || name == "" || strings.Contains(name, "/") || h.o.Views == nil {
		return View{}, "", false
	}
	v, ok = h.o.Views.View(name)
	return v, name, ok && v.Dispatcher != nil
}

// notFound is the answer to a path that names no view: what Views says
// of the name (ViewMissing), else "No MCP endpoint at PATH".
func (h *Handler) notFound(path string) *protocol.Error {
	if vm, ok := h.o.Views.(ViewMissing); ok {
		if name, cut := strings.CutPrefix(path, h.o.Path+"/"); cut && name != "" && !strings.Contains(name, "/") {
			if why := vm.Missing(name); why != "" {
				return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "No MCP endpoint at " + path + ": " + why}
			}
		}
	}
	return viewNotFound(path)
}

// access is the access rule of the view path names, when Views gives it
// one (ViewAccess); nil for the handler's own.
func (h *Handler) access(path string) func(Peer, string) *protocol.Error {
	va, ok := h.o.Views.(ViewAccess)
	if !ok {
		return nil
	}
	name, ok := strings.CutPrefix(path, h.o.Path+"/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return nil
	}
	return va.Access(name)
}

// viewName is the name of the view r's path names ("" the endpoint);
// ServeHTTP has routed it already.
func (h *Handler) viewName(r *nethttp.Request) string {
	_, name, _ := h.route(r.URL.Path)
	return name
}

// post reads and classifies a POST (docs/protocol.md §13.1, §13.2).
func (h *Handler) post(w nethttp.ResponseWriter, r *nethttp.Request, v View) {
	timeout := h.o.WriteTimeout
	if !jsonContent(r) {
		refuse(w, nethttp.StatusUnsupportedMediaType, protocol.ID{}, errContentType, timeout)
		return
	}
	body, status, perr := h.readBody(w, r)
	if perr != nil {
		if status != nethttp.StatusOK {
			w.Header().Set("Connection", "close") // the rest of the body is never read, or never comes
		}
		refuse(w, status, protocol.ID{}, perr, timeout)
		return
	}
	if body == nil {
		return // the client went away
	}
	msg := protocol.Decode(body)
	switch msg.Kind {
	case protocol.KindBlank:
		refuse(w, nethttp.StatusBadRequest, protocol.ID{}, protocol.ErrParse, timeout)
	case protocol.KindInvalid:
		refuse(w, nethttp.StatusBadRequest, msg.ID, msg.Err, timeout)
	case protocol.KindResponse:
		h.response(w, r, &msg)
	case protocol.KindNotification:
		h.notification(w, r, &msg)
	case protocol.KindRequest:
		h.request(w, r, &msg, v)
	}
}

// readBody reads at most MaxBodyBytes, refusing a longer body as soon as
// its first extra byte arrives (or at once, from Content-Length), and a
// body that is not complete within ReadTimeout. body is nil, with a nil
// error, when the client went away.
func (h *Handler) readBody(w nethttp.ResponseWriter, r *nethttp.Request) ([]byte, int, *protocol.Error) {
	limit := h.o.MaxBodyBytes
	if r.ContentLength > int64(limit) {
		return nil, nethttp.StatusRequestEntityTooLarge, bodyLimitError(limit)
	}
	rc := nethttp.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(h.o.ReadTimeout))
	size := 512
	if r.ContentLength > 0 {
		size = int(r.ContentLength) + 1
	}
	buf := make([]byte, 0, size)
	body, err := readAtMost(buf, r.Body, limit+1)
	// Clear the deadline: once the body is read the connection's reads
	// only watch for the client going away, which may be hours later.
	_ = rc.SetReadDeadline(time.Time{})
	switch {
	case len(body) > limit:
		return nil, nethttp.StatusRequestEntityTooLarge, bodyLimitError(limit)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, nethttp.StatusRequestTimeout, readTimeoutError(h.o.ReadTimeout)
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The client half-closed (or the proxy ended the body) before
		// Content-Length bytes came: the body is cut, and the client may
		// still read an answer.
		return nil, nethttp.StatusBadRequest, shortBodyError(len(body), r.ContentLength)
	case err != nil:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, nethttp.StatusRequestTimeout, readTimeoutError(h.o.ReadTimeout)
		}
		return nil, 0, nil // the client is gone: nothing can be answered
	}
	return body, 0, nil
}

// readAtMost appends r's bytes to buf until EOF or n bytes.
func readAtMost(buf []byte, r io.Reader, n int) ([]byte, error) {
	for len(buf) < n {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		end := min(cap(buf), n)
		m, err := r.Read(buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// request routes a request by the ladder of docs/protocol.md §13.2.
func (h *Handler) request(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message, v View) {
	switch {
	case msg.Modern:
		h.modern(w, r, msg, v)
	case msg.Method == "initialize":
		h.initialize(w, r, msg, v)
	case r.Header.Get(headerSessionID) != "":
		h.legacy(w, r, msg)
	case h.modernByHeader(r):
		h.modern(w, r, msg, v)
	default:
		refuse(w, nethttp.StatusBadRequest, msg.ID, errMissingSession, h.o.WriteTimeout)
	}
}

// modernByHeader is steps 4 and 5 of the ladder: a request without 2026
// metadata and without a session is taken by the 2026 rules when it names
// a version that is not an enabled legacy one, or when no legacy version
// is enabled.
func (h *Handler) modernByHeader(r *nethttp.Request) bool {
	if len(h.versions.Legacy()) == 0 {
		return true
	}
	v := r.Header.Get(headerProtocolVersion)
	return v != "" && !(h.versions.Enabled(v) && v != protocol.Version2026)
}

// modernHeader reports whether MCP-Protocol-Version names a version that
// is not an enabled legacy one.
func (h *Handler) modernHeader(r *nethttp.Request) bool {
	v := r.Header.Get(headerProtocolVersion)
	return v != "" && !olderVersions[v] && !(h.versions.Enabled(v) && v != protocol.Version2026)
}

// notification handles a notification POST: 202 and no body, always
// once routed (docs/transport.md §8). A legacy one reaches its session:
// cancellation, notifications/initialized.
func (h *Handler) notification(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message) {
	rsp := newResponder(w, h.o.WriteTimeout)
	// A 2026 notification has no effect over HTTP, whatever session id a
	// client still sends with it (§13.3); nor has one without a session,
	// which is never refused: the Go SDK's 2026 client sends its
	// cancellations bare, and takes any 4xx as the end of its connection
	// (docs/protocol.md §13.2 step 5 would answer 400).
	if msg.Modern || h.modernHeader(r) || r.Header.Get(headerSessionID) == "" {
		rsp.empty(nethttp.StatusAccepted)
		return
	}
	s, status, err := h.sessions.find(r)
	if err != nil {
		refuse(w, status, protocol.ID{}, err, h.o.WriteTimeout)
		return
	}
	s.notify(msg)
	rsp.empty(nethttp.StatusAccepted)
}

// response handles a client's response POST: 202; in a legacy session it
// may answer a request snodod sent (docs/protocol.md §3.1).
func (h *Handler) response(w nethttp.ResponseWriter, r *nethttp.Request, msg *protocol.Message) {
	if r.Header.Get(headerSessionID) != "" {
		s, status, err := h.sessions.find(r)
		if err != nil {
			refuse(w, status, protocol.ID{}, err, h.o.WriteTimeout)
			return
		}
		s.clientResponse(msg)
	}
	newResponder(w, h.o.WriteTimeout).empty(nethttp.StatusAccepted)
}

// sessionFor finds the session a GET or DELETE names, or refuses it:
// without a session id, 405 (there is no 2026 GET or DELETE).
func (h *Handler) sessionFor(w nethttp.ResponseWriter, r *nethttp.Request) (*session, bool) {
	if r.Header.Get(headerSessionID) == "" {
		w.Header().Set("Allow", "POST")
		refuse(w, nethttp.StatusMethodNotAllowed, protocol.ID{}, errMethodNotAllowed, h.o.WriteTimeout)
		return nil, false
	}
	s, status, err := h.sessions.find(r)
	if err != nil {
		refuse(w, status, protocol.ID{}, err, h.o.WriteTimeout)
		return nil, false
	}
	return s, true
}

// get opens a legacy session's stream.
func (h *Handler) get(w nethttp.ResponseWriter, r *nethttp.Request) {
	s, ok := h.sessionFor(w, r)
	if !ok {
		return
	}
	if !accepts(r, "text/event-stream") {
		refuse(w, nethttp.StatusNotAcceptable, protocol.ID{}, errStreamAccept, h.o.WriteTimeout)
		return
	}
	s.stream(r.Context(), newResponder(w, h.o.WriteTimeout))
}

// delete ends a legacy session (204).
func (h *Handler) delete(w nethttp.ResponseWriter, r *nethttp.Request) {
	s, ok := h.sessionFor(w, r)
	if !ok {
		return
	}
	s.end()
	newResponder(w, h.o.WriteTimeout).empty(nethttp.StatusNoContent)
}
