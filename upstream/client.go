package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	"github.com/snodod/snodod/server/executor"
)

// Client is one session as the upstreams see it: who it is, where it
// works, which view it uses (its server.Caller's, copied), and what it
// holds on upstreams (share = "session" instances, resource
// subscriptions), released by Open's release.
type Client struct {
	// ID is the daemon's session id (0 for a process's only session).
	ID uint64
	// Cwd is the client's working directory, sent with the hand-over by
	// snodod connect; "" means the daemon's.
	Cwd string
	// View is "" for the aggregated view, else the upstream passed
	// through.
	View string
	// MayLogIn is its server.Caller's: a request that needs a login may
	// ask the client to open the login's URL; its user's visit logs the
	// daemon in for every client.
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

// Open registers the session of caller: what it holds on upstreams from
// now on (share = "session" instances, resource subscriptions, the
// requests of upstreams waiting for its client) is its own, found by the
// caller its requests carry (server.Caller), and released by release,
// which the caller's owner calls once when the session ends (requests
// still in flight were cancelled with it). A caller of a pass-through
// view must name a configured upstream, else the error lists them.
func (m *Manager) Open(caller *server.Caller) (release func(), err error) {
	if caller.View != "" && !NamedView(caller.View) {
		if err := m.Has(caller.View); err != nil {
			return nil, err
		}
	}
	c := &Client{ID: caller.Session, Cwd: caller.Cwd, View: caller.View, MayLogIn: caller.MayLogIn, m: m}
	m.mu.Lock()
	m.clients[caller] = c
	m.mu.Unlock()
	return func() { m.close(caller, c) }, nil
}

// NamedView reports whether a Caller's View names a [views.NAME] view
// ("@NAME", a spelling no upstream name can have) rather than an upstream
// passed through.
func NamedView(view string) bool { return strings.HasPrefix(view, "@") }

// Warm starts the upstream of caller's pass-through view, which Open
// registered, without waiting for its first request: a client that asked
// for it by name is about to use it. It does not wait; for the aggregated
// view it does nothing.
func (m *Manager) Warm(caller *server.Caller) {
	if c := m.clientOf(caller); c != nil && c.View != "" && !NamedView(c.View) {
		go m.warm(c.View, c)
	}
}

// clientOf is the Client of caller, nil for none (a process's own
// requests). A caller Open no longer holds (its session ended while a
// request of it was still on its way) is a closed Client, as its own was:
// it starts no instance of its own and holds nothing.
func (m *Manager) clientOf(caller *server.Caller) *Client {
	if caller == nil {
		return nil
	}
	m.mu.Lock()
	c := m.clients[caller]
	m.mu.Unlock()
	if c == nil {
		c = &Client{ID: caller.Session, Cwd: caller.Cwd, View: caller.View, MayLogIn: caller.MayLogIn, m: m, closed: true}
	}
	return c
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

// startHook is the lazy start of a view's upstreams (docs/upstreams.md
// §4), installed on every server showing a view (server.StartHook): a
// request that needs an upstream that has no catalog yet (never started,
// no cache) first starts it, so that a list never lacks, and a call never
// sees "Unknown tool" for, a server that is merely not listed yet. Lists,
// reads, subscriptions, completions and a pass-through server/discover
// need every such upstream of the view, and wait for each at most
// upstreams.list_wait from the start of its start (listWaitUntil): one
// slow server never holds a list back, and the runtime announces its
// items when they arrive. A call or a prompt needs the one upstream its
// prefix names, and waits for its start, up to start_timeout. A
// pass-through view's legacy initialize waits as a list does, so that a
// server that starts in time answers with its own serverInfo,
// instructions and capabilities, which a legacy client reads only once;
// later than that the answer is the view's placeholder (the configured
// name, every capability, no instructions), and list_changed follows when
// the server arrives (docs/upstreams.md, "chose differently" 3).
type startHook struct {
	m    *Manager
	view string // the pass-through view's upstream; "" for the aggregated view
	// held, for a named view, says which upstreams it holds: only those
	// are started for its lists (nil: every one).
	held func(name string) bool
}

var _ server.StartHook = startHook{}

// Ready is the common case: every upstream has a catalog, or the method
// needs none.
func (h startHook) Ready(req *server.Request) bool {
	if h.m.pinBlocking.Load() && pinChecked[req.Method] {
		return false // Start refuses what the pins hold (pinRefusal)
	}
	if req.Method == "ping" || h.m.allListed.Load() {
		return true
	}
	needs, _, _ := h.needs(req)
	return needs == nil
}

// needs says which upstreams req needs listed, which one it is for when
// it names one, and whether its wait is list_wait's (else the target's
// start); nil needs nothing.
func (h startHook) needs(req *server.Request) (needs func(*upstream) bool, target *upstream, bounded bool) {
	m := h.m
	bounded = true
	all := func(*upstream) bool { return true }
	switch req.Method {
	case "tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "completion/complete":
		needs = all
	case "initialize", "server/discover":
		// A client's handshake: a pass-through view answers with its
		// upstream's identity.
		if h.view != "" {
			if u := m.upstream(h.view); u != nil && u.currentCatalog() == nil {
				needs = all
			}
		}
	case "tools/call", "prompts/get":
		bounded = false
		if h.view != "" {
			needs = all
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
	if needs != nil && h.view != "" {
		target = m.upstream(h.view)
	}
	if needs != nil && h.held != nil {
		inner := needs
		needs = func(u *upstream) bool { return h.held(u.name) && inner(u) }
		if target != nil && !h.held(target.name) {
			target = nil
		}
	}
	return needs, target, bounded
}

// Start starts what req needs and waits for it, as startHook says.
func (h startHook) Start(ctx context.Context, req *server.Request) error {
	if perr := h.start(ctx, req); perr != nil {
		return perr
	}
	return nil
}

// start is Start, but for a 2026 request that must log in first (an
// *server.InputFirst): a nil *protocol.Error is not a nil error.
func (h startHook) start(ctx context.Context, req *server.Request) error {
	m := h.m
	if err := m.pinRefusal(h.view, req); err != nil {
		return err
	}
	needs, target, bounded := h.needs(req)
	if needs == nil {
		return nil
	}
	c := m.clientOf(req.State.Caller())
	if bounded {
		failed := m.ensureListed(ctx, c, h.view, needs, true)
		if target != nil && req.Method != "server/discover" && req.Method != "initialize" {
			failed = c.loginFirst(ctx, req, target, failed, func() map[*upstream]error { return m.ensureListed(ctx, c, h.view, needs, true) })
		}
		var f *failure
		if target != nil && req.Method != "server/discover" && req.Method != "initialize" && target.currentCatalog() == nil && errors.As(failed[target], &f) {
			// A pass-through view's only server never listed and cannot
			// start now: its state says why, rather than an empty list.
			return f.rpcError()
		}
		return nil
	}
	if target != nil && target.currentCatalog() == nil {
		// Waiting for a start may outlast session.request_timeout, as the
		// relayed call that follows may.
		executor.ExtendDeadline(ctx, relayDeadline(target.conf()))
	}
	failed := m.ensureListed(ctx, c, h.view, needs, false)
	if target != nil {
		relist := func() map[*upstream]error { return m.ensureListed(ctx, c, h.view, needs, false) }
		failed = c.loginFirst(ctx, req, target, failed, relist)
		var first *server.InputFirst
		if failed, first = c.loginFirst2026(ctx, req, target, failed, relist); first != nil {
			return first
		}
	}
	if target != nil && target.currentCatalog() == nil && ctx.Err() == nil {
		// Never listed, and cannot be now: its state says why, rather
		// than "Unknown tool" (docs/upstreams.md §7).
		var f *failure
		if errors.As(failed[target], &f) {
			return f.rpcError()
		}
		if errors.Is(failed[target], errStopped) {
			return replacedFailure(target.name).rpcError()
		}
		if in, err := target.instanceFor(c); err == nil {
			return in.unavailable().rpcError()
		}
	}
	return nil
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
func (c *Client) loginFirst(ctx context.Context, req *server.Request, target *upstream, failed map[*upstream]error, relist func() map[*upstream]error) map[*upstream]error {
	ss := req.State
	if c == nil || !c.MayLogIn || ss == nil || !ss.Legacy() || !declaresURLElicitation(ss.ClientCapabilities()) {
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

// loginFirst2026 is loginFirst for a 2026 client: its request, a call of
// target's tool or prompt that target has never listed, cannot be
// relayed, so the relay's input_required (loginThrough2026) cannot
// happen either; the runtime answers it for the start hook instead
// (server.InputFirst), with the relay's state, whose retry the relay
// handler knows (loginRetried). The retry comes back here first: while
// the login it was shown is under way it waits for it (awaitLogin), then
// lists again. It returns the failures, and the InputFirst to answer
// when the client is to be asked (again).
func (c *Client) loginFirst2026(ctx context.Context, req *server.Request, target *upstream, failed map[*upstream]error, relist func() map[*upstream]error) (map[*upstream]error, *server.InputFirst) {
	split := req.Split // the decoder's, when the transport had one
	if split == nil {
		own, ok := protocol.SplitParams(req.Params)
		if !ok {
			return failed, nil
		}
		split = &own
	}
	if c == nil || !c.MayLogIn || !split.Modern || !mayAskInput(req.Method) ||
		target.currentCatalog() != nil || !needsLogin(failed[target]) ||
		!declaresURLElicitation(split.Meta.Value(protocol.MetaClientCapabilities)) {
		return failed, nil
	}
	if split.Members.Has("requestState") {
		if r, err := target.remoteOf(); err == nil {
			r.loginMu.Lock()
			el := r.elicited
			r.loginMu.Unlock()
			if el != nil {
				if err := target.awaitLogin(ctx, el); err != nil {
					failed[target] = target.loginFailure(failed[target], err.Error())
					return failed, nil
				}
				if failed = relist(); target.currentCatalog() != nil || !needsLogin(failed[target]) {
					return failed, nil
				}
			}
		}
	}
	res, err := target.loginThrough2026(ctx, req.Method, failed[target])
	if err != nil {
		failed[target] = err
		return failed, nil
	}
	return failed, &server.InputFirst{Result: res}
}

// close ends c's hold on the upstreams (Open's release): its share =
// "session" instances stop, its resource subscriptions are released.
// Idempotent.
func (m *Manager) close(caller *server.Caller, c *Client) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	sessions, subs := c.sessions, c.subs
	c.sessions, c.subs = nil, nil
	c.mu.Unlock()
	m.mu.Lock()
	if m.clients[caller] == c {
		delete(m.clients, caller)
	}
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
func (m *Manager) ensureListed(ctx context.Context, c *Client, view string, needs func(*upstream) bool, bounded bool) map[*upstream]error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[*upstream]error{}
	wait := m.listWait()
	for _, u := range m.sorted() {
		cfg := u.conf()
		if cfg.Disabled || cfg.Start == "manual" || u.currentCatalog() != nil || !needs(u) || view != "" && u.name != view {
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
