package daemon

import (
	"sync"
	"sync/atomic"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
)

// What one configuration generation builds for the views
// (docs/upstreams.md §2) and owns until no session uses it: the aggregated
// view's attachment to the hosted upstreams (its server is the catalog's),
// a pass-through server per configured upstream, built by the factory of
// the aggregated one (catalog.ViewServer) so that both sign with
// server.state_key_file, and the views the HTTP endpoint serves. Sessions
// are served by those servers themselves: who asks travels on the
// session's state (server.Caller), not in a wrapper.

// genHold counts who holds a generation: one while it is the one new
// sessions use, plus every session started with it (a socket's, a
// connect's, a legacy HTTP one's). The last to let go detaches what the
// generation attached.
type genHold struct {
	users atomic.Int64
	// aggregate detaches the generation's server from the upstreams; the
	// next generation takes it over when it keeps the server (a reload
	// that changed no server.* key).
	aggregate func()
	// views are the pass-through views' servers, by upstream name, and
	// routes the HTTP endpoint's views ("" the endpoint itself); both are
	// set before the generation is used and never changed.
	views  map[string]*server.Server
	routes map[string]*route
	detach []func() // the views' (AttachView)
}

// acquire holds g for a session; false when g was let go already (a
// reload replaced it and its last session ended), so that nothing is
// served on a detached server.
func (g *generation) acquire() bool {
	for {
		n := g.users.Load()
		if n == 0 {
			return false
		}
		if g.users.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release lets go of one hold; the last detaches the generation's
// servers from the upstreams and releases its HTTP views' callers.
func (g *generation) release() {
	if g.users.Add(-1) != 0 {
		return
	}
	if g.aggregate != nil {
		g.aggregate()
	}
	for _, detach := range g.detach {
		detach()
	}
	for _, r := range g.routes {
		r.close()
	}
}

// hold returns g held for one more session, or, when g was let go since,
// the current generation held.
func (d *Daemon) hold(g *generation) *generation {
	for !g.acquire() {
		g = d.gen.Load()
	}
	return g
}

// buildViews builds g's pass-through servers, one per configured
// upstream, with the factory of the aggregated view's server.
func (d *Daemon) buildViews(g *generation) error {
	g.views = make(map[string]*server.Server, len(g.cfg.MCPServers))
	for _, u := range g.cfg.MCPServers {
		srv, err := catalog.ViewServer(g.cfg, u.Name, d.log)
		if err != nil {
			return err
		}
		g.views[u.Name] = srv
	}
	return nil
}

// attachViews attaches g's servers to the upstreams: the aggregated one
// (or takes over prev's attachment of the same server), and the
// pass-through ones; and makes g's HTTP views. Called before g is used,
// once the manager applied g's configuration.
func (d *Daemon) attachViews(g, prev *generation) {
	if prev != nil && prev.srv == g.srv {
		g.aggregate, prev.aggregate = prev.aggregate, nil
	} else {
		g.aggregate = d.ups.Attach(g.srv, g.srv.Instructions())
	}
	g.routes = make(map[string]*route, len(g.views)+1)
	g.routes[""] = d.newRoute(g, "", g.srv)
	for name, srv := range g.views {
		g.detach = append(g.detach, d.ups.AttachView(srv, name))
		g.routes[name] = d.newRoute(g, name, srv)
	}
}

// genRoutes resolves the HTTP endpoint's views (docs/upstreams.md §2): the
// aggregated view at http.path, an upstream passed through at
// http.path/NAME, each from the generation new sessions use, so that a
// request after a reload is served by the reloaded catalog.
type genRoutes struct{ d *Daemon }

func (v genRoutes) View(name string) (mcphttp.View, bool) {
	r := v.d.gen.Load().routes[name]
	if r == nil {
		return mcphttp.View{}, false
	}
	return r.view(), true
}

// route is one view of a generation as the HTTP endpoint serves it. A
// legacy session is opened as a daemon session of the view (openSession),
// so that what it holds on hosted upstreams (share = "session" instances,
// resource subscriptions) is its own and released when it ends. 2026
// POSTs keep nothing between requests, so all of them are served as one
// long-lived caller of the view (stateless), registered at the view's
// first request (which starts a pass-through view's server, as a connect
// to the view does) and released with the generation: a share = "session"
// upstream has one instance for every 2026 HTTP client of this node. HTTP
// clients send no working directory: share = "cwd" and "session" upstreams
// start in the daemon's (docs/upstreams.md §3).
type route struct {
	d    *Daemon
	g    *generation
	name string
	base mcphttp.View // the view without its 2026 caller

	stateless atomic.Pointer[server.Caller]
	mu        sync.Mutex // guards the stateless caller's making and its end
	closed    bool
	end       func() // the stateless caller's release
}

func (d *Daemon) newRoute(g *generation, name string, srv *server.Server) *route {
	r := &route{d: d, g: g, name: name}
	r.base = mcphttp.View{Dispatcher: srv, Open: r.openSession}
	return r
}

// view is the view with the caller of its 2026 POSTs.
func (r *route) view() mcphttp.View {
	v := r.base
	if v.Caller = r.stateless.Load(); v.Caller == nil {
		v.Caller = r.open()
	}
	return v
}

// open makes the stateless caller; nil once the generation was let go.
func (r *route) open() *server.Caller {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.stateless.Load(); c != nil || r.closed {
		return c
	}
	c := &server.Caller{Session: r.d.sessions.newID(), View: r.name, Kind: "http"}
	end, err := r.d.ups.Open(c)
	if err != nil {
		return nil // the upstream was removed by a reload meanwhile
	}
	r.end = end
	r.stateless.Store(c)
	r.d.ups.Warm(c) // a pass-through view's first request: its server is about to be used
	return c
}

// close releases the stateless caller, for good.
func (r *route) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.end != nil {
		r.end()
		r.end = nil
	}
}

// openSession is the view's Open: the caller of one new legacy HTTP
// session, under an id of its own, holding the generation until the
// session ends.
func (r *route) openSession() (*server.Caller, func()) {
	if !r.g.acquire() {
		return nil, func() {} // a reload let the generation go meanwhile
	}
	c := &server.Caller{Session: r.d.sessions.newID(), View: r.name, Kind: "http"}
	end, err := r.d.ups.Open(c)
	if err != nil {
		return nil, r.g.release
	}
	r.d.ups.Warm(c)
	return c, func() {
		end()
		r.g.release()
	}
}
