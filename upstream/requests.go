package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// connect starts the instance's Conn: its transport (remote.go: a
// remote server's connection, or the command with the upstream's shared
// stderr ring and the daemon's group record), and the Conn's
// options: snodod's clientInfo, the capabilities it can honour (roots
// only when it has an answer; sampling and elicitation, relayed to an
// attributed session, docs/upstreams.md §5), the era the cache knows, and
// upstreams.max_server_requests. spawned gets the child's pid as soon as
// it runs (a start under way shows it in status).
func (in *instance) connect(ctx context.Context, spawned func(pid int)) (*mcpclient.Conn, error) {
	cfg := in.u.conf()
	caps := map[string]any{
		"sampling":    map[string]any{},
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
	}
	if len(in.roots) > 0 {
		caps["roots"] = map[string]any{}
	}
	rawCaps, _ := json.Marshal(caps)
	known := ""
	if cat := in.u.currentCatalog(); cat != nil && cfg.Protocol == "auto" {
		known = cat.Era
	}
	t, err := in.transport(spawned)
	if err != nil {
		return nil, err
	}
	o := in.options()
	o.Protocol, o.KnownEra, o.ClientCapabilities = cfg.Protocol, known, rawCaps
	return mcpclient.Connect(ctx, t, o)
}

// options are the Conn options of in that do not depend on the handshake
// (an adopted Conn has done its own: instance_handover.go).
func (in *instance) options() mcpclient.Options {
	return mcpclient.Options{
		Name: in.u.name, MaxLineBytes: in.u.m.opts.MaxLineBytes,
		ClientInfo:        protocol.Implementation{Name: "snodod", Version: in.u.m.opts.Version},
		Logger:            in.u.m.log,
		Handler:           in,
		MaxServerRequests: in.u.m.maxServerRequests(),
	}
}

// maxServerRequests is upstreams.max_server_requests.
func (m *Manager) maxServerRequests() int {
	if n := m.limits.Load().MaxServerRequests; n > 0 {
		return n
	}
	return mcpclient.DefaultMaxServerRequests
}

// Request is the instance's Handler for requests from a legacy upstream
// (docs/upstreams.md §5): roots/list is answered from the configuration (or
// the client's directory); sampling/createMessage and elicitation/create
// go to the one session that owns every request in flight: to a legacy
// client as a request, through the session's queue, to a 2026 client as
// input_required of its parked call. Anything else is -32601. It never
// waits: the Conn's reader calls it.
func (in *instance) Request(r *mcpclient.Request) {
	switch r.Method {
	case "roots/list":
		r.Reply(in.listRoots())
		return
	case "sampling/createMessage", "elicitation/create":
	default:
		r.Reply(nil, &protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: " + r.Method})
		return
	}
	o, sessions := attribute(r.Owners)
	if o == nil {
		in.mu.Lock()
		in.stats.unattributed++
		in.mu.Unlock()
		in.u.m.log.Warn("upstream request not attributable", "upstream", in.u.name, "method", r.Method, "sessions", sessions)
		r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: cannot attribute %s: %d sessions have requests in flight on %s; set share = \"session\"", r.Method, sessions, in.u.name)})
		return
	}
	params := r.Params
	if r.Method == "sampling/createMessage" {
		// Context from "this server" or "all servers" means nothing behind
		// an aggregator (docs/upstreams.md §5).
		if m, _ := protocol.Members(params); m != nil {
			if _, ok := m["includeContext"]; ok {
				params = withMember(params, "includeContext", "none")
			}
		}
	}
	if o.modern {
		in.u.m.parks.park(o, r, params)
		return
	}
	max := in.u.m.maxServerRequests()
	if !in.queueFor(o).add(&queuedRequest{o: o, r: r, params: params}, max) {
		in.mu.Lock()
		in.stats.refused++
		in.mu.Unlock()
		r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: %d requests from hosted servers already wait for this session's client (upstreams.max_server_requests); try again once it answers", max)})
	}
}

// queueFor is the queue of o's session: its Client's, or the instance's
// own for calls that come from no Session.
func (in *instance) queueFor(o *owner) *clientQueue {
	if o.client != nil {
		return &o.client.requests
	}
	return &in.sessionless
}

// clientQueue holds one session's requests from upstreams for its client
// (docs/upstreams.md §5), within upstreams.max_server_requests: those being
// relayed, each on a goroutine waiting for the client's answer (at most
// server.MaxClientRequests, the places the session has for requests to its
// client), and those waiting for one of those goroutines, which hold no
// goroutine of their own. Beyond the bound the upstream is answered
// -32603 at once. The zero value is ready.
type clientQueue struct {
	mu      sync.Mutex
	waiting []*queuedRequest
	held    int // waiting plus being relayed
	workers int // goroutines relaying
}

// queuedRequest is one upstream request for the session's client.
type queuedRequest struct {
	o      *owner
	r      *mcpclient.Request
	params json.RawMessage
}

// add queues qr unless max requests are held; it reports whether it did.
func (q *clientQueue) add(qr *queuedRequest, max int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held >= max {
		return false
	}
	q.held++
	q.waiting = append(q.waiting, qr)
	if q.workers < server.MaxClientRequests {
		q.workers++
		go q.work()
	}
	return true
}

// work relays queued requests, oldest first, until none waits.
func (q *clientQueue) work() {
	for {
		q.mu.Lock()
		if len(q.waiting) == 0 {
			q.workers--
			q.mu.Unlock()
			return
		}
		qr := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		q.mu.Unlock()
		qr.relay()
		q.mu.Lock()
		q.held--
		q.mu.Unlock()
	}
}

// load is how many requests the queue holds (for tests and status).
func (q *clientQueue) load() (held, workers int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held, q.workers
}

// relay asks the session's client, until the call that owns the request
// ends or the upstream cancels its request, and answers the upstream.
func (qr *queuedRequest) relay() {
	ctx, cancel := context.WithCancel(qr.o.ctx)
	defer cancel()
	defer context.AfterFunc(qr.r.Context(), cancel)()
	if ctx.Err() != nil {
		qr.r.Reply(nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: the call this request belongs to has ended"})
		return
	}
	res, err := server.RequestClient(ctx, qr.r.Method, qr.params)
	qr.r.Reply(clientAnswer(qr.r.Method, res, err))
}

// clientAnswer is the client's answer to a relayed request as the
// upstream gets it.
func clientAnswer(method string, res json.RawMessage, err error) (json.RawMessage, *protocol.Error) {
	if err == nil {
		return res, nil
	}
	var perr *protocol.Error
	if errors.Is(err, server.ErrMissingClientCapability) {
		return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: fmt.Sprintf(
			"snodod: the session that owns this call did not declare the capability %s needs", method)}
	}
	if errors.As(err, &perr) {
		return nil, perr
	}
	return nil, &protocol.Error{Code: protocol.CodeInternalError, Message: "snodod: " + method + " could not be relayed to the client: " + err.Error()}
}

// listRoots answers roots/list from the configuration's roots, or the
// client's working directory for cwd and session instances.
func (in *instance) listRoots() (json.RawMessage, *protocol.Error) {
	type root struct {
		URI  string `json:"uri"`
		Name string `json:"name,omitempty"`
	}
	roots := make([]root, 0, len(in.roots))
	for _, r := range in.roots {
		name := r[strings.LastIndexByte(r, '/')+1:]
		roots = append(roots, root{URI: r, Name: name})
	}
	b, err := json.Marshal(map[string]any{"roots": roots})
	if err != nil {
		return nil, protocol.ErrInvalidResult
	}
	return b, nil
}
