package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
)

// Client is one session as the upstreams see it: who it is, where it
// works, which view it uses, and what it holds on upstreams (share =
// "session" instances, resource subscriptions), released by Close.
type Client struct {
	// ID is the daemon's session id (0 for a process's only session).
	ID uint64
	// Cwd is the client's working directory, sent with the hand-over by
	// snodod connect; "" means the daemon's.
	Cwd string
	// View is "" for the aggregated view, else the upstream passed
	// through.
	View string
	// MayLogIn lets a request of this client that needs a login to a
	// remote server ask the client to open the login's URL (URL-mode
	// elicitation, docs/upstreams.md §9): its user's visit logs the daemon
	// in for every client. The daemon sets it, before the session serves,
	// for a client of its own uid only; Session leaves it false.
	MayLogIn bool

	m *Manager

	mu       sync.Mutex
	closed   bool
	sessions map[string]bool        // upstreams with a share = "session" instance for it
	subs     map[subscription]int   // resource subscriptions held, by upstream and URI
	cwdKeys  map[string]renderedKey // by upstream name: upstream.cwdKey's answer
	used     map[string]bool        // upstreams it sent a request to (status's SESSIONS)

	// requests are the upstreams' requests waiting for this session's
	// client (requests.go).
	requests clientQueue
}

type subscription struct{ upstream, uri string }

// renderedKey is the share key of a client's cwd instance on the upstream
// of fingerprint.
type renderedKey struct{ fingerprint, key string }

type clientKey struct{}

// clientFrom is the client a request comes from, nil outside a Session.
func clientFrom(ctx context.Context) *Client {
	c, _ := ctx.Value(clientKey{}).(*Client)
	return c
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// markUsed records that c sent a request to upstream.
func (c *Client) markUsed(upstream string) {
	c.mu.Lock()
	if !c.used[upstream] {
		if c.used == nil {
			c.used = map[string]bool{}
		}
		c.used[upstream] = true
	}
	c.mu.Unlock()
}

// uses reports whether c uses upstream: it passes it through, sent it a
// request, or holds a subscription on it.
func (c *Client) uses(upstream string) bool {
	if c.View == upstream {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used[upstream] {
		return true
	}
	for sub, n := range c.subs {
		if sub.upstream == upstream && n > 0 {
			return true
		}
	}
	return false
}

// track records that upstream has a share = "session" instance for c.
func (c *Client) track(upstream string) {
	c.mu.Lock()
	if c.sessions == nil {
		c.sessions = map[string]bool{}
	}
	c.sessions[upstream] = true
	c.mu.Unlock()
}

// Session is the Dispatcher of one session: the view's server, with each
// request tagged with the session's Client. Its methods may be called as
// any server.Dispatcher's.
type Session struct {
	Client *Client
	srv    *server.Server
}

var _ server.Dispatcher = (*Session)(nil)

// Session returns the Dispatcher for session id, whose client works in cwd
// and asked for view: "" is the aggregated view served by aggregated (the
// daemon's server, which Attach must have been given), a name is that
// upstream passed through. An unknown name is an error listing the
// configured ones. The caller ends it with Close when the session ends.
func (m *Manager) Session(id uint64, view, cwd string, aggregated *server.Server) (*Session, error) {
	c := &Client{ID: id, Cwd: cwd, View: view, m: m}
	srv := aggregated
	if view != "" {
		var err error
		if srv, err = m.passThrough(view); err != nil {
			return nil, err
		}
		go m.warm(view, c)
	}
	if srv == nil {
		return nil, fmt.Errorf("upstream: no server for the aggregated view")
	}
	m.mu.Lock()
	m.clients[c] = struct{}{}
	m.mu.Unlock()
	return &Session{Client: c, srv: srv}, nil
}

// warm starts a pass-through session's upstream without waiting for its
// first request: a client that asked for it by name is about to use it.
func (m *Manager) warm(name string, c *Client) {
	u := m.upstream(name)
	if u == nil || u.conf().Disabled || u.conf().Start == "manual" {
		return
	}
	in, err := u.instanceFor(c)
	if err != nil {
		return
	}
	// acquire also ends when the manager stops.
	ctx, cancel := context.WithTimeout(context.Background(), u.conf().StartTimeout)
	defer cancel()
	_, _, _ = in.acquire(ctx, 0)
}

// Initialize is the view server's. A pass-through view whose upstream has
// never been listed first waits for its start as a list does, at most
// upstreams.list_wait from the start's beginning, so that a server that
// starts in time answers with its own serverInfo, instructions and
// capabilities, which a legacy client reads only once. Later than that,
// the answer is the view's placeholder (the configured name, every
// capability, no instructions) and list_changed follows when the server
// arrives (docs/upstreams.md, "chose differently" 3). The session's
// coordinator waits with it: nothing else of this session can be served
// before its initialize anyway.
func (s *Session) Initialize(ss *server.SessionState, params json.RawMessage) (any, string, *protocol.Error) {
	if s.Client.View != "" {
		if u := s.Client.m.upstream(s.Client.View); u != nil && u.currentCatalog() == nil {
			s.Client.m.ensureListed(context.Background(), s.Client, func(*upstream) bool { return true }, true)
		}
	}
	return s.srv.Initialize(ss, params)
}

// ToolParamHeaders is the view server's: the Mcp-Param-<Name> headers a
// 2026 HTTP client sends with a tools/call (docs/protocol.md §13.3).
func (s *Session) ToolParamHeaders(tool string) (map[string]string, bool) {
	return s.srv.ToolParamHeaders(tool)
}

// Notify is the view server's.
func (s *Session) Notify(ss *server.SessionState, method string, params json.RawMessage) {
	s.srv.Notify(ss, method, params)
}

// Dispatch serves req on the view's server, tagged with the session.
// A request that needs an upstream that has no catalog yet (never
// started, no cache) first starts it (docs/upstreams.md §4: lazy start on
// "a list with no cache", and never "Unknown tool" for a server that is
// merely not listed yet). Lists, reads, subscriptions, completions and a
// pass-through server/discover need every such upstream of the view, and
// wait for each at most upstreams.list_wait from the start of its start
// (listWaitUntil): one slow server never holds a list back, and the
// runtime announces its items when they arrive. A call or a prompt needs
// the one upstream its prefix names, and waits for its start, up to
// start_timeout.
func (s *Session) Dispatch(ctx context.Context, req *server.Request) server.Outcome {
	ctx = context.WithValue(ctx, clientKey{}, s.Client)
	m := s.Client.m
	if m.allListed.Load() {
		return s.srv.Dispatch(ctx, req) // the common case: nothing to start first
	}
	var needs func(*upstream) bool
	var target *upstream // the one upstream the request is for, if known
	bounded := true      // the wait is list_wait's (else the target's start)
	switch req.Method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "completion/complete":
		needs = func(*upstream) bool { return true }
	case "server/discover":
		// A 2026 client's handshake: a pass-through view answers with its
		// upstream's identity, as initialize does.
		if s.Client.View != "" {
			needs = func(*upstream) bool { return true }
		}
	case "tools/call", "prompts/get":
		bounded = false
		if s.Client.View != "" {
			needs = func(*upstream) bool { return true }
			break
		}
		members, _ := protocol.Members(req.Params)
		name, _ := protocol.String(members["name"])
		prefix, _, found := strings.Cut(name, "__")
		needs = func(u *upstream) bool { return found && u.conf().Prefix == prefix }
		for _, u := range m.sorted() {
			if needs(u) {
				target = u
			}
		}
	}
	if needs == nil {
		return s.srv.Dispatch(ctx, req)
	}
	if s.Client.View != "" {
		target = m.upstream(s.Client.View)
	}
	if bounded {
		failed := m.ensureListed(ctx, s.Client, needs, true)
		if target != nil && req.Method != "server/discover" {
			failed = s.loginFirst(ctx, req, target, failed, func() map[*upstream]error { return m.ensureListed(ctx, s.Client, needs, true) })
		}
		var f *failure
		if target != nil && req.Method != "server/discover" && target.currentCatalog() == nil && errors.As(failed[target], &f) {
			// A pass-through view's only server never listed and cannot
			// start now: its state says why, rather than an empty list.
			return server.Outcome{Err: f.rpcError()}
		}
		return s.srv.Dispatch(ctx, req)
	}
	if target != nil && target.currentCatalog() == nil {
		// Waiting for a start may outlast session.request_timeout, as the
		// relayed call that follows may.
		server.ExtendDeadline(ctx, relayDeadline(target.conf()))
	}
	failed := m.ensureListed(ctx, s.Client, needs, false)
	if target != nil {
		failed = s.loginFirst(ctx, req, target, failed, func() map[*upstream]error { return m.ensureListed(ctx, s.Client, needs, false) })
	}
	if target != nil && target.currentCatalog() == nil && ctx.Err() == nil {
		// Never listed, and cannot be now: its state says why, rather
		// than "Unknown tool" (docs/upstreams.md §7).
		var f *failure
		if errors.As(failed[target], &f) {
			return server.Outcome{Err: f.rpcError()}
		}
		if errors.Is(failed[target], errStopped) {
			return server.Outcome{Err: replacedFailure(target.name).rpcError()}
		}
		if in, err := target.instanceFor(s.Client); err == nil {
			return server.Outcome{Err: in.unavailable().rpcError()}
		}
	}
	return s.srv.Dispatch(ctx, req)
}

// loginFirst asks a legacy client that declared URL-mode elicitation to
// log in to target, whose start failed (in failed) for want of a login,
// before its request is dispatched: the request needs target's catalog (a
// call of a tool it has never listed, a pass-through list), so the
// relay's own elicitation (loginelicit.go) cannot happen. After each login
// it lists again (relist), and logs in again when the start still needs
// one (a step-up to more scopes), at most maxLogins times. It returns
// the failures then: target's, when the login did not happen, is the
// error naming snodod login, with why.
func (s *Session) loginFirst(ctx context.Context, req *server.Request, target *upstream, failed map[*upstream]error, relist func() map[*upstream]error) map[*upstream]error {
	ss := req.State
	if !s.Client.MayLogIn || ss == nil || !ss.Legacy() || !declaresURLElicitation(ss.ClientCapabilities()) {
		return failed
	}
	ask := func(ctx context.Context, method string, params any) (json.RawMessage, error) {
		return server.RequestClientBefore(ctx, ss, method, params)
	}
	for range maxLogins {
		if target.currentCatalog() != nil || !needsLogin(failed[target]) {
			break
		}
		if err := target.loginThroughLegacy(ctx, failed[target], ask); err != nil {
			failed[target] = err
			break
		}
		failed = relist()
	}
	return failed
}

// Close ends the session's hold on the upstreams: its share = "session"
// instances stop, its resource subscriptions are released. Requests still
// in flight were cancelled with the session already. Idempotent.
func (s *Session) Close() {
	c := s.Client
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	sessions, subs := c.sessions, c.subs
	c.sessions, c.subs = nil, nil
	c.mu.Unlock()
	m := c.m
	m.mu.Lock()
	delete(m.clients, c)
	m.mu.Unlock()
	for sub, n := range subs {
		if n > 0 {
			m.unhold(c, sub)
		}
	}
	for name := range sessions {
		if u := m.upstream(name); u != nil {
			u.removeInstance(sessionInstanceKey(c.ID))
		}
	}
}

// ensureListed starts, in parallel, the upstreams needs selects that have
// nothing to list, and waits for them: bounded, each at most
// upstreams.list_wait from the start of its start (listWaitUntil), else
// until it is ready or its start fails; always within ctx. It returns why
// those that could not start did not; one still starting when its wait
// ends is not among them (its start goes on).
func (m *Manager) ensureListed(ctx context.Context, c *Client, needs func(*upstream) bool, bounded bool) map[*upstream]error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[*upstream]error{}
	wait := m.listWait()
	for _, u := range m.sorted() {
		cfg := u.conf()
		if cfg.Disabled || cfg.Start == "manual" || u.currentCatalog() != nil || !needs(u) || c.View != "" && u.name != c.View {
			continue
		}
		wg.Go(func() {
			in, err := u.instanceFor(c)
			if err == nil {
				wctx, cancel := ctx, context.CancelFunc(func() {})
				if bounded {
					until, ok := in.listWait(time.Now(), wait)
					if !ok {
						// Not worth a wait: it may still need asking (a
						// failed one's on-demand attempt), which an
						// ended context does without waiting.
						until = time.Time{}
					}
					wctx, cancel = context.WithDeadline(ctx, until)
				}
				_, _, err = in.acquire(wctx, 0)
				cancel()
				if bounded && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					err = nil // still starting: the list goes on without it
				}
			}
			if err != nil {
				mu.Lock()
				failed[u] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return failed
}

var _ server.Resumer = (*Session)(nil)

// ResumeListen is the view server's, tagged with the session: a listen
// stream of a session an upgrade handed over (its relayed URIs are held
// for this session, as a listen's are).
func (s *Session) ResumeListen(ctx context.Context, rec server.ListenRecord) (server.Stream, error) {
	return s.srv.ResumeListen(context.WithValue(ctx, clientKey{}, s.Client), rec)
}

// ResumeSubscriptions is the view server's, tagged with the session: the
// legacy resource subscriptions of a session an upgrade handed over.
func (s *Session) ResumeSubscriptions(ctx context.Context, uris []string) {
	s.srv.ResumeSubscriptions(context.WithValue(ctx, clientKey{}, s.Client), uris)
}
