package daemon

import (
	"crypto/subtle"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	toml "github.com/knadh/koanf/parsers/toml/v2"
	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/protocol"
	"github.com/snodod/snodod/server"
	mcphttp "github.com/snodod/snodod/transport/http"
	"github.com/snodod/snodod/upstream"
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
	views map[string]*server.Server
	// named are the [views.NAME] views' servers, by "@NAME" (the spelling
	// of server.Caller.View and of the HTTP path: docs/views.md).
	named  map[string]*server.Server
	routes map[string]*route
	tokens []viewToken // http.tokens, read when the generation is built
	detach []func()    // the pass-through views' (AttachView)
	// namedDetach are the named views' (AttachNamed), by "@NAME"; a
	// reload that keeps the aggregated server takes over the servers of
	// the views it keeps, with their detach (attachViews).
	namedDetach map[string]func()
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
	for _, detach := range g.namedDetach {
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
	g.named = make(map[string]*server.Server, len(g.cfg.Views))
	for _, v := range g.cfg.Views {
		base := g.cfg.Server.Name
		if base == "" { // a Config built by hand
			base = "snodod"
		}
		srv, err := catalog.ViewServer(g.cfg, base+"@"+v.Name, d.log)
		if err != nil {
			return err
		}
		g.named["@"+v.Name] = srv
	}
	var err error
	g.tokens, err = loadViewTokens(g)
	return err
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
	g.namedDetach = make(map[string]func(), len(g.named))
	for name, srv := range g.named {
		if prev != nil && prev.srv == g.srv && prev.named[name] != nil && prev.namedDetach[name] != nil {
			// A view the reload keeps: its sessions open on prev see the
			// new definition too, announced by list_changed
			// (docs/views.md, Reload).
			srv = prev.named[name]
			g.named[name] = srv
			delete(prev.namedDetach, name)
		}
		g.namedDetach[name] = d.ups.AttachNamed(srv, g.cfg.View(strings.TrimPrefix(name, "@")))
		r := d.newRoute(g, name, srv)
		r.access = d.viewAccess(g, name)
		g.routes[name] = r
	}
}

// namedView resolves a "@NAME" view of g: its configuration, or the error
// naming the configured views.
func namedView(g *generation, view string) (*config.View, error) {
	name := strings.TrimPrefix(view, "@")
	if v := g.cfg.View(name); v != nil {
		return v, nil
	}
	names := g.cfg.ViewNames()
	if len(names) == 0 {
		return nil, fmt.Errorf("unknown view %q: no view is configured ([views.NAME] in the configuration)", name)
	}
	return nil, fmt.Errorf("unknown view %q; the views are %s", name, strings.Join(names, ", "))
}

// namedConfig is the configuration of g's view "@NAME", or nil (another
// kind of view, or an unknown name).
func namedConfig(g *generation, view string) *config.View {
	if !upstream.NamedView(view) {
		return nil
	}
	return g.cfg.View(view[1:])
}

// viewAllowed reports whether uid may open view under g: the daemon's own
// uid opens every view; a view with allowed_uids opens to those; any other
// (the aggregated one, a pass-through, a named view without allowed_uids)
// to daemon.allowed_uids (docs/security.md, "Who may open which view").
func (d *Daemon) viewAllowed(g *generation, view string, uid int) bool {
	if uid == d.uid {
		return true
	}
	if upstream.NamedView(view) {
		if v := g.cfg.View(strings.TrimPrefix(view, "@")); v != nil && len(v.AllowedUIDs) > 0 {
			return slices.Contains(v.AllowedUIDs, uid)
		}
	}
	return slices.Contains(g.cfg.Daemon.AllowedUIDs, uid)
}

// anyViewAllows reports whether some view of g opens to uid: such a peer is
// admitted to the control socket for connect only, and only to its views.
func anyViewAllows(g *generation, uid int) bool {
	for _, v := range g.cfg.Views {
		if slices.Contains(v.AllowedUIDs, uid) {
			return true
		}
	}
	return false
}

// genRoutes resolves the HTTP endpoint's views (docs/upstreams.md §2): the
// aggregated view at http.path, an upstream passed through at
// http.path/NAME, each from the generation new sessions use, so that a
// request after a reload is served by the reloaded catalog.
type genRoutes struct{ d *Daemon }

// Access is the rule of a named view (viewAccess); nil for the others,
// which the handler's own rule serves.
func (v genRoutes) Access(name string) func(mcphttp.Peer, string) *protocol.Error {
	if r := v.d.gen.Load().routes[name]; r != nil {
		return r.access
	}
	return nil
}

// Missing names the known views for an unknown "@NAME".
func (v genRoutes) Missing(name string) string {
	if !upstream.NamedView(name) {
		return ""
	}
	if _, err := namedView(v.d.gen.Load(), name); err != nil {
		return err.Error()
	}
	return ""
}

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
	// access is a named view's rule (viewAccess); nil for the others.
	access func(mcphttp.Peer, string) *protocol.Error

	stateless atomic.Pointer[server.Caller]
	sessions  atomic.Int64 // legacy sessions open (openSession), for status
	mu        sync.Mutex   // guards the stateless caller's making and its end
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
	r.sessions.Add(1)
	return c, func() {
		r.sessions.Add(-1)
		end()
		r.g.release()
	}
}

// hasView checks that view names a view a session may open: "" the
// aggregated one, "@NAME" a configured view, else a configured upstream
// passed through; the error names the known ones.
func (d *Daemon) hasView(view string) error {
	if upstream.NamedView(view) {
		_, err := namedView(d.gen.Load(), view)
		return err
	}
	return d.ups.Has(view)
}

// viewToken is one file of http.tokens: a bearer token and the views it
// opens, by "@NAME".
type viewToken struct {
	file  string
	token []byte
	views []string
}

// loadViewTokens reads g's http.tokens files (docs/views.md, Access):
// each a TOML table with token (at least config.MinSecretBytes bytes) and
// views, the names of configured views.
func loadViewTokens(g *generation) ([]viewToken, error) {
	var out []viewToken
	for _, file := range g.cfg.HTTP.Tokens {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("http.tokens: %w", err)
		}
		m, err := toml.Parser().Unmarshal(b)
		if err != nil {
			return nil, fmt.Errorf("http.tokens: %s is not TOML (token = \"…\", views = [\"NAME\"]): %w", file, err)
		}
		tok, _ := m["token"].(string)
		if tok = strings.TrimSpace(tok); len(tok) < config.MinSecretBytes {
			return nil, fmt.Errorf("http.tokens: %s needs token = a string of at least %d bytes", file, config.MinSecretBytes)
		}
		list, _ := m["views"].([]any)
		if len(list) == 0 {
			return nil, fmt.Errorf("http.tokens: %s needs views = [the names of the views it opens]", file)
		}
		vt := viewToken{file: file, token: []byte(tok)}
		for _, it := range list {
			name, _ := it.(string)
			if _, err := namedView(g, "@"+name); err != nil {
				return nil, fmt.Errorf("http.tokens: %s: %w", file, err)
			}
			vt.views = append(vt.views, "@"+name)
		}
		out = append(out, vt)
	}
	return out, nil
}

// viewAccess is the HTTP access rule of g's view (docs/security.md, "Who
// may open which view"): a local peer that viewAllowed allows; the token
// of http.auth_token_file; a token of http.tokens naming the view; with
// http.allow_unauthenticated, anyone, for a view without allowed_uids.
func (d *Daemon) viewAccess(g *generation, view string) func(mcphttp.Peer, string) *protocol.Error {
	name := view[1:]
	return func(p mcphttp.Peer, bearer string) *protocol.Error {
		if p.Local && p.Err == nil && d.viewAllowed(g, view, p.UID) {
			return nil
		}
		if bearer != "" {
			if l := d.http; l != nil && l.bearer != "" && subtle.ConstantTimeCompare([]byte(bearer), []byte(l.bearer)) == 1 {
				return nil
			}
			for _, vt := range g.tokens {
				if subtle.ConstantTimeCompare([]byte(bearer), vt.token) == 1 {
					if slices.Contains(vt.views, view) {
						return nil
					}
					return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Forbidden: this token does not open view " + name}
				}
			}
			return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Unauthorized: the token opens no view " + name}
		}
		v := g.cfg.View(name)
		if g.cfg.HTTP.AllowUnauthenticated && v != nil && len(v.AllowedUIDs) == 0 {
			return nil
		}
		if p.Local && p.Err == nil {
			return &protocol.Error{Code: protocol.CodeInvalidRequest,
				Message: fmt.Sprintf("Connection refused: uid %d may not open view %s; send Authorization: Bearer <a token of http.tokens that names it>", p.UID, name)}
		}
		return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: "Unauthorized: view " + name + " needs Authorization: Bearer <a token of http.tokens that names it>"}
	}
}

// viewRows are the status rows of g's named views; sessions are the
// table's rows.
func (d *Daemon) viewRows(g *generation, sessions []control.Session) []control.View {
	var out []control.View
	for _, v := range g.cfg.Views {
		row := control.View{Name: v.Name, AllowedUIDs: v.AllowedUIDs}
		for _, u := range g.cfg.MCPServers {
			if v.Holds(u.Name) && !u.Disabled {
				row.Servers++
			}
		}
		if srv := g.named["@"+v.Name]; srv != nil {
			row.Tools, row.Prompts, row.Resources = upstream.ViewTools(srv), len(srv.PromptNames()), srv.ResourceCount()
		}
		for _, s := range sessions {
			if s.View == "@"+v.Name {
				row.Sessions++
			}
		}
		if r := g.routes["@"+v.Name]; r != nil {
			row.Sessions += int(r.sessions.Load())
		}
		out = append(out, row)
	}
	return out
}
